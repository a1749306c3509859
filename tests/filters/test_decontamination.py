"""Decontamination: HumanEval pasted with changed whitespace, user JSONL benchmarks, exact short entries."""

from __future__ import annotations

import functools
import json
import pickle

import numpy as np
import pyarrow.parquet as pq
from filter_docs import doc_table

from codecorpus import schema
from codecorpus.config import BenchmarkFile, DecontamConfig, FiltersConfig
from codecorpus.filters import decontam
from codecorpus.filters import stage as filters
from codecorpus.pipeline import bodies

HUMANEVAL = {e.label: e for e in decontam.humaneval_entries()}
CLEAN = "def add(a, b):\n    return a + b\n\n\nclass Stack:\n    def __init__(self):\n        self.items = []\n"


def reformat(code: str) -> str:
    """Tabs for indents, extra blank lines, spaces around every parenthesis."""
    code = code.replace("    ", "\t").replace("\n", "\n\n").replace("(", " ( ").replace(")", " ) ")
    return code


def test_humaneval_is_loaded_from_the_package() -> None:
    assert len(HUMANEVAL) == 2 * 164
    assert HUMANEVAL["humaneval:HumanEval/0:prompt"].text.startswith("from typing import List")


def test_humaneval_solution_with_changed_whitespace_is_dropped() -> None:
    entry = HUMANEVAL["humaneval:HumanEval/10:solution"]
    pasted = "import sys\n\n" + "def helper(x):\n" + reformat(entry.text) + "\nprint(helper(1))\n"
    cfg = FiltersConfig(redact=None)
    result = filters.run(doc_table({"text": CLEAN}, {"text": pasted}), cfg)
    assert result.table.column(schema.ID).to_pylist() == ["doc0"]
    drop = result.dropped.to_pylist()[0]
    assert drop[schema.REASON] == schema.DECONTAMINATED
    assert drop[schema.DETAIL] == "humaneval:HumanEval/10:solution"
    assert drop[schema.SCORE] >= 0.9 and drop[schema.THRESHOLD] == 0.5
    assert result.counters == {"decontam.humaneval": 1}
    assert result.table.column(schema.DECONTAM_OVERLAP).to_pylist() == [0.0]


def test_overlap_threshold_both_sides() -> None:
    tokens = decontam.tokenize(HUMANEVAL["humaneval:HumanEval/0:prompt"].text)
    index = decontam.build_index(DecontamConfig(threshold=0.5))
    n = index.ngram
    # a prefix of k tokens holds k - n + 1 of the entry's n-grams
    size = int(index.sizes[index.labels.index("humaneval:HumanEval/0:prompt")])
    half = (size + 1) // 2 + n - 1
    over = " ".join(tokens[: half + 3])
    under = " ".join(tokens[: half - 3])
    found = decontam.match([over, under], index)
    assert found.overlap[0] >= 0.5 > found.overlap[1] > 0
    assert found.label[0] == "humaneval:HumanEval/0:prompt"


def test_user_jsonl_benchmark_and_exact_short_entries(tmp_path) -> None:
    bench = tmp_path / "mbpp.jsonl"
    rows = [
        {"task_id": 11, "code": "def remove_Occ(s, ch):\n    for i in range(len(s)):\n        if s[i] == ch:\n"
         "            s = s[0:i] + s[i + 1:]\n            break\n    return s\n"},
        {"task_id": 12, "code": "return sorted(M, key=sum)"},  # 9 tokens: matched exactly
    ]
    bench.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = DecontamConfig(humaneval=False, files=(BenchmarkFile(name="mbpp", path=str(bench), text_fields=("code",), id_field="task_id"),))
    index = decontam.build_index(cfg)
    assert index.labels == ("mbpp:11:code", "mbpp:12:code") and index.exact_lengths == [9]
    texts = [
        "x = 1\n" + rows[0]["code"].replace("\n", "\r\n"),
        "def sort_matrix(M):\n  return   sorted( M , key = sum )\n",
        "def f(M):\n    return sorted(M, key=len)\n",  # one token differs
        CLEAN,
    ]
    found = decontam.match(texts, index)
    assert found.label == ["mbpp:11:code", "mbpp:12:code", None, None]
    assert found.overlap.tolist()[:2] == [1.0, 1.0]


def test_ngrams_never_span_two_documents() -> None:
    tokens = decontam.tokenize(HUMANEVAL["humaneval:HumanEval/0:prompt"].text)
    index = decontam.build_index(DecontamConfig())
    cut = len(tokens) // 2
    first, second = " ".join(tokens[:cut]), " ".join(tokens[cut:])
    together = decontam.match([first + " " + second], index).overlap[0]
    apart = decontam.match([first, second], index).overlap
    assert together == 1.0 and apart.max() < 1.0


def test_index_is_picklable_and_the_fingerprint_follows_file_bytes(tmp_path) -> None:
    bench = tmp_path / "b.jsonl"
    bench.write_text(json.dumps({"text": "def f(a, b, c):\n    return a * b + c - a // b\n"}) + "\n")
    cfg = DecontamConfig(humaneval=False, files=(BenchmarkFile(name="b", path=str(bench)),))
    index = decontam.build_index(cfg)
    again = pickle.loads(pickle.dumps(index))
    assert np.array_equal(again.hashes, index.hashes) and again.labels == index.labels
    before = decontam.benchmark_fingerprint(cfg)
    bench.write_text(json.dumps({"text": "something else entirely, long enough to index anyway"}) + "\n")
    assert decontam.benchmark_fingerprint(cfg) != before


def test_shard_task_accounting_breaks_drops_down_by_rule_and_language(tmp_path) -> None:
    """Through the runtime's map task: rows_in = rows_out + dropped, by reason and by language."""
    solution = HUMANEVAL["humaneval:HumanEval/3:solution"].text
    table = doc_table(
        {"text": CLEAN},
        {"text": "def below_zero(ops):\n" + reformat(solution)},
        {"text": "{" * 2000, "lang": "JavaScript", "path": "a.js"},
        {"text": "a1111", "lang": "Go", "path": "a.go"},
        {"text": "owner = 'jane.doe@acme-corp.io'\n"},
    )
    run = schema.RunPaths(tmp_path)
    bodies.write_parquet(run.part("langid", 0), table)
    ctx = bodies.JobContext(run, "filters", "h")
    fn = functools.partial(filters.run, cfg=FiltersConfig(), index=decontam.build_index(DecontamConfig()))
    stats = bodies.map_job(ctx, 0, "langid", fn)
    assert (stats["rows_in"], stats["rows_out"]) == (5, 2)
    assert stats["dropped"] == {"decontaminated": 1, "max_line_len": 1, "alpha_frac": 1}
    assert stats["dropped_by_lang"] == {
        "Python": {"decontaminated": 1}, "JavaScript": {"max_line_len": 1}, "Go": {"alpha_frac": 1},
    }
    assert stats["counters"] == {"decontam.humaneval": 1, "redact.email": 1, "redact.docs": 1}
    drops = pq.read_table(run.dropped("filters", 0)).to_pylist()
    assert [(d["reason"], d["detail"]) for d in drops] == [
        ("decontaminated", "humaneval:HumanEval/3:solution"), ("max_line_len", None), ("alpha_frac", None),
    ]
    assert all(d["score"] is not None and d["threshold"] is not None for d in drops)

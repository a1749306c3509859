"""A mixed output set end to end on local Ray: plan file, sampled shards, manifest record, verify."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from codecorpus import schema
from codecorpus.config import RecipeError, load_recipe_data
from codecorpus.manifests.manifest import verify
from codecorpus.reports.build import write_report
from codecorpus.runtime.executor import Executor

FILES = {"py": ("Python", 200), "c": ("C", 120), "go": ("Go", 60), "js": ("JavaScript", 60)}
BUDGET = 40_000
HEADER = {"py": "# file {i}", "c": "/* file {i} */", "go": "package main // file {i}", "js": "// file {i}"}
LINE = {
    "py": "value_{name} = {value}  # {name}", "c": "int value_{name} = {value}; /* {name} */",
    "go": "var value_{name} = {value} // {name}", "js": "const value_{name} = {value}; // {name}",
}
WEIGHTS = {"Python": 0.35, "C": 0.25, "Go": 0.2, "*": 0.2}


def write_corpus(root: Path) -> Path:
    """Unique small files in four languages (no duplicates, all pass the filters)."""
    rng = random.Random(5)
    repo = root / "repo"
    repo.mkdir(parents=True)
    for ext, (_, n) in FILES.items():
        for i in range(n):
            lines = [HEADER[ext].format(i=i)]
            for k in range(rng.randint(2, 6)):
                name = "".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 10)))
                lines.append(LINE[ext].format(name=f"{name}_{k}", value=rng.randint(0, 10**6)))
            (repo / f"f{i:03d}.{ext}").write_text("\n".join(lines) + "\n")
    return root


def recipe(corpus: Path, out: Path, **mix) -> dict:
    return {
        "name": "mix-e2e", "seed": 3, "out": str(out),
        "sources": [{"type": "local", "name": "gen", "path": str(corpus)}],
        "stages": {"ingest": {"shard_bytes": 20_000}, "langid": {}, "filters": {}, "dedup": {"buckets": 2},
                   "tokenize": {}, "pack": {}},
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [
            {"name": "mixed", "seq_len": 512, "mix": {"weights": WEIGHTS, "budget_tokens": BUDGET, **mix}},
            {"name": "plain", "seq_len": 512},
        ],
    }


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory, ray_local):
    corpus = write_corpus(tmp_path_factory.mktemp("mixcorpus"))
    run_dir = tmp_path_factory.mktemp("mixrun")
    Executor(load_recipe_data(recipe(corpus, run_dir)), run_dir, quiet=True).run_pipeline()
    write_report(run_dir)  # as `codecorpus run` does after the run
    return corpus, run_dir


def test_plan_file_and_table(mixed_run):
    _, run_dir = mixed_run
    paths = schema.RunPaths(run_dir)
    plan = json.loads(paths.mix_plan.read_text())["sets"]["mixed"]
    tok = json.loads(paths.stats("tokenize").read_text())
    by_lang = {k: v[2] for k, v in tok["langs_out"].items()}
    groups = {g["group"]: g for g in plan["groups"]}
    assert {g: groups[g]["available_tokens"] for g in groups} == by_lang  # real counts after dedup/tokenize
    assert groups["Go"]["rate"] > 1 > groups["Python"]["rate"]  # up- and down-sampled
    table = pq.read_table(paths.mix_plan_table(".parquet")).to_pylist()
    assert {(r["set"], r["group"]) for r in table} == {("mixed", g) for g in groups}
    assert paths.mix_plan_table(".csv").read_text().startswith('"set","group","status"')


def test_achieved_mixture_within_one_percent_and_recorded(mixed_run):
    _, run_dir = mixed_run
    m = json.loads(schema.RunPaths(run_dir).set_manifest("mixed").read_text())
    plan = {g["group"]: g for g in m["mix"]["plan"]["groups"]}
    achieved = m["mix"]["achieved"]
    assert sum(a["tokens"] for a in achieved.values()) == m["totals"]["tokens"]
    for g, a in achieved.items():
        assert a["tokens"] == plan[g]["planned_tokens"]
        assert abs(a["tokens"] / plan[g]["target_tokens"] - 1) < 0.01, (g, a, plan[g])
        assert m["tokens_by_lang"][g] == a["tokens"]  # re-countable from the segment tables
    assert abs(m["totals"]["tokens"] / BUDGET - 1) < 0.01
    assert m["mix"]["total_variation"] < 0.01 and m["mix"]["share_error_max"] < 0.01
    assert verify(run_dir) == []


def test_copies_land_in_different_sequences_and_plain_set_is_untouched(mixed_run):
    _, run_dir = mixed_run
    paths = schema.RunPaths(run_dir)
    m = json.loads(paths.set_manifest("mixed").read_text())
    copies = 0
    for shard in m["shards"]:
        from codecorpus.manifests.megatron import read_index

        prefix = paths.set_dir("mixed") / shard["prefix"]
        seg = pq.read_table(str(prefix) + schema.SEGMENTS_SUFFIX).to_pylist()
        di = read_index(str(prefix) + schema.IDX_SUFFIX).document_indices
        for j in range(len(di) - 1):
            ids = [s["doc_id"] for s in seg[di[j]:di[j + 1]]]
            assert len(ids) == len(set(ids))
        starts = [s["doc_id"] for s in seg if s["doc_offset"] == 0]
        copies += len(starts) - len(set(starts))
    assert copies > 0  # the upsampled groups really repeat documents
    plain = json.loads(paths.set_manifest("plain").read_text())
    tok = json.loads(paths.stats("tokenize").read_text())
    assert plain["totals"]["tokens"] == tok["tokens_out"] and "mix" not in plain


def test_strict_mix_fails_with_the_group_and_the_fix(mixed_run, tmp_path):
    corpus, _ = mixed_run
    data = recipe(corpus, tmp_path, strict=True)
    data["outputs"][0]["mix"]["weights"] = {"Go": 0.9, "*": 0.1}
    with pytest.raises(RecipeError, match=r"group 'Go' needs .* epochs .* set strict: false"):
        Executor(load_recipe_data(data), tmp_path, quiet=True).run_pipeline()


def test_report_shows_plan_vs_achieved(mixed_run):
    _, run_dir = mixed_run
    rows = pq.read_table(schema.RunPaths(run_dir).report_table("mix_plan", ".parquet")).to_pylist()
    m = json.loads(schema.RunPaths(run_dir).set_manifest("mixed").read_text())
    assert {r["group"]: r["achieved_tokens"] for r in rows} == {g: a["tokens"] for g, a in m["mix"]["achieved"].items()}

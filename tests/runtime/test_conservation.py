"""Byte and row conservation: bytes_in + bytes_changed = bytes_out + bytes_dropped, checked per task and stage.

A planted corpus carries each case the accounting must get right: a file over the
size cap (dropped unread, its bytes counted in), a skipped directory and a symlink
(entries, not documents: neither rows nor bytes), and a secret that redaction
rewrites (the bytes it changed are recorded, so the identity still closes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codecorpus import schema
from codecorpus.config import FiltersConfig, load_recipe_data
from codecorpus.filters import stage as filters_stage
from codecorpus.pipeline.bodies import InvariantError, aggregate_stats, result_stats
from codecorpus.runtime.executor import Executor
from codecorpus.stage import MapResult
from conftest import MAIN_PY, write_repos

CAP = 4000
SECRET_LINE = "# deploy questions: jane.doe@corp-mail.net\n"


def plant(root: Path) -> Path:
    write_repos(root)
    a = root / "repo-a"
    (a / "huge.py").write_text(("#" * 99 + "\n") * (2 * CAP // 100))  # 2 * CAP bytes: over the cap
    (a / "link.py").symlink_to("main.py")
    (a / "deploy.py").write_text(MAIN_PY + SECRET_LINE)
    return root


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, ray_local) -> Path:
    corpus = plant(tmp_path_factory.mktemp("corpus"))
    out = tmp_path_factory.mktemp("run") / "run"
    recipe = load_recipe_data({
        "name": "conservation", "seed": 1, "out": str(out),
        "sources": [{"type": "local", "name": "fixture", "path": str(corpus)}],
        "stages": {"ingest": {"shard_bytes": 400, "max_file_bytes": CAP}, "langid": {}, "filters": {}},
    })
    Executor(recipe, out, quiet=True).run_pipeline()
    return out


def stats(run_dir: Path, stage: str) -> dict:
    return json.loads(schema.RunPaths(run_dir).stats(stage).read_text())


def read(path: Path) -> pa.Table:
    return pq.read_table(path)


@pytest.mark.parametrize("stage", ["ingest", "langid", "filters"])
def test_every_stage_conserves_rows_and_bytes(run_dir, stage):
    s = stats(run_dir, stage)
    assert s["rows_in"] == s["rows_out"] + sum(s["dropped"].values())
    assert s["bytes_in"] + s["bytes_changed"] == s["bytes_out"] + s["bytes_dropped"]
    assert s["bytes_dropped"] == sum(s["dropped_bytes"].values())
    paths = schema.RunPaths(run_dir)
    assert s["bytes_out"] == pa.compute.sum(read(paths.stage_dir(stage)).column(schema.BYTES)).as_py()


def test_too_large_file_is_counted_in_unread(run_dir):
    s = stats(run_dir, "ingest")
    huge = next(d for d in read(schema.RunPaths(run_dir).dropped_dir("ingest")).to_pylist() if d["path"] == "huge.py")
    assert huge["reason"] == "too_large" and huge["bytes"] == 2 * CAP
    assert s["dropped_bytes"]["too_large"] == 2 * CAP
    assert s["bytes_in"] >= s["bytes_out"] + 2 * CAP


def test_skipped_dir_and_symlink_are_entries_not_drops(run_dir):
    s = stats(run_dir, "ingest")
    assert s["skipped_entries"] == {"skipped_dir": 1, "symlink": 1}
    assert not {"skipped_dir", "symlink"} & set(s["dropped"])
    skipped = read(schema.RunPaths(run_dir).skipped_dir("ingest")).to_pylist()
    assert sorted((d["path"], d["reason"]) for d in skipped) == [(".git", "skipped_dir"), ("link.py", "symlink")]
    # 13 fixture entries + 3 planted, of which two are entries: 14 documents entered
    assert s["rows_in"] == 14


def test_redaction_records_the_bytes_it_changed(run_dir):
    paths = schema.RunPaths(run_dir)
    before = {r["id"]: r for r in read(paths.stage_dir("langid")).select(["id", "path", "bytes"]).to_pylist()}
    after = read(paths.stage_dir("filters")).select(["id", "bytes", "text", "redacted"]).to_pylist()
    deploy = next(r for r in after if before[r["id"]]["path"] == "deploy.py")
    assert deploy["redacted"] >= 1 and "jane.doe@corp-mail.net" not in deploy["text"]
    changed = sum(r["bytes"] - before[r["id"]]["bytes"] for r in after)
    assert changed != 0 and stats(run_dir, "filters")["bytes_changed"] == changed


def _doc_table(texts: list[str]) -> pa.Table:
    data = [t.encode() for t in texts]
    return pa.table({
        schema.ID: [f"d{i}" for i in range(len(texts))], schema.SOURCE: ["s"] * len(texts),
        schema.REPO: ["r"] * len(texts), schema.PATH: [f"f{i}.py" for i in range(len(texts))],
        schema.REVISION: [""] * len(texts), schema.LICENSE: ["MIT"] * len(texts), schema.LANG: ["Python"] * len(texts),
        schema.KIND: ["code"] * len(texts), schema.TEXT: pa.array(texts, pa.large_string()),
        schema.BYTES: pa.array([len(d) for d in data], pa.int64()),
        schema.CONTENT_HASH: [schema.content_hash(d) for d in data], schema.ENCODING: ["utf-8"] * len(texts),
    })


def test_filters_stage_closes_the_identity_on_its_own():
    table = _doc_table([MAIN_PY + SECRET_LINE, MAIN_PY])
    result = filters_stage.run(table, FiltersConfig(decontam=None))
    assert result.bytes_changed < 0 or result.bytes_changed > 0
    s = result_stats(table.num_rows, sum(table.column(schema.BYTES).to_pylist()), 0, {}, result, 0.0)
    assert s["bytes_in"] + s["bytes_changed"] == s["bytes_out"] + s["bytes_dropped"]


def test_a_rewrite_that_is_not_recorded_breaks_the_task():
    """The checks can fail: a stage that rewrote text without recording it, or left ``bytes`` stale."""
    table = _doc_table(["print(1)\n", "print(2)\n"])
    shorter = _doc_table(["print(1)\n", "p\n"])
    with pytest.raises(InvariantError, match="bytes_changed=0"):
        result_stats(2, 18, 0, {}, MapResult(shorter), 0.0)
    assert result_stats(2, 18, 0, {}, MapResult(shorter, bytes_changed=-7), 0.0)["bytes_out"] == 11
    stale = shorter.set_column(shorter.column_names.index(schema.TEXT), schema.TEXT,
                               pa.array(["print(1)\n", "x\n"], pa.large_string()))
    stale = stale.set_column(stale.column_names.index(schema.BYTES), schema.BYTES, table.column(schema.BYTES))
    with pytest.raises(InvariantError, match="UTF-8"):
        result_stats(2, 18, 0, {}, MapResult(stale), 0.0)


def test_stage_totals_are_checked_too():
    good = result_stats(2, 18, 0, {}, MapResult(_doc_table(["print(1)\n", "print(2)\n"])), 0.0)
    assert aggregate_stats([good, good])["bytes_in"] == 36
    leaky = {**good, "bytes_out": good["bytes_out"] - 1}
    with pytest.raises(InvariantError, match="bytes_changed"):
        aggregate_stats([good, leaky])

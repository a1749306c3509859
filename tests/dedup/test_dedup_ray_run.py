"""Dedup on local Ray: same bytes for 1 and 2 workers, and resume between dedup phases."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from codecorpus import schema
from codecorpus.config import load_recipe_data
from codecorpus.runtime.executor import Executor


def _module(tag: str, n: int = 30) -> list[str]:
    return [f"def {tag}_{i}(alpha, beta):\n    return alpha * {i} + beta - compute_{tag}(alpha, {i})\n"
            for i in range(n)]


def _edit(lines: list[str], frac: float, seed: int) -> str:
    rng = random.Random(seed)
    out = list(lines)
    for i in rng.sample(range(len(out)), int(len(out) * frac)):
        out[i] = f"changed_{seed}_{i} = other_call({seed}, {i})\n"
    return "".join(out)


def write_corpus(root: Path) -> Path:
    """origin (5 files); zfork (4 of origin's files: a fork); app (near and exact copies, own code)."""
    origin = {f"mod{i}.py": "".join(_module(f"origin{i}")) for i in range(5)}
    repos = {
        "origin": origin,
        "zfork": {k: origin[k] for k in ("mod0.py", "mod1.py", "mod2.py", "mod3.py")},
        "app": {
            "near_origin4.py": _edit(_module("origin4"), 0.05, 1),  # near copy of origin/mod4.py
            "a.py": "".join(_module("app")),
            "a_copy.py": "".join(_module("app")),  # exact copy
            "a_near1.py": _edit(_module("app"), 0.04, 2),
            "a_near2.py": _edit(_module("app"), 0.08, 3),
            "own.py": "".join(_module("unique")),
        },
    }
    for repo, files in repos.items():
        for name, text in files.items():
            (root / repo).mkdir(parents=True, exist_ok=True)
            (root / repo / name).write_text(text)
    return root


def recipe(corpus: Path, out: Path) -> dict:
    return {
        "name": "dedup-ray", "seed": 11, "out": str(out),
        "sources": [{"type": "local", "name": "fx", "path": str(corpus)}],
        "stages": {"ingest": {"shard_bytes": 5000}, "langid": {}, "filters": {},
                   "dedup": {"buckets": 3, "num_perm": 128, "forks": {"enabled": True}},
                   "tokenize": {}, "pack": {}},
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [{"name": "short", "seq_len": 64}],
    }


def run(corpus: Path, out: Path, max_tasks: int | None = None):
    return Executor(load_recipe_data(recipe(corpus, out)), out, quiet=True, max_tasks=max_tasks).run_pipeline(until="dedup")


def dedup_files(run_dir: Path) -> dict[str, bytes]:
    """Every dedup output and shuffle file (markers and stats hold timings: excluded)."""
    root = schema.RunPaths(run_dir).stage_dir("dedup")
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("dedup_corpus"))


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory, ray_local) -> Path:
    out = tmp_path_factory.mktemp("dedup_ref")
    run(corpus, out)
    return out


def test_planted_fork_near_and_exact_copies_are_removed(reference):
    paths = schema.RunPaths(reference)
    drops = {(d["repo"], d["path"]): d for d in pq.read_table(paths.dropped_dir("dedup")).to_pylist()}
    forks = {k for k, d in drops.items() if d["reason"] == "fork_of"}
    assert forks == {("zfork", f"mod{i}.py") for i in range(4)}
    assert {drops[k]["detail"] for k in forks} == {"fx/origin"}
    kept = {(r["repo"], r["path"]) for r in pq.read_table(paths.stage_dir("dedup"), columns=["repo", "path"]).to_pylist()}
    assert {("origin", f"mod{i}.py") for i in range(5)} <= kept  # the origin keeps every file
    file_level = {k: d["reason"] for k, d in drops.items() if d["reason"] != "fork_of"}
    assert len(file_level) == 4 and set(file_level.values()) == {"exact_duplicate", "near_duplicate"}
    assert ("app", "near_origin4.py") in file_level and ("app", "own.py") in kept
    stats = json.loads(paths.stats("dedup").read_text())
    assert stats["rows_in"] == stats["rows_out"] + sum(stats["dropped"].values()) == 15
    assert stats["dropped"]["fork_of"] == 4


def test_same_bytes_with_one_and_two_workers(corpus, reference, tmp_path):
    """One task at a time against two at once (the reference) on the same 2-CPU Ray."""
    one = tmp_path / "one"
    run(corpus, one, max_tasks=1)
    a, b = dedup_files(reference), dedup_files(one)
    assert a.keys() == b.keys() and len(a) > 20
    assert [k for k in a if a[k] != b[k]] == []


def test_resume_between_dedup_phases_redoes_only_the_missing_tasks(corpus, reference, tmp_path):
    out = tmp_path / "resumed"
    run(corpus, out)
    paths = schema.RunPaths(out)
    done = paths.done_dir("dedup")
    # a crash after the clusters phase: half the keep tasks and every apply task never completed
    lost = sorted(done.glob("keep-*"))[1:] + sorted(done.glob("part-*"))
    for marker in lost:
        marker.unlink()
    for f in paths.work_dir("dedup", "keep").rglob(f"{schema.shard_name(1)}.parquet"):
        f.unlink()  # and some of the files of a task that never completed
    paths.stats("dedup").unlink()
    earlier = {p: p.stat().st_mtime_ns for ph in ("fkeys", "fdecide", "sig", "pairs", "clusters", "members")
               for p in paths.work_dir("dedup", ph).rglob("*.parquet")}
    assert earlier
    result = run(corpus, out)
    by_stage = {s.name: s for s in result.stages}
    assert by_stage["ingest"].ran_jobs == by_stage["filters"].ran_jobs == 0
    assert by_stage["dedup"].ran_jobs == len(list(done.glob("part-*")))  # every apply task, again
    assert {p: p.stat().st_mtime_ns for p in earlier} == earlier  # completed phases were not recomputed
    assert len(list(done.glob("keep-*"))) == 3
    assert dedup_files(out) == dedup_files(reference)

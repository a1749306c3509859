"""Crashes and poison inputs: the run survives, resumes, and ends with the same bytes.

The runs here are real ``python -m codecorpus run`` processes, killed with
SIGKILL at named checkpoints (``storage/faults.py``), each in its own process
group so the whole local Ray goes down with it, like a machine crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from codecorpus import schema
from codecorpus.config import load_recipe
from codecorpus.runtime.executor import Executor
from conftest import fixture_recipe, run_outputs, write_repos


def _recipe(tmp: Path, corpus: Path) -> Path:
    data = fixture_recipe(corpus, name="faults", seed=3)
    path = tmp / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(recipe: Path, out: Path, fault: str | None = None, fault_dir: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODECORPUS_FAULT")}
    if fault:
        env["CODECORPUS_FAULT"] = fault
        env["CODECORPUS_FAULT_DIR"] = str(fault_dir or out.parent)
    proc = subprocess.Popen(
        [sys.executable, "-m", "codecorpus", "run", str(recipe), "--out", str(out), "--workers", "2", "--quiet"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the rest of the group too: a machine crash
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def setup(tmp_path_factory, ray_local):
    """The recipe and its reference run: in this process, on the suite's Ray (no fault to inject)."""
    tmp = tmp_path_factory.mktemp("faults")
    recipe = _recipe(tmp, write_repos(tmp / "corpus"))
    reference = tmp / "reference"
    Executor(load_recipe(recipe, []), reference, quiet=True).run_pipeline()
    return tmp, recipe, reference


KILL_POINTS = [
    "kill@after:ingest:part-00001",          # during ingest: two shards done
    "kill@after:dedup:pairs-p00001",         # inside a dedup phase (LSH candidate pairs)
    "kill@after:pack:short-part-00001",      # during packing
    "kill@write:manifest.json",              # the set manifest is written but not yet renamed
]


def test_sigkill_at_every_point_then_resume_gives_identical_bytes(setup):
    tmp, recipe, reference = setup
    run_dir = tmp / "killed"
    for point in KILL_POINTS:
        killed = _run(recipe, run_dir, point)
        assert killed.returncode == -signal.SIGKILL, (point, killed.returncode, killed.stderr[-2000:])
        assert not (run_dir / "manifest.json").exists()
    final = _run(recipe, run_dir)
    assert final.returncode == 0, final.stderr
    a, b = run_outputs(reference), run_outputs(run_dir)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []
    assert not list(run_dir.rglob(".*.tmp"))
    manifest = json.loads((run_dir / "shards" / "short" / "manifest.json").read_text())
    assert manifest["totals"]["documents"] == 7  # no document lost or repeated


def test_poison_shard_fails_with_shard_input_and_error_then_a_resume_survives_a_crashed_worker(setup):
    """A poison shard stops the run with its input and error; the resume skips the completed
    shards, and its worker dies on that same task the first time: Ray retries it, and the
    run ends with the reference bytes."""
    tmp, recipe, reference = setup
    run_dir = tmp / "poison"
    failed = _run(recipe, run_dir, "raise@job:filters:part-00003")
    assert failed.returncode != 0
    message = " ".join(failed.stderr.split())
    assert "stage filters, job part-00003" in message
    assert str(schema.RunPaths(run_dir).part("langid", 3)) in message
    assert "InjectedFault" in message
    assert schema.RunPaths(run_dir).done("langid", "part-00003").exists()  # completed work kept
    resumed = _run(recipe, run_dir, "crash-once@job:filters:part-00003", fault_dir=tmp)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed:" in resumed.stderr and "langid 4/4" in resumed.stderr
    assert (tmp / "crashed-job_filters_part-00003").exists()  # the worker did die, and the retry ran
    a, b = run_outputs(reference), run_outputs(run_dir)
    assert [k for k in a if a[k] != b.get(k)] == []

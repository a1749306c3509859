"""The ``codecorpus`` console entry: exit codes and piped output as the command left them, and no
process of the Ray it started left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from conftest import fixture_recipe, processes_left_under, write_repos


def _codecorpus(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codecorpus", *args], capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip


def test_exit_codes_and_messages_are_the_commands(tmp_path):
    assert _codecorpus("--help").returncode == 0
    missing = _codecorpus("manifest", "verify", str(tmp_path / "nothing"))
    assert missing.returncode == 1
    assert "nothing" in missing.stdout + missing.stderr
    unknown = _codecorpus("no-such-command")
    assert unknown.returncode == 2
    assert "No such command" in unknown.stderr


MARK = "CODECORPUS_TEST_RUN_MARK"
"""An environment variable only the processes of one test's run carry: Ray's processes (GCS,
raylet, agents, workers) inherit the driver's environment, so it finds every one of them,
whatever their command line or process title."""


def _marked(mark: str) -> dict[int, str]:
    """The processes whose environment holds ``MARK=mark``: pid -> command line."""
    found = {}
    needle = f"{MARK}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile, or not ours to read
            continue
    return found


def test_no_process_of_a_run_outlives_the_command_by_more_than_5_seconds(tmp_path):
    """Every process a run starts (Ray's included) is gone within 5 s of the command's exit, and Ray
    was stopped, not killed: its raylet took SIGTERM (``ray.shutdown``), so no agent of it reported
    the raylet's "unexpected" termination, which Ray publishes to the driver to print."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(fixture_recipe(write_repos(tmp_path / "corpus"), name="outlive", seed=1)))
    mark = uuid.uuid4().hex
    ray_tmp = Path(tempfile.mkdtemp(prefix="ro", dir="/tmp"))  # short: Ray's socket paths have a length limit
    env = {**os.environ, MARK: mark, "RAY_TMPDIR": str(ray_tmp)}
    cmd = [sys.executable, "-m", "codecorpus", "run", str(recipe), "--out", str(tmp_path / "run"), "--workers", "2"]
    seen: dict[int, str] = {}
    try:
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
            reader = ThreadPoolExecutor(1).submit(proc.communicate, timeout=300)
            while proc.poll() is None:
                seen.update(_marked(mark))
                time.sleep(0.05)
            out, err = reader.result()
        assert proc.returncode == 0, err[-2000:]
        assert any("raylet" in line for line in seen.values()), seen  # the check sees Ray's own processes
        deadline = time.monotonic() + 5
        while (left := _marked(mark)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left == {}, left
        assert "terminat" not in (out + err).lower(), err[-3000:]
        logs = next(ray_tmp.glob("ray/session_2*")) / "logs"
        assert "received SIGTERM" in (logs / "raylet.out").read_text()
        for agent_log in logs.glob("*agent*"):
            assert "Termination is unexpected" not in agent_log.read_text(errors="replace"), agent_log
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_run_prints_its_summary_and_leaves_no_ray_process(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(fixture_recipe(write_repos(tmp_path / "corpus"), name="exit", seed=1)))
    # Ray's session under a directory of this test's own (short: Ray's socket paths have a length limit)
    ray_tmp = Path(tempfile.mkdtemp(prefix="rx", dir="/tmp"))
    try:
        done = _codecorpus("run", str(recipe), "--out", str(tmp_path / "run"), "--workers", "1", "--until", "ingest",
                           env={**os.environ, "RAY_TMPDIR": str(ray_tmp)})  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert "codecorpus run:" in done.stdout  # the summary table, through a pipe, before the fast exit
        assert list(ray_tmp.glob("ray/session_*")), "the run's Ray did not start under RAY_TMPDIR"
        assert processes_left_under(ray_tmp) == []
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_recipe_invalid_beside_rays_start_fails_with_its_message_and_leaves_no_ray_process(tmp_path):
    """The run command starts Ray before the recipe's models validate it (``runtime/launch.py``):
    a recipe whose stage setting is wrong still fails with the key named and exit code 2."""
    data = fixture_recipe(write_repos(tmp_path / "corpus"), name="bad", seed=1)
    data["stages"]["filters"]["max_line_len"] = "long"  # planted: not an int
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data))
    ray_tmp = Path(tempfile.mkdtemp(prefix="rx", dir="/tmp"))
    try:
        done = _codecorpus("run", str(recipe), "--out", str(tmp_path / "run"), "--workers", "1",
                           env={**os.environ, "RAY_TMPDIR": str(ray_tmp)})  # fmt: skip
        assert done.returncode == 2, done.stderr[-2000:]
        assert "max_line_len" in done.stderr
        assert list(ray_tmp.glob("ray/session_*")), "Ray was not started beside the recipe's validation"
        assert processes_left_under(ray_tmp) == []
        assert not (tmp_path / "run").exists()  # nothing of the run was written
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_the_run_command_reaches_rays_start_without_the_recipes_models_or_pyarrow():
    """What the command imports before ``ray.init``: Ray, typer, rich and yaml, not the pydantic
    models, pyarrow or numpy, which the plan thread imports beside Ray's start."""
    script = (
        "import sys\n"
        "import codecorpus.cli, codecorpus.recipe_file, codecorpus.runtime.launch, codecorpus.runtime.session\n"
        "print(sorted(m for m in ('pydantic', 'pyarrow', 'numpy', 'codecorpus.config', 'codecorpus.schema')"
        " if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


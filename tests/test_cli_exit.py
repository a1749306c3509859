"""The ``codecorpus`` console entry ends its process at once: exit codes and piped output as the
command left them, and no process of the Ray it started left behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
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


def test_exit_now_flushes_piped_output_and_keeps_the_code():
    script = "from codecorpus.cli import exit_now\nprint('block-buffered into a pipe', end='')\nexit_now({})"
    done = subprocess.run([sys.executable, "-c", script.format(3)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "block-buffered into a pipe")
    message = subprocess.run([sys.executable, "-c", script.format("'stopped: why'")], capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert (message.returncode, message.stderr.strip()) == (1, "stopped: why")


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


"""``launch.start`` when something fails: the recipe's load, Ray's start, a Ctrl-C during it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from codecorpus.runtime import launch
from conftest import processes_left_under


def _python(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)


def test_a_recipe_that_fails_to_load_stops_the_ray_its_start_started():
    """A caller that gets an error instead of an executor is left no Ray to stop (the CLI stops
    its own anyway; a library caller would not know one runs)."""
    script = (
        "import ray\n"
        "from codecorpus.recipe_file import RecipeError\n"
        "from codecorpus.runtime.launch import start\n"
        "def prepare():\n"
        "    raise RecipeError('planted: the recipe is wrong')\n"
        "try:\n"
        "    start(prepare, 1, quiet=True)\n"
        "except RecipeError as err:\n"
        "    print('raised:', err)\n"
        "print('ray initialized:', ray.is_initialized())\n"
    )
    ray_tmp = Path(tempfile.mkdtemp(prefix="rl", dir="/tmp"))  # short: Ray's socket paths have a length limit
    try:
        done = _python(script, env={**os.environ, "RAY_TMPDIR": str(ray_tmp)})
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.splitlines() == ["raised: planted: the recipe is wrong", "ray initialized: False"]
        assert list(ray_tmp.glob("ray/session_*")), "Ray did not start beside the recipe's load"
        assert processes_left_under(ray_tmp) == []
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_ctrl_c_during_rays_start_returns_without_waiting_for_the_plan(monkeypatch):
    release, loaded = threading.Event(), threading.Event()

    def prepare():
        release.wait(timeout=60)  # held until the interrupt has reached the caller
        loaded.set()
        raise RuntimeError("planted: never used")

    def interrupted(workers, address):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "init_ray", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            launch.start(prepare, 1, quiet=True)
        assert not loaded.is_set()  # the interrupt came back while the recipe was still loading
    finally:
        release.set()


def test_planning_tasks_refuse_to_run_when_rays_start_failed():
    """Without the check, the task's ``.remote()`` would start a default Ray (dashboard and all)
    in the plan thread of a run whose own Ray start had just failed."""
    script = (
        "import threading, ray\n"
        "from codecorpus.runtime.scheduler import PipelineError, PlanTasks\n"
        "started = threading.Event(); started.set()\n"
                "try:\n"
        "    PlanTasks(None, started, None).map('listing', abs, [1])\n"
        "except PipelineError as err:\n"
        "    print('refused:', err)\n"
        "print('ray initialized:', ray.is_initialized())\n"
    )
    done = _python(script)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["refused: planning listing needs Ray, and Ray did not start",
                                        "ray initialized: False"]

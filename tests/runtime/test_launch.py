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
        "import threading, types, ray\n"
        "from codecorpus.runtime.executor import PipelineError, _PlanTasks\n"
        "started = threading.Event(); started.set()\n"
        "executor = types.SimpleNamespace(run=None, ray_ready=started, max_tasks=None)\n"
        "try:\n"
        "    _PlanTasks(executor).map('listing', abs, [1])\n"
        "except PipelineError as err:\n"
        "    print('refused:', err)\n"
        "print('ray initialized:', ray.is_initialized())\n"
    )
    done = _python(script)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["refused: planning listing needs Ray, and Ray did not start",
                                        "ray initialized: False"]


def test_rays_start_runs_with_a_short_switch_interval_and_gives_the_callers_back(monkeypatch):
    """The plan thread would otherwise hold the interpreter lock for 5 ms at a time while
    ``ray.init`` wakes from each of its short polls; the caller's own interval comes back
    when ``start`` fails as when it returns (the same ``finally``)."""
    seen = {}

    def prepare():
        seen["prepare"] = sys.getswitchinterval()
        raise RuntimeError("planted: the recipe is wrong")

    def init(workers, address):
        seen["init"] = sys.getswitchinterval()

    monkeypatch.setattr(launch, "init_ray", init)
    monkeypatch.setattr(launch, "stop_ray", lambda: None)
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.004)
    try:
        with pytest.raises(RuntimeError, match="planted"):
            launch.start(prepare, 1, quiet=True)
        assert seen == {"prepare": launch.START_SWITCH_INTERVAL, "init": launch.START_SWITCH_INTERVAL}
        assert sys.getswitchinterval() == pytest.approx(0.004)
    finally:
        sys.setswitchinterval(previous)


def test_starts_that_overlap_give_the_process_its_own_interval_back_when_the_last_ends():
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.004)
    try:
        first, second = launch._short_switch_interval(), launch._short_switch_interval()
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert sys.getswitchinterval() == launch.START_SWITCH_INTERVAL  # the second start still runs
        second.__exit__(None, None, None)
        assert sys.getswitchinterval() == pytest.approx(0.004)
    finally:
        sys.setswitchinterval(previous)

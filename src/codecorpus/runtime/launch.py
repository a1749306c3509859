"""A run's start: Ray's processes first, the recipe's load and plan beside them.

A local Ray's start is a chain the driver can only wait on: the GCS, the raylet (which
registers once its two agents' port files exist: ``local_start`` writes them ahead where
the agents serve a local run nothing), the driver's connection, then one worker per CPU,
each importing Ray and the task modules. Every Python process
of it imports Ray (0.45 s of CPU here); the driver's own imports (the recipe's pydantic
models, pyarrow, the stages) and its plan take about as long again, and are off that
chain. So the run command imports this module, which imports Ray and nothing heavier of
codecorpus, and ``start`` spawns Ray in the main thread at once while a thread beside
it loads, checks and plans the recipe::

    main thread   import ray -> ray.init ........................ -> warm the workers
    plan thread               recipe's models, load, checks, plan, stage modules

Measured with the bench recipe (``bench/e2e_vs_datatrove.py``, 2 cores): the GCS
spawns 0.5 s after the process starts instead of 0.9 s, and the run's time outside
tasks falls by about 0.2 s. The Ray start needs the CPUs and whether the run directory
is on S3 before the recipe validates; ``recipe_file.local_start_settings`` reads them.

The two threads share one interpreter lock. ``ray.init`` is mostly short sleeps (polling
for the GCS's port file, the raylet's registration) each followed by a little Python, and
a thread that wakes from a sleep waits for the lock until the holder's switch interval
(5 ms by default) is up whenever the plan thread holds it. So ``start`` (Ray's start, the
plan and the warm-up) runs with a 1 ms interval (``START_SWITCH_INTERVAL``) and puts the
process's own back once the last ``start`` running returns.
Measured on this machine with a thread spinning beside it, ``ray.init`` took 1.34-1.58 s
at 5 ms and 0.85-0.87 s at 1 ms (0.70 s alone); on the bench recipe, 15 interleaved runs
each way gave 3.07 s outside tasks on average against 3.18 s.

Ray itself is started, joined and stopped by ``session``; ``executor`` runs the plan.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from codecorpus.runtime.session import in_thread, init_ray, stop_ray

if TYPE_CHECKING:
    from rich.console import Console

    from codecorpus.config import Recipe
    from codecorpus.runtime.executor import Executor

START_SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the interpreter lock while another waits for it, during ``start``."""

Prepare = Callable[[], "tuple[Recipe, Path]"]
"""What ``start`` runs beside Ray's start: the recipe, loaded and checked, and its run directory."""

_SWITCH_LOCK = threading.Lock()
_starts_running = 0
_own_interval = 0.0
"""The process's switch interval before the first of the ``start`` calls running now."""


@contextlib.contextmanager
def _short_switch_interval() -> Iterator[None]:
    """``START_SWITCH_INTERVAL`` while the block runs; starts in several threads at once put the
    process's own interval back when the last of them ends."""
    global _starts_running, _own_interval
    with _SWITCH_LOCK:
        if not _starts_running:
            _own_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(_own_interval, START_SWITCH_INTERVAL))
        _starts_running += 1
    try:
        yield
    finally:
        with _SWITCH_LOCK:
            _starts_running -= 1
            if not _starts_running:
                sys.setswitchinterval(_own_interval)


@_short_switch_interval()
def start(prepare: Prepare, workers: int | None = None, address: str | None = None, *,
          console: Console | None = None, quiet: bool = False, only: str | None = None,
          until: str | None = None, own_process: bool = False) -> Executor:
    """An executor whose recipe is loaded and planned while Ray starts, with Ray's workers warmed meanwhile.

    ``prepare`` runs in a thread beside Ray's start, then the plan (``Executor.plan``, the
    same plan it makes alone) and the import of the stages' task modules; each worker
    imports those while the plan finishes, and the selected stages' driver-side work
    starts in the background after it (``Executor.prefetch``; ``only`` / ``until`` as
    ``run_pipeline`` takes them). ``workers`` is the local Ray's CPUs (None: all cores);
    on a joined cluster (``address``) it caps the run's tasks at once. An error of
    ``prepare`` or of the plan is raised here, once Ray's start has returned, and stops
    the Ray this call started.

    ``own_process``: the calling process runs this recipe and nothing else (the ``codecorpus``
    command). Then, when the recipe runs codecorpus's own stages alone and this call starts Ray
    (so the workers are this run's), the driver and each worker answer pyarrow's pandas probe
    without importing pandas (``storage/pandas_probe.py``: 0.37 s of CPU a process where pandas
    is installed); a user's stage, which may convert pandas objects, keeps pyarrow's own probe.
    """
    owns_ray = not ray.is_initialized()
    ray_ready, specs_known = threading.Event(), threading.Event()
    made: dict[str, Any] = {}

    def plan() -> None:
        try:
            from codecorpus.runtime import executor as runner
            from codecorpus.runtime.remote import import_modules
            from codecorpus.storage.pandas_probe import answer_pandas_probe

            recipe, run_dir = prepare()
            executor = runner.Executor(recipe, run_dir, console=console, quiet=quiet,
                                       max_tasks=workers if address else None)
            executor.ray_ready = ray_ready  # a source planning with tasks waits for Ray (``_PlanTasks``)
            made["executor"], made["modules"] = executor, runner.warm_modules(executor.specs.values())
            made["probe"] = own_process and owns_ray and not recipe.stages.user_stages()
        finally:
            specs_known.set()
        if made["probe"]:
            answer_pandas_probe()  # before the driver's first conversion (plan, stats, the report)
        executor.plan()
        import_modules(made["modules"])  # the driver builds the stages' jobs from these
        executor.prefetch(runner.select_stages(list(executor.specs), only, until))

    planned = in_thread("codecorpus-plan", plan)
    t0 = time.perf_counter()
    try:
        init_ray(workers, address)
    except KeyboardInterrupt:
        ray_ready.set()
        raise  # at once: the plan thread is a daemon, the process does not wait for it
    except BaseException:
        ray_ready.set()  # a plan that needs tasks stops there: Ray is not running (``_PlanTasks``)
        planned.exception()
        raise
    ray_ready.set()
    try:
        specs_known.wait()
        if "executor" in made:
            from codecorpus.runtime.remote import warm_workers  # pyarrow: after Ray's start

            warm_workers(made["modules"], made["probe"])
        ray_seconds = time.perf_counter() - t0
        planned.result()  # raises what the recipe's load or its plan raised
    except BaseException:
        if owns_ray:  # a caller that gets no executor has no Ray to stop
            stop_ray()
        raise
    executor = made["executor"]
    executor.owns_ray, executor.ray_seconds = owns_ray, ray_seconds
    return executor

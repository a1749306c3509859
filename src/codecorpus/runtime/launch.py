"""A run's start: Ray's processes first, the recipe's load and plan beside them.

A local Ray's start is a chain the driver can only wait on: the GCS, the raylet, the
driver's connection, then one worker per CPU, each importing Ray and the task modules. The
driver's own imports (the recipe's pydantic models, pyarrow, the stages) and its plan are off
that chain. So the run command imports this module, which imports Ray and nothing heavier of
codecorpus, and ``start`` calls ``ray.init`` in the main thread at once while a thread beside
it loads, checks and plans the recipe::

    main thread   import ray -> ray.init ........................ -> warm the workers
    plan thread               recipe's models, load, checks, plan

The Ray start needs the CPUs and whether the run directory is on S3 before the recipe
validates; ``recipe_file.local_start_settings`` reads them. How long the start takes is
measured, not tuned: the command prints it (``cli.print_timing``) and
``bench/e2e_vs_datatrove.py`` reports it.

Ray itself is started, joined and stopped by ``session``; ``executor`` runs the plan.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray

from codecorpus.runtime.session import in_thread, init_ray, stop_ray

if TYPE_CHECKING:
    from rich.console import Console

    from codecorpus.config import Recipe
    from codecorpus.runtime.executor import Executor

Prepare = Callable[[], "tuple[Recipe, Path]"]
"""What ``start`` runs beside Ray's start: the recipe, loaded and checked, and its run directory."""


def start(prepare: Prepare, workers: int | None = None, address: str | None = None, *,
          console: Console | None = None, quiet: bool = False, only: str | None = None,
          until: str | None = None) -> Executor:
    """An executor whose recipe is loaded and planned while Ray starts, with Ray's workers warmed meanwhile.

    ``prepare`` runs in a thread beside Ray's start, then the plan (``Executor.plan``, the
    same plan it makes alone) and the import of the modules every run's tasks use
    (``remote.WARM_MODULES``), which each worker imports too while the plan finishes.
    ``workers`` is the local Ray's CPUs (None: all cores); on a joined cluster (``address``)
    it caps the run's tasks at once. An error of ``prepare`` or of the plan is raised here,
    once Ray's start has returned, and stops the Ray this call started.
    """
    owns_ray = not ray.is_initialized()
    ray_ready, specs_known = threading.Event(), threading.Event()
    made: dict[str, Any] = {}

    def plan() -> None:
        try:
            from codecorpus.runtime import executor as runner
            from codecorpus.runtime.remote import WARM_MODULES, import_modules

            recipe, run_dir = prepare()
            executor = runner.Executor(recipe, run_dir, console=console, quiet=quiet,
                                       max_tasks=workers if address else None)
            executor.ray_ready = ray_ready  # a source planning with tasks waits for Ray (``PlanTasks``)
            made["executor"] = executor
        finally:
            specs_known.set()
        executor.plan()
        runner.select_stages(list(executor.specs), only, until)  # a wrong --only / --until fails here
        import_modules(WARM_MODULES)  # the driver builds the stages' jobs with these

    planned = in_thread("codecorpus-plan", plan)
    t0 = time.perf_counter()
    try:
        init_ray(workers, address)
    except KeyboardInterrupt:
        ray_ready.set()
        raise  # at once: the plan thread is a daemon, the process does not wait for it
    except BaseException:
        ray_ready.set()  # a plan that needs tasks stops there: Ray is not running (``PlanTasks``)
        planned.exception()
        raise
    ray_ready.set()
    try:
        specs_known.wait()
        if "executor" in made:
            # pyarrow (the memory probe of the task wrapper): imported after Ray's start
            from codecorpus.runtime.remote import WARM_MODULES, warm_workers

            warm_workers(WARM_MODULES)
        ray_seconds = time.perf_counter() - t0
        planned.result()  # raises what the recipe's load or its plan raised
    except BaseException:
        if owns_ray:  # a caller that gets no executor has no Ray to stop
            stop_ray()
        raise
    executor = made["executor"]
    executor.owns_ray, executor.ray_seconds = owns_ray, ray_seconds
    return executor

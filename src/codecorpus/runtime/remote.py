"""Every task's wrapper and the warm-up before a run's first task, and their submission.

Ray ships a remote function with cloudpickle, and with it, by reference, each module-level
function and module the function uses: a worker imports the modules those live in before
its first task. This module imports only what the wrapper and the warm-up use (Ray, the
task's memory and fault-injection hooks): a wrapper that lived in the driver's executor would
make each worker import rich's progress bars and every pipeline's stage specs too.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray

from codecorpus.runtime import memory
from codecorpus.storage.faults import checkpoint

TASK_RETRIES = 2
"""Retries of a failed task (a crashed worker, or an exception) before the run stops."""
TASK_TIME = "_task_seconds"
"""The key under which a task's result carries its body's (wall, CPU) seconds back to the driver."""
RUNTIME_KEYS = ("node", "memory", TASK_TIME)
"""What ``_remote`` adds to a task's stats dict: the runtime's, never an output's."""
WARM_MODULES = ("codecorpus.pipeline.bodies", "pyarrow.parquet")
"""What every run's tasks import: the shared task kinds and the Parquet reader. A stage's own
modules are imported by its job bodies when they first run."""


def import_modules(modules: Sequence[str]) -> None:
    """Import each of ``modules`` (the driver's and each worker's imports before a run's first task)."""
    for module in modules:
        importlib.import_module(module)


@ray.remote
def _warm(modules: Sequence[str]) -> None:
    """Import what every run's tasks need, so a worker's first shard does not pay for it."""
    import_modules(modules)


def warm_workers(modules: Sequence[str]) -> None:
    """One ``_warm`` task per CPU of the cluster: each worker imports ``modules`` before its first task."""
    for _ in range(int(ray.cluster_resources().get("CPU", 1))):
        _warm.remote(modules)


@ray.remote(max_retries=TASK_RETRIES, retry_exceptions=True, scheduling_strategy="SPREAD")  # as Ray Data reads
def _remote(point: str, fn: Callable[..., Any], *args: Any) -> Any:
    checkpoint(f"job:{point}")
    rss_before = memory.start_job()
    t0, cpu0 = time.perf_counter(), time.process_time()
    result = fn(*args)
    seconds = (time.perf_counter() - t0, time.process_time() - cpu0)
    if isinstance(result, dict):  # node, peak memory and time: for the stats and the console, never for outputs
        node = ray.get_runtime_context().get_node_id()
        result = {**result, "node": node, "memory": memory.end_job(rss_before), TASK_TIME: seconds}
    memory.release()
    return result


def submit_task(point: str, fn: Callable[..., Any], *args: Any) -> ray.ObjectRef:
    """``fn(*args)`` as a Ray task named after its checkpoint ``point`` (``stage:task``)."""
    return _remote.options(name=point).remote(point, fn, *args)

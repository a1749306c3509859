"""Independent calls run as Ray tasks, a window at a time, whatever each one's outcome.

The pipeline's scheduler stops a run when a task fails after its retries; a grading run
must not (one broken patch is one instance's error, never the run's), so this map hands
each call's failure back as data. Ray is started (or joined) here and stopped when this
process started it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ray

from codecorpus.runtime.remote import RUNTIME_KEYS, submit_task
from codecorpus.runtime.session import init_ray, stop_ray


def map_calls(label: str, fn: Callable[..., Any], calls: Sequence[tuple], workers: int | None = None,
              address: str | None = None) -> Iterator[tuple[int, Any, str | None]]:
    """``fn(*args)`` for each ``args`` of ``calls`` on Ray, as they finish: (index, result,
    error text or None). At most ``workers`` (default: the cluster's CPUs) run at once."""
    started = not ray.is_initialized()
    init_ray(workers, address)
    try:
        window = max(1, workers or int(ray.cluster_resources().get("CPU", 1)))
        waiting, pending = list(range(len(calls)))[::-1], {}
        while waiting or pending:
            while waiting and len(pending) < window:
                i = waiting.pop()
                pending[submit_task(f"{label}:{i}", fn, *calls[i])] = i
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except ray.exceptions.RayError as err:
                cause = getattr(err, "cause", None) or err
                yield i, None, f"{type(cause).__name__}: {cause}"[:1000]
                continue
            if isinstance(result, dict):
                result = {k: v for k, v in result.items() if k not in RUNTIME_KEYS}
            yield i, result, None
    finally:
        if started and address is None:
            stop_ray()

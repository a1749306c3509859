"""This process's Ray: started (or joined) and stopped, and the error a run stops with.

Only Ray's public interface: ``ray.init`` with its documented options, ``ray.shutdown``, and
two documented environment variables (``RAY_USAGE_STATS_ENABLED``, and ``RAY_AUTH_MODE`` in
``runtime/__init__.py``). A local run starts a private Ray (``address="local"``) and stops it
with ``ray.shutdown``, which disconnects this process's workers from their raylet before it
stops Ray's processes: none of them outlives the command, and the driver never sees its raylet
die under it (which Ray reports as an unexpected termination).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import ray

from codecorpus.storage import mirror as store

DEFAULT_OBJECT_STORE_BYTES = 512 * 1024**2


class PipelineError(RuntimeError):
    """A task failed after its retries; the message names the stage, the shard and the error."""


def init_ray(workers: int | None, address: str | None, object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES) -> None:
    """Start (or join) Ray. A local run starts a private Ray with no dashboard.

    An already-initialized Ray with the same CPU count is reused (tests run many
    pipelines in one process); a different one is shut down first.
    """
    if ray.is_initialized():
        if address or workers is None or int(ray.cluster_resources().get("CPU", 0)) == workers:
            return
        stop_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        run_store = os.environ.get(store.STORE_ENV)  # workers on other nodes need the S3 run dir
        env = {"env_vars": {store.STORE_ENV: run_store}} if run_store else None
        try:
            ray.init(address=address, log_to_driver=False, runtime_env=env)
        except ConnectionError as err:
            raise PipelineError(
                f"cannot join the Ray cluster at {address}: {err}. Check that `ray start --head` runs there and, "
                "when the cluster uses token authentication, that this process has its token (RAY_AUTH_TOKEN)"
            ) from None
        return
    ray.init(
        address="local",  # always a private instance: never join a cluster found in /tmp/ray
        num_cpus=workers or os.cpu_count() or 1,
        object_store_memory=object_store_bytes,
        include_dashboard=False,
        log_to_driver=False,
    )


def stop_ray() -> None:
    """Stop (or leave) this process's Ray, if it runs: ``ray.shutdown``."""
    if ray.is_initialized():
        ray.shutdown()


def stop_ray_in_background() -> Future[None]:
    """``stop_ray`` in a daemon thread, so the driver's own work after the last task (the report,
    the summary) runs beside Ray's shutdown; the future is done once Ray is stopped."""
    return in_thread("codecorpus-ray-stop", stop_ray)


def in_thread(name: str, fn: Callable[..., None], *args: Any) -> Future[None]:
    """``fn(*args)`` in a new daemon thread; the future holds its outcome."""
    future: Future[None] = Future()

    def body() -> None:
        future.set_running_or_notify_cancel()
        try:
            fn(*args)
        except BaseException as err:  # handed to whoever waits on the future
            future.set_exception(err)
        else:
            future.set_result(None)

    threading.Thread(target=body, name=name, daemon=True).start()
    return future

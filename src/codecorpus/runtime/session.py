"""This process's Ray: started (or joined) and stopped, and the error a run stops with."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import ray

from codecorpus.runtime.local_start import SOCKET_RETRY_ENV, lean_local_start
from codecorpus.storage import mirror as store

DEFAULT_OBJECT_STORE_BYTES = 512 * 1024**2
WORKER_NICENESS_ENV = "RAY_worker_niceness"
"""Ray's setting (read when it starts workers) of its workers' nice value; set it to override."""


_local_node: Any = None
"""The local Ray node ``init_ray`` started in this process (None: none, or a joined cluster)."""
_ended_for_exit = False
"""Whether ``end_ray_for_exit`` has ended that node's processes: this process exits next."""


class PipelineError(RuntimeError):
    """A task failed after its retries; the message names the stage, the shard and the error."""


def init_ray(workers: int | None, address: str | None, object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES) -> None:
    """Start (or join) Ray. Local runs bind to loopback only and start no dashboard.

    An already-initialized Ray with the same CPU count is reused (tests run many
    pipelines in one process); a different one is shut down first.
    """
    global _local_node
    if ray.is_initialized():
        if address or workers is None or int(ray.cluster_resources().get("CPU", 0)) == workers:
            return
        stop_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts workers at nice 15; they do all of a run's work, so they get the CPU a
    # process of the user's normally gets (datatrove's and Megatron's workers run at 0)
    os.environ.setdefault(WORKER_NICENESS_ENV, "0")
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
    for key, value in SOCKET_RETRY_ENV.items():  # read by the raylet and workers this start spawns
        os.environ.setdefault(key, value)
    with lean_local_start():
        ray.init(
            address="local",  # always a private instance: never join a cluster found in /tmp/ray
            num_cpus=workers or os.cpu_count() or 1,
            object_store_memory=object_store_bytes,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
        )
    _local_node = ray._private.worker._global_node


def stop_ray() -> None:
    """Stop (or leave) this process's Ray, if it runs."""
    global _local_node
    if ray.is_initialized() and not _ended_for_exit:
        ray.shutdown()
        _local_node = None


def end_ray_for_exit() -> None:
    """Stop Ray for a process whose work is done and that ends next with ``os._exit`` (the
    ``codecorpus`` command, once its report and summary are written).

    The processes of the local Ray that ``init_ray`` started (raylet, GCS, agents) are killed,
    and its workers, idle, end on their own within about 0.7 s of their raylet; this process's
    own connection to them is left to its exit. ``ray.shutdown`` tears that connection down
    first, and the teardown waits out its gRPC poll threads' fixed 250 ms deadline; then it
    stops each process in turn with SIGTERM and waits for it (the raylet alone took 0.12-0.22 s
    in the command). Nothing of the run needs either: its tasks are done and every file it
    wrote is closed. Measured here (2 CPUs): ``ray.shutdown`` 0.37-0.75 s, this 0.01-0.02 s.
    Nothing may run long after it: the connection's GCS client ends the process with exit code
    1 once the GCS has been gone for ``gcs_rpc_server_reconnect_timeout_s`` (60 s by default).
    Ray stays initialized in this process, and ``stop_ray`` does nothing after it. A joined
    cluster is left as ``stop_ray`` leaves it.
    """
    global _ended_for_exit
    if _ended_for_exit:
        return
    node = ray._private.worker._global_node
    if node is None or node is not _local_node or not ray.is_initialized():
        stop_ray()
        return
    _ended_for_exit = True
    if node.is_head():
        node.destroy_external_storage()  # objects spilled to disk, as ``ray.shutdown`` removes them
    node.kill_all_processes(check_alive=False, allow_graceful=False)


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


"""One timed start of a private local Ray (run by ray_start.py in a fresh process).

argv: a JSON object {"env": {...}, "patch": [...], "system_config": {...}, "check": bool,
"cpus": int (default: every core), "store_bytes": int (default: 256 MiB), "exit_now": bool}. Prints one JSON line: import, start
(init + one trivial task per CPU) and shutdown seconds. ``exit_now`` ends the process as the
``codecorpus`` command does (``os._exit`` once Ray is stopped: no interpreter finalization;
with the ``tuned`` patch, Ray stopped by ``session.end_ray_for_exit`` as the command stops it).
"""

from __future__ import annotations

import json
import os
import sys
import time

spec = json.loads(sys.argv[1])
os.environ.update(spec.get("env", {}))
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

t_import = time.perf_counter()
import ray  # noqa: E402
import ray._private.node  # noqa: E402
import ray._private.parameter  # noqa: E402

t_import = time.perf_counter() - t_import

patches = set(spec.get("patch", []))


if patches & {"nomon", "nologmon"}:
    base = ray._private.parameter.RayParams

    class _Params(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if "nomon" in patches:
                self.no_monitor = True
            if "nologmon" in patches:
                self.include_log_monitor = False

    ray._private.parameter.RayParams = _Params
if "noapi" in patches:
    def _no_api_server(self, *, include_dashboard, raise_on_failure):
        self._webui_url = None

    ray._private.node.Node.start_api_server = _no_api_server
if patches & {"prewrite", "prewrite-dash"}:
    # the raylet blocks until its agents write their ports to files; a minimal install's
    # dashboard agent writes -1 (no metrics, no http), so write those before it starts
    # (prewrite-dash), or all four as the tuned start does, without its nice (prewrite)
    from ray._raylet import persist_port

    from codecorpus.runtime.local_start import DASHBOARD_AGENT_PORTS, background_agents

    orig_start_raylet = ray._private.node.Node.start_raylet

    def _start_raylet(self, *args, **kwargs):
        if ray._private.utils.get_dashboard_dependency_error() is not None:
            if "prewrite" in patches:
                background_agents(self)
            else:
                for name in DASHBOARD_AGENT_PORTS:
                    persist_port(self._session_dir, self._node_id, getattr(ray._raylet, name), -1)
        return orig_start_raylet(self, *args, **kwargs)

    ray._private.node.Node.start_raylet = _start_raylet


@ray.remote
def _warm():
    return os.getpid()


@ray.remote(max_retries=2)
def _flaky(marker):
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return "retried"


cpus = spec.get("cpus") or os.cpu_count() or 1
t0 = time.perf_counter()
kwargs = {}
if spec.get("system_config"):
    kwargs["_system_config"] = spec["system_config"]
store_bytes = spec.get("store_bytes") or 256 * 1024 * 1024
if "tuned" in patches:  # init_ray from where the run command imports it, and nothing more
    from codecorpus.runtime.session import init_ray

    init_ray(cpus, None, store_bytes)
else:
  ray.init(
    address="local",
    num_cpus=cpus,
    object_store_memory=store_bytes,
    include_dashboard=False,
    _node_ip_address="127.0.0.1",
    log_to_driver=False,
    **kwargs,
  )
t_init = time.perf_counter() - t0
ray.get([_warm.remote() for _ in range(int(ray.cluster_resources()["CPU"]))])
t1 = time.perf_counter()
result = {"import": t_import, "init": t_init, "start": t1 - t0}
if spec.get("check"):
    import tempfile

    import numpy as np

    marker = os.path.join(tempfile.mkdtemp(), "died-once")
    result["retry"] = ray.get(_flaky.remote(marker))
    arr = np.arange(50 * 1024 * 1024 // 8, dtype=np.int64)
    back = ray.get(ray.put(arr))
    result["put_numpy_ok"] = bool((back == arr).all())
    blob = os.urandom(50 * 1024 * 1024)
    result["put_bytes_ok"] = ray.get(ray.put(blob)) == blob
    result["session"] = ray._private.worker._global_node.get_session_dir_path()
    t1 = time.perf_counter()
if spec.get("exit_now") and "tuned" in patches:  # Ray stopped as the command stops it before its exit
    from codecorpus.runtime.session import end_ray_for_exit

    end_ray_for_exit()
else:
    ray.shutdown()
result["shutdown"] = time.perf_counter() - t1
print(json.dumps(result), flush=True)
if spec.get("exit_now"):
    os._exit(0)

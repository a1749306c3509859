"""Ray stopped for a process that exits next (``session.end_ray_for_exit``): a local Ray's
processes end, the process goes on until its own exit, and a joined cluster is only left."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import processes_left_under

LOCAL = """
import json, os, time
import ray
from codecorpus.runtime import session

session.init_ray(1, None)

@ray.remote
def pid():
    return os.getpid()

worker = ray.get(pid.remote())
ray_processes = [p.process for procs in ray._private.worker._global_node.all_processes.values() for p in procs]
session.end_ray_for_exit()
session.stop_ray()  # nothing left to do: no second stop
session.end_ray_for_exit()
deadline = time.monotonic() + 20  # checked here, before this process exits and takes them with it
ended = lambda: len(ray_processes) > 0 and all(p.poll() is not None for p in ray_processes)
while (not ended() or os.path.exists(f"/proc/{worker}")) and time.monotonic() < deadline:
    time.sleep(0.1)
print(json.dumps({
    "ended": ended(),
    "worker_gone": not os.path.exists(f"/proc/{worker}"),
    "initialized": ray.is_initialized(),
}), flush=True)
os._exit(0)
"""

JOINED = """
import json, os
import ray
from ray.cluster_utils import Cluster
from codecorpus.runtime import session

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
session.init_ray(None, cluster.address)
assert ray.get(ray.remote(lambda: 1).remote()) == 1
session.end_ray_for_exit()
raylet = cluster.head_node.all_processes["raylet"][0].process
print(json.dumps({"connected": ray.is_initialized(), "raylet_alive": raylet.poll() is None}), flush=True)
cluster.shutdown()
os._exit(0)
"""


def _run(script: str, ray_tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RAY_TMPDIR": str(ray_tmp)})  # fmt: skip


def test_a_local_rays_processes_end_and_the_process_runs_on_to_its_exit():
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))  # short: Ray's socket paths have a length limit
    try:
        done = _run(LOCAL, ray_tmp)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {
            "ended": True,  # raylet, GCS and agents, while the process still ran
            "worker_gone": True,
            "initialized": True,  # this process's own connection was left to its exit
        }
        assert list(ray_tmp.glob("ray/session_*")), "Ray did not start under RAY_TMPDIR"
        assert processes_left_under(ray_tmp) == []
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_joined_cluster_is_left_running():
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))
    try:
        done = _run(JOINED, ray_tmp)
        assert done.returncode == 0, done.stderr[-2000:]
        # left, not stopped (a joined cluster's node holds no processes of this one's to end)
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {"connected": False, "raylet_alive": True}
        assert processes_left_under(ray_tmp) == []  # the test's own cluster.shutdown()
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)

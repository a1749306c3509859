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
session.end_ray_for_exit()
session.stop_ray()  # nothing left to do: no second stop
session.end_ray_for_exit()
t0 = time.perf_counter()
while time.perf_counter() - t0 < 1.0:  # the process goes on after Ray's processes were told to end
    pass
print(json.dumps({"worker": worker, "initialized": ray.is_initialized()}), flush=True)
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


def test_a_local_ray_ends_and_the_process_runs_on_to_its_exit():
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))  # short: Ray's socket paths have a length limit
    try:
        done = _run(LOCAL, ray_tmp)
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["initialized"]  # this process's own connection was left to its exit
        assert list(ray_tmp.glob("ray/session_*")), "Ray did not start under RAY_TMPDIR"
        assert processes_left_under(ray_tmp) == []  # raylet, GCS, agents, and the worker
        assert not Path(f"/proc/{out['worker']}").exists()
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_joined_cluster_is_left_running():
    ray_tmp = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))
    try:
        done = _run(JOINED, ray_tmp)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {"connected": False, "raylet_alive": True}
        assert processes_left_under(ray_tmp) == []  # the test's own cluster.shutdown()
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)

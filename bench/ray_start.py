"""Wall time of starting a private local Ray until a task per CPU has run, and of its shutdown.

Each run is a fresh process (bench/_ray_start_child.py): ``ray.init`` as
``codecorpus.runtime.executor.init_ray`` calls it, one trivial task per CPU and
``ray.get``; then ``ray.shutdown``. Every timed run holds ``flock`` on a lock file
(``--lock``) so runs do not overlap other benchmarks on a small machine.

Configurations: ``default`` (the plain call) and the knobs ``init_ray`` may add,
alone and together (see CONFIGS). ``tuned`` calls ``init_ray`` itself; the
ratio default/tuned of the median start is printed last. ``--check`` runs the
correctness checks (a retried task whose worker dies, 50 MB put/get, no
``raylet``/``gcs_server`` left after shutdown) once per configuration.

    python bench/ray_start.py [--runs 5] [--check] [CONFIG ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = Path(__file__).with_name("_ray_start_child.py")

# name -> spec for the child: env vars, patches of Ray's private start path, _system_config
CONFIGS: dict[str, dict] = {
    "default": {},
    "no-monitor": {"patch": ["nomon"]},
    "no-log-monitor": {"patch": ["nologmon"]},
    "no-api-server": {"patch": ["noapi"]},
    "head-procs": {"patch": ["nomon", "nologmon", "noapi"]},
    # the dashboard agent's three ports only: the raylet then still waits for the runtime-env agent's
    "prewrite-dash": {"patch": ["prewrite-dash"]},
    "prewrite-all": {"patch": ["prewrite"]},
    "tuned": {"patch": ["tuned"]},
}


def run_once(spec: dict, lock: str) -> dict:
    cmd = [sys.executable, str(CHILD), json.dumps(spec)]
    if lock:
        cmd = ["flock", lock, *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        raise RuntimeError(f"run failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def leftovers(session_dir: str) -> list[str]:
    """Processes of this run's session still alive (another user's Ray on the machine is not ours)."""
    res = subprocess.run(["pgrep", "-af", session_dir], capture_output=True, text=True)
    return [line.split(" ", 2)[1].rsplit("/", 1)[-1] + ":" + line.split(" ", 1)[0]
            for line in res.stdout.splitlines() if "pgrep" not in line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="*", default=list(CONFIGS))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="run the correctness checks once per config")
    default_lock = os.path.join(tempfile.gettempdir(), "codecorpus-bench.lock")
    parser.add_argument("--lock", default=os.environ.get("BENCH_LOCK", default_lock),
                        help="flock this file around each timed run ('' for none)")
    args = parser.parse_args()

    src = str(Path(__file__).resolve().parents[1] / "src")
    os.environ["PYTHONPATH"] = src + os.pathsep + os.environ.get("PYTHONPATH", "")
    for name in args.configs if args.check else ():
        res = run_once({**CONFIGS[name], "check": True}, args.lock)
        left = leftovers(res["session"])
        ok = res["retry"] == "retried" and res["put_numpy_ok"] and res["put_bytes_ok"] and not left
        print(f"check {name}: retried task={res['retry']} 50MB put/get numpy={res['put_numpy_ok']} "
              f"bytes={res['put_bytes_ok']} left after shutdown={left or 'none'} -> {'ok' if ok else 'FAILED'}",
              flush=True)
    # round robin, so a load that comes and goes on the machine falls on every config alike
    runs: dict[str, list[dict]] = {name: [] for name in args.configs}
    for _ in range(args.runs):
        for name in args.configs:
            runs[name].append(run_once(CONFIGS[name], args.lock))
    medians: dict[str, float] = {}
    print(f"{'config':<18} {'start min':>9} {'start med':>9} {'shut min':>8} {'shut med':>8}  n={args.runs}")
    for name, rows in runs.items():
        start = [r["start"] for r in rows]
        shut = [r["shutdown"] for r in rows]
        medians[name] = statistics.median(start)
        print(f"{name:<18} {min(start):9.2f} {medians[name]:9.2f} {min(shut):8.2f} {statistics.median(shut):8.2f}")
    if "default" in medians and "tuned" in medians:
        print(f"start default/tuned (median): {medians['default'] / medians['tuned']:.2f}x")


if __name__ == "__main__":
    main()

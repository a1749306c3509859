"""Driver memory and time of planning ingest: in tasks (``ingest/shardplan.py``) vs in memory.

    python bench/planning_bench.py [--repos 10000] [--files 100] [--peer-repos 1000]
                                   [--workers 2] [--tree DIR] [--clean]

Corpus: a synthetic tree of real files, made once and reused (``--tree``, default
``$TMPDIR/codecorpus-planning-bench``): ``--repos`` repository folders, each with
``--files`` small Python files (30 to 250 bytes, half of them in a subfolder), read as
one ``type: local`` source with ``layout: repos``. The planner walks it as it walks any
folder: one scandir per directory, one lstat per entry. The files are hard links into a
small pool of distinct files (see ``make_tree``): real directory entries of regular
files, made in minutes rather than the ~20 minutes a million written files take here.

Planners, each in a fresh interpreter so that its peak RSS is its own:

- ``tasks``: the executor's plan (``Executor.stage_run('ingest')``) on a local Ray with
  ``--workers`` CPUs: repositories listed by planning tasks into batch files, the driver
  keeping per-repository counts and per-shard ranges;
- ``memory`` (the peer): ``plan.plan_shards`` plus every shard's fingerprint, today's
  planner that holds every planned file in the driver, at ``--peer-repos`` repositories
  (both planners run there too, and their plan hashes must agree).

Printed per run: files, shards, planning wall time (Ray's start apart), the driver's peak
RSS (``ru_maxrss``) and its RSS before planning, and the plan hash. The machine's load
average is printed: the figures come from a shared 2-core machine, where Ray's workers
run at nice 15 (its raylet's default) against everyone else's nice 0 and so get a small
share of the cores; ``RAY_worker_niceness=0`` in the environment runs them at nice 0, as
the driver and the in-memory peer run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = 7


def make_tree(root: Path, repos: int, files: int) -> Path:
    """``repos`` folders of ``files`` small files each under ``root/R{repos}xF{files}`` (made once).

    Each repository's files are hard links into a pool of ``VARIANTS * files`` distinct
    files (sizes 30 to 250 bytes): a link is a directory entry of a regular file, walked
    and stat'ed as any other, and costs no data block (creating a million files with
    data takes this machine's disk ~20 minutes, linking them ~2).
    """
    tree = root / f"R{repos}xF{files}"
    done = tree.with_suffix(".done")
    if done.exists():
        return tree / "repos"
    shutil.rmtree(tree, ignore_errors=True)
    t0 = time.perf_counter()
    pool = tree / "_pool"
    pool.mkdir(parents=True)
    for v in range(VARIANTS):
        for j in range(files):
            (pool / f"{v}-{j}.py").write_text(f"def f_{v}_{j}(x):\n    return x + {j}\n" * (1 + (v + j) % 7))
    for r in range(repos):
        repo = tree / "repos" / f"repo-{r:06d}"
        (repo / "pkg").mkdir(parents=True)
        for j in range(files):
            os.link(pool / f"{r % VARIANTS}-{j}.py", repo / ("pkg/" if j % 2 else "") / f"m{j:03d}.py")
    done.write_text(json.dumps({"repos": repos, "files": files, "seconds": round(time.perf_counter() - t0, 1)}))
    return tree / "repos"


def _recipe(tree: Path, out: Path):
    from codecorpus.config import load_recipe_data

    return load_recipe_data({
        "sources": [{"type": "local", "name": "synthetic", "path": str(tree), "layout": "repos"}],
        "stages": {"ingest": {}, "langid": {}}, "out": str(out),
    })


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(mode: str, tree: Path, workers: int) -> dict:
    """One planning run in this process; its figures as a dict (the planner's phases on stderr)."""
    import logging

    logging.basicConfig(level=logging.INFO, format="  %(message)s")
    from codecorpus.config import config_hash

    out = Path(tempfile.mkdtemp(prefix="planbench-run-"))
    recipe = _recipe(tree, out)
    figures: dict = {"mode": mode}
    try:
        from codecorpus.runtime.executor import Executor, init_ray

        t0 = time.perf_counter()
        init_ray(workers, None)  # a run's driver holds Ray either way
        figures["ray_start_s"] = round(time.perf_counter() - t0, 2)
        figures["rss_before_mb"] = round(_current_rss_mb(), 1)
        t0 = time.perf_counter()
        if mode == "tasks":
            shards = Executor(recipe, out, quiet=True).stage_run("ingest").shards
            figures["plan_s"] = round(time.perf_counter() - t0, 2)
            figures["files"] = sum(s.units for s in shards)
            figures["hash"] = config_hash([s.fingerprint for s in shards])
        else:
            from codecorpus.ingest import plan

            shards = plan.plan_shards(recipe.sources, recipe.stages.ingest)
            fingerprints = [plan.plan_fingerprint(s) for s in shards]
            figures["plan_s"] = round(time.perf_counter() - t0, 2)
            figures["files"] = sum(len(s) for s in shards)
            figures["hash"] = config_hash(fingerprints)
        figures["shards"] = len(shards)
        figures["peak_rss_mb"] = round(_rss_mb(), 1)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return figures


def run_child(mode: str, tree: Path, workers: int) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, __file__, "--child", mode, "--tree", str(tree), "--workers", str(workers)],
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{mode} planner failed:\n{proc.stderr[-3000:]}")
    for line in proc.stderr.splitlines():
        if line.startswith("  planned "):
            print(f"  {mode}: {line.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load() -> str:
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _row(label: str, f: dict) -> str:
    added = f["peak_rss_mb"] - f["rss_before_mb"]
    return (f"{label:<26} {f['files']:>9,} files {f['shards']:>4} shards  plan {f['plan_s']:>7.2f} s "
            f"(Ray start {f['ray_start_s']:.1f} s apart)  driver peak RSS {f['peak_rss_mb']:>7.1f} MB "
            f"(+{added:.0f} MB planning)  hash {f['hash'][:12]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repos", type=int, default=10_000)
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--peer-repos", type=int, default=1_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tree", type=Path, default=Path(tempfile.gettempdir()) / "codecorpus-planning-bench")
    ap.add_argument("--clean", action="store_true", help="remove the synthetic trees afterwards")
    ap.add_argument("--child", choices=("tasks", "memory"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tree, args.workers)))
        return
    nice = os.environ.get("RAY_worker_niceness", "15 (Ray's default)")  # noqa: SIM112 - Ray spells it so
    print(f"before: {_load()}; {os.cpu_count()} cores, {args.workers} Ray workers at nice {nice}", flush=True)
    peer_tree = make_tree(args.tree, args.peer_repos, args.files)
    big_tree = make_tree(args.tree, args.repos, args.files)
    for tree in (peer_tree, big_tree):
        print(f"tree {tree.parent.name}: {tree.parent.with_suffix('.done').read_text()}", flush=True)
    peer_n = args.peer_repos * args.files
    old = run_child("memory", peer_tree, args.workers)
    new_small = run_child("tasks", peer_tree, args.workers)
    print(_row(f"in memory (peer), {peer_n:,}", old))
    print(_row(f"in tasks, {peer_n:,}", new_small))
    if old["hash"] != new_small["hash"]:
        raise SystemExit("the two planners disagree on the plan hash")
    big = run_child("tasks", big_tree, args.workers)
    print(_row(f"in tasks, {args.repos * args.files:,}", big))
    grown = [f["peak_rss_mb"] - f["rss_before_mb"] for f in (old, new_small)]
    print(f"at {peer_n:,} files, in tasks vs in memory: driver RSS added by planning "
          f"{grown[1]:.0f} MB vs {grown[0]:.0f} MB; planning time {new_small['plan_s'] / old['plan_s']:.2f}x")
    ok = big["peak_rss_mb"] < 500 and big["plan_s"] < 60
    print(f"goal at {big['files']:,} files (driver < 500 MB, < 60 s): {'met' if ok else 'NOT met'}")
    print(f"after: {_load()}")
    if args.clean:
        shutil.rmtree(args.tree, ignore_errors=True)


if __name__ == "__main__":
    main()

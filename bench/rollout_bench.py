"""Rollout costs on the shipped repo-envs recipe's example task (docs/rollouts.md).

- open: a session opened from an environment this node has cached (goal: under 2 s);
- run: ``run('true')`` in a session against ``sh -c true`` run bare (goal: overhead under 50 ms);
- evaluate: ``evaluate(gold patch)`` against the same tests run bare (host interpreter, a
  prepared tree with the test and gold patches applied);
- pool: sessions per minute (open, one command, evaluate, close) through
  ``runtime.pool.SessionPool`` on a local Ray with 1, then 2 workers, and the scaling.

The environments run is made once with ``codecorpus run pipelines/repo-envs.yaml`` into
``--run`` (default: a temp dir). Timing figures need an idle machine.

    python bench/rollout_bench.py [--run DIR] [--repeats 10] [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codecorpus.envs import verify
from codecorpus.envs.manifest_tasks import run_cache_dir, tasks_of
from codecorpus.envs.session import SessionConfig, open_session
from codecorpus.runtime import name_local_ray_auth

REPO = Path(__file__).resolve().parents[1]


def environments_run(run: Path) -> Path:
    manifest = run / "manifest.json"
    if not manifest.is_file():
        subprocess.run([sys.executable, "-m", "codecorpus", "run", str(REPO / "pipelines" / "repo-envs.yaml"),
                        "--out", str(run), "--quiet"], check=True)
    return manifest


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def bench_session(entry, cfg: SessionConfig, repeats: int) -> dict[str, float]:
    with open_session(entry, cfg):
        pass  # the node's install, made once before anything is timed
    open_ms = median_ms(lambda: open_session(entry, cfg).close(), repeats)
    with open_session(entry, cfg) as s:
        run_ms = median_ms(lambda: s.run("true", timeout=30), repeats)
        bare_ms = median_ms(lambda: subprocess.run(["/bin/sh", "-c", "true"], check=True), repeats)
        eval_ms = median_ms(lambda: s.evaluate(entry.task["patch"]), max(3, repeats // 3))
    with tempfile.TemporaryDirectory(prefix="bare-") as tmp:
        tree = Path(tmp) / "tree"
        verify.fresh_tree(entry.repo, entry.task["base_commit"], tree)
        assert verify.apply_patch(tree, entry.task["patch"]) and verify.apply_patch(tree, entry.task["test_patch"])
        command = entry.spec["test"]["command"]
        # the interpreter the sandbox links as ``python`` (not a shim earlier on the host's PATH)
        env = {**os.environ, "PATH": f"{os.path.realpath(sys.base_prefix)}/bin:{os.environ['PATH']}"}
        tests_ms = median_ms(lambda: subprocess.run(["/bin/sh", "-c", command], cwd=tree, capture_output=True,
                                                    env=env, check=False), max(3, repeats // 3))
    return {"open_ms": open_ms, "run_true_ms": run_ms, "bare_true_ms": bare_ms,
            "run_overhead_ms": run_ms - bare_ms, "evaluate_ms": eval_ms, "bare_tests_ms": tests_ms}


def bench_pool(manifest: Path, instance: str, patch: str, workers: int, rounds: int) -> float:
    """Sessions per minute through the pool on a local Ray with ``workers`` CPUs."""
    import ray

    from codecorpus.runtime.pool import SessionPool
    from codecorpus.runtime.session import init_ray, stop_ray

    init_ray(workers, None)
    try:
        pool = SessionPool(str(manifest), slot="CPU")
        t0 = time.perf_counter()
        for _ in range(rounds):
            sessions = pool.open(instance, workers)
            ray.get([s.run.remote("python -c 'import calc'", 30) for s in sessions])
            ray.get([s.evaluate.remote(patch) for s in sessions])
            pool.close()
        return rounds * workers / (time.perf_counter() - t0) * 60
    finally:
        stop_ray()


def main() -> None:
    name_local_ray_auth()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    run = args.run or Path(tempfile.mkdtemp(prefix="rollout-bench-")) / "run"
    manifest = environments_run(run)
    tasks = tasks_of(manifest)
    entry = tasks[sorted(tasks)[0]]
    cfg = SessionConfig(cache_dir=run_cache_dir(manifest))
    figures = bench_session(entry, cfg, args.repeats)
    for name, value in figures.items():
        print(f"{name:>16}: {value:9.1f}")
    print(f"{'open goal':>16}: {'met' if figures['open_ms'] < 2000 else 'missed'} (< 2000 ms)")
    print(f"{'run goal':>16}: {'met' if figures['run_overhead_ms'] < 50 else 'missed'} (< 50 ms)")
    per_min = {w: bench_pool(manifest, entry.task["instance_id"], entry.task["patch"], w, args.rounds)
               for w in (1, 2)}
    for w, rate in per_min.items():
        print(f"{'pool ' + str(w) + ' worker(s)':>16}: {rate:9.1f} sessions/min")
    print(f"{'pool scaling':>16}: {per_min[2] / per_min[1]:9.2f}x (1 -> 2 workers)")


if __name__ == "__main__":
    main()

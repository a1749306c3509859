"""Two per-shard stages with and without the barrier between them (``Executor.prepare_follower``).

Stage a's shard tasks take uneven times (drawn once, seeded), stage b's take one time each;
both only sleep, so the tasks do not compete for the machine's cores and the run measures the
scheduling alone, as on a cluster whose cores far outnumber what the driver and Ray's own
processes use. The peer is the same executor with the barrier: b starts when a has ended.

    .venv/bin/python bench/follow_bench.py [--cpus 8] [--shards 48] [--runs 3]

Prints each way's makespan (median of the runs) and the ratio. On the 2-core bench corpus the
whole pipeline shows no difference (README): there the driver and Ray's processes take the
cores the barrier leaves idle.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import ray

from codecorpus import schema
from codecorpus.config import load_recipe_data
from codecorpus.pipeline import tasks
from codecorpus.pipeline.spec import Job
from codecorpus.runtime.executor import Executor, _Follower

_sleep = lambda seconds: (time.sleep(seconds), {})[1]  # noqa: E731 - by value: workers cannot import bench/


def makespan(ex: Executor, root: Path, a_times: list[float], b_time: float, follow: bool) -> float:
    run = schema.RunPaths(root)
    a, b = tasks.TaskContext(run, "a", "ha"), tasks.TaskContext(run, "b", "hb")
    head = lambda i: Job(f"head-{schema.shard_name(i)}", _sleep, (b_time,))  # noqa: E731
    t0 = time.perf_counter()
    ex.run_jobs("a", [Job(schema.shard_name(i), _sleep, (s,)) for i, s in enumerate(a_times)], a,
                _Follower(b, head) if follow else None)  # fmt: skip
    ex.run_jobs("b", [head(i) for i in range(len(a_times))], b)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpus", type=int, default=8, help="Ray's logical CPUs (tasks only sleep)")
    parser.add_argument("--shards", type=int, default=48)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(7)
    a_times = [rng.choice((0.05, 0.1, 0.2, 0.4, 0.8)) for _ in range(args.shards)]
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        recipe = load_recipe_data({"sources": [{"type": "local", "name": "x", "path": str(corpus)}],
                                   "stages": {"ingest": {}}, "tokenizer": {"builtin": "gpt2"},
                                   "outputs": [{"name": "s", "seq_len": 64}]})
        ex = Executor(recipe, Path(tmp) / "run", quiet=True)
        ex.run_jobs("warm", [Job(f"w{i}", _sleep, (0.0,)) for i in range(args.cpus)],
                    tasks.TaskContext(schema.RunPaths(Path(tmp) / "run"), "warm", "h"))
        spans: dict[bool, list[float]] = {True: [], False: []}
        for n in range(args.runs):
            for follow in (False, True):
                spans[follow].append(makespan(ex, Path(tmp) / f"run-{n}-{follow}", a_times, 0.2, follow))
    ray.shutdown()
    barrier, early = statistics.median(spans[False]), statistics.median(spans[True])
    work = sum(a_times) + 0.2 * args.shards
    print(f"{args.shards} shards on {args.cpus} CPUs, {work:.1f} task-s (a: {sum(a_times):.1f}, b: {0.2 * args.shards:.1f}); "
          f"the bound (task-s over the CPUs): {work / args.cpus:.2f} s")
    print(f"  with the barrier     {barrier:6.2f} s")
    print(f"  b starting per shard {early:6.2f} s")
    print(f"  ratio                {barrier / early:6.2f}x")


if __name__ == "__main__":
    main()

"""Achieved-vs-target error of codecorpus's hash-threshold sampling against independent Bernoulli draws.

    python bench/mix_sampling.py [--docs 200,1000,10000] [--seeds 20]

Peer: the textbook sampler (every document floor(rate) copies plus one with
probability frac(rate), from a per-document hash), on the same synthetic
groups (document lengths log-normal, like source files). Prints, per group
size, the mean and worst |achieved / target - 1| of each and their ratio, and
the sampling throughput of codecorpus's ``repeat_counts``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from codecorpus.config import MixConfig
from codecorpus.mixing.groups import doc_hashes, scan_groups
from codecorpus.mixing.plan import GroupSupply, plan_set
from codecorpus.mixing.sample import repeat_counts

SET = "bench"


def synthetic(n_docs: int, rng: np.random.Generator) -> pa.Table:
    lengths = np.clip(rng.lognormal(5.5, 1.2, n_docs).astype(np.int64), 8, 200_000)
    return pa.table({
        "id": [f"d{i:08d}-{rng.integers(1 << 30)}" for i in range(n_docs)],
        "lang": ["Python"] * n_docs,
        "num_tokens": pa.array(lengths, pa.int64()),
    })


def supply(table: pa.Table, mix: MixConfig, seed: int) -> dict[str, GroupSupply]:
    s = GroupSupply()
    for r in scan_groups(table, mix, seed, SET).to_pylist():
        s.token_hist[r["bin"]] += r["tokens"]
        s.doc_hist[r["bin"]] += r["docs"]
    s.tokens, s.docs = int(s.token_hist.sum()), int(s.doc_hist.sum())
    return {"Python": s}


def errors(n_docs: int, seeds: int, rate: float) -> tuple[list[float], list[float], float]:
    ours, peer, seconds = [], [], 0.0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        t = synthetic(n_docs, rng)
        tokens = t.column("num_tokens").to_numpy()
        mix = MixConfig(budget_tokens=max(1, int(tokens.sum() * rate)))
        plan = plan_set(SET, supply(t, mix, seed), mix, seed)
        target = plan.groups[0].target_tokens
        t0 = time.perf_counter()
        reps, _ = repeat_counts(t, plan, mix)
        seconds += time.perf_counter() - t0
        ours.append(abs((reps * tokens).sum() / target - 1))
        u = doc_hashes(t.column("id").to_pylist(), seed, SET) / float(1 << 64)
        bern = np.floor(rate) + (u < rate - np.floor(rate))
        peer.append(abs((bern * tokens).sum() / target - 1))
    return ours, peer, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--docs", default="200,1000,10000,100000")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--rate", type=float, default=1.37, help="sampling rate (epochs) of the group")
    args = ap.parse_args()
    print(f"rate {args.rate}, {args.seeds} seeds; error = |achieved/target - 1|")
    print(f"{'docs':>8} {'ours mean':>10} {'ours max':>10} {'bernoulli mean':>15} {'bernoulli max':>14} {'ratio (mean)':>13} {'docs/s':>10}")
    for n in (int(x) for x in args.docs.split(",")):
        ours, peer, seconds = errors(n, args.seeds, args.rate)
        ratio = np.mean(peer) / max(np.mean(ours), 1e-12)
        print(f"{n:>8} {np.mean(ours):>10.5f} {np.max(ours):>10.5f} {np.mean(peer):>15.5f} {np.max(peer):>14.5f} "
              f"{ratio:>12.1f}x {n * args.seeds / seconds:>10,.0f}")


if __name__ == "__main__":
    main()

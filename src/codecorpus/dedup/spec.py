"""The dedup stage: exact + near-duplicate (and optional fork) removal, a global stage.

    [fork keys -> fork count -> fork edges -> fork decide]
    signatures -> pairs -> clusters -> members -> keep -> apply

Each phase is a set of shard- or bucket-level jobs (``dedup/near.py``, ``dedup/forks.py``).
"""

from __future__ import annotations

import functools
from typing import Any

from codecorpus import schema
from codecorpus.dedup.config import DedupConfig
from codecorpus.pipeline.spec import Job, StageRun, StageSpec


def _part(run: StageRun, stage: str, i: int) -> tuple[str, ...]:
    return (str(run.run.part(stage, i)),)


def _phase_in(run: StageRun, phase: str, p: int) -> tuple[str, ...]:
    return (str(run.run.work_dir(run.name, phase) / f"p{p:05d}"),)


def dedup_phases(run: StageRun) -> list[dict[str, Any]]:
    from codecorpus.dedup import near
    from codecorpus.pipeline import bodies

    cfg, ctx, upstream = run.cfg, run.ctx, run.upstream
    n, b = run.shard_count(upstream), cfg.buckets
    up_ctx = bodies.JobContext(run.run, upstream, run.hashes[upstream])
    shard_rows = [bodies.read_marker(up_ctx, schema.shard_name(i))["stats"]["rows_out"] for i in range(n)]
    if cfg.forks.enabled:
        _fork_phases(run, n)
    run.run_phase("dedup: signatures", [_signature_job(run, i) for i in range(n)])
    run.run_phase("dedup: pairs", [
        Job(f"pairs-p{p:05d}", bodies.reduce_job, (ctx, "pairs", "sig", p, n, functools.partial(near.pairs, cfg=cfg)),
            _phase_in(run, "sig", p))
        for p in range(b)
    ])
    run.run_phase("dedup: clusters", [
        Job("clusters-p00000", bodies.stream_reduce_job,
            (ctx, "clusters", "pairs", 0, b, functools.partial(near.components, shard_rows=shard_rows)))
    ])
    run.run_phase("dedup: members", [
        Job(f"members-{schema.shard_name(i)}", bodies.scatter_side_job,
            (ctx, "members", i, upstream, "clusters", 1, functools.partial(near.members, cfg=cfg)),
            _part(run, upstream, i))
        for i in range(n)
    ])
    run.run_phase("dedup: keep", [
        Job(f"keep-p{p:05d}", bodies.reduce_job,
            (ctx, "keep", "members", p, n, functools.partial(near.keep, cfg=cfg, n_shards=n)),
            _phase_in(run, "members", p))
        for p in range(b)
    ])
    return run.run_output_jobs("dedup: apply", [_apply_job(run, i, b) for i in range(n)])


def _apply_job(run: StageRun, i: int, b: int) -> Job:
    from codecorpus.dedup import near
    from codecorpus.pipeline import bodies

    cfg, ctx, upstream = run.cfg, run.ctx, run.upstream
    if not cfg.forks.enabled:
        args = (ctx, i, upstream, "keep", b, functools.partial(near.apply, cfg=cfg))
        return Job(schema.shard_name(i), bodies.apply_job, args, _part(run, upstream, i))
    args = (ctx, i, upstream, (("keep", b), ("fdecide", 1)), functools.partial(near.apply_with_forks, cfg=cfg))
    return Job(schema.shard_name(i), bodies.apply_sides_job, args, _part(run, upstream, i))


def _signature_job(run: StageRun, i: int) -> Job:
    """The signatures job of shard ``i``; with forks on it reads the removed repositories too."""
    from codecorpus.dedup import near
    from codecorpus.pipeline import bodies

    cfg, ctx, upstream, name = run.cfg, run.ctx, run.upstream, f"sig-{schema.shard_name(i)}"
    if cfg.forks.enabled:
        fn = functools.partial(near.candidates_without_forks, cfg=cfg, seed=run.recipe.seed)
        return Job(name, bodies.scatter_side_job, (ctx, "sig", i, upstream, "fdecide", 1, fn), _part(run, upstream, i))
    fn = functools.partial(near.candidates, cfg=cfg, seed=run.recipe.seed)
    return Job(name, bodies.scatter_job, (ctx, "sig", i, upstream, fn), _part(run, upstream, i))


def _fork_keys_job(run: StageRun, i: int) -> Job:
    from codecorpus.dedup import forks
    from codecorpus.pipeline import bodies

    fn = functools.partial(forks.keys, cfg=run.cfg)
    return Job(f"fkeys-{schema.shard_name(i)}", bodies.scatter_job, (run.ctx, "fkeys", i, run.upstream, fn),
               _part(run, run.upstream, i))


def _fork_phases(run: StageRun, n: int) -> None:
    """fkeys (per shard) -> fcount (per hash bucket) -> fedges (per repo bucket) -> fdecide (one job)."""
    from codecorpus.dedup import forks
    from codecorpus.pipeline import bodies

    cfg, ctx, b = run.cfg, run.ctx, run.cfg.buckets
    run.run_phase("dedup: fork keys", [_fork_keys_job(run, i) for i in range(n)])
    run.run_phase("dedup: fork count", [
        Job(f"fcount-p{p:05d}", bodies.reduce_job, (ctx, "fcount", "fkeys", p, n, functools.partial(forks.count, cfg=cfg)))
        for p in range(b)
    ])
    run.run_phase("dedup: fork edges", [
        Job(f"fedges-p{p:05d}", bodies.reduce_job, (ctx, "fedges", "fcount", p, b, functools.partial(forks.edges, cfg=cfg)))
        for p in range(b)
    ])
    run.run_phase("dedup: fork decide", [
        Job("fdecide-p00000", bodies.reduce_job,
            (ctx, "fdecide", "fedges", 0, b, functools.partial(forks.decide, cfg=cfg, n_shards=n)))
    ])


DEDUP = StageSpec("dedup", "global", DedupConfig, phases=dedup_phases)

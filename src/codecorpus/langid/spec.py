"""The langid stage: language tags with a per-repository vote, a global stage.

    scan (per shard): tags every file, counts content labels by repository and extension
    vote (one job):   reconciles disagreeing labels per group (``langid/vote.py``)
    apply (per shard): the shard with ``lang``, ``kind``, ``lang_method``, ``parse_error_frac``

The apply phase reuses the tags its shard's scan job wrote, so no file is tagged twice.
"""

from __future__ import annotations

import functools
from typing import Any

from codecorpus import schema
from codecorpus.langid.config import LangidConfig
from codecorpus.pipeline.spec import Job, StageRun, StageSpec


def scan_job(run: StageRun, i: int) -> Job:
    """The scan job of shard ``i``."""
    from codecorpus.langid import stage
    from codecorpus.pipeline import bodies

    fn = functools.partial(stage.scan, cfg=run.cfg)
    return Job(f"scan-{schema.shard_name(i)}", bodies.scatter_job, (run.ctx, "scan", i, run.upstream, fn),
               (str(run.run.part(run.upstream, i)),))


def langid_phases(run: StageRun) -> list[dict[str, Any]]:
    from codecorpus.langid import stage
    from codecorpus.pipeline import bodies

    cfg, ctx, upstream = run.cfg, run.ctx, run.upstream
    n = run.shard_count(upstream)
    run.run_phase("langid: scan", [scan_job(run, i) for i in range(n)])
    run.run_phase("langid: vote", [
        Job("vote-p00000", bodies.reduce_job,
            (ctx, "vote", "scan", stage.COUNTS_PARTITION, n, functools.partial(stage.decide_shards, cfg=cfg, n_shards=n)))
    ])
    return run.run_output_jobs("langid: apply", [
        Job(schema.shard_name(i), bodies.apply_own_job,
            (ctx, i, upstream, ("scan", stage.TAGS_PARTITION), "vote", 1, functools.partial(stage.apply, cfg=cfg)),
            (str(run.run.part(upstream, i)),))
        for i in range(n)
    ])


LANGID = StageSpec("langid", "global", LangidConfig, phases=langid_phases)

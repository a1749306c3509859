"""The SFT / agent-trace stages, declared::

    sft_ingest (source) -> sft_validate (filter) -> sft_select (filter)
        -> sft_dedup (bands -> edges -> clusters -> apply) -> sft_render (filter) -> sft_pack (sink)

They run on the same executor as the pretraining stages (markers, resume, stats, the
rows_in = rows_out + dropped check); the task bodies are in ``sft/task.py``.
"""

from __future__ import annotations

import functools
from typing import Any

from codecorpus import schema
from codecorpus.filters.spec import with_driver_index
from codecorpus.pipeline import tasks
from codecorpus.pipeline.spec import Job, StageRun, StageSpec
from codecorpus.sft import dedup, examples, select, validate
from codecorpus.sft import task as sfttask
from codecorpus.sft.config import (
    SftDedupConfig,
    SftIngestConfig,
    SftPackConfig,
    SftRenderConfig,
    SftSelectConfig,
    SftValidateConfig,
)


def ingest_jobs(run: StageRun) -> list[Job]:
    return [
        Job(schema.shard_name(i), sfttask.ingest_task, (run.task, i, files, run.cfg),
            tuple(f.uri for f in files))
        for i, files in enumerate(run.shards)
    ]


def validate_fn(run: StageRun) -> functools.partial:
    return functools.partial(validate.run, cfg=run.cfg)


def dedup_phases(run: StageRun) -> list[dict[str, Any]]:
    """bands (per shard) -> edges (per bucket) -> clusters (one task) -> apply (per shard)."""
    cfg, ctx, upstream = run.cfg, run.task, run.upstream
    n = run.shard_count(upstream)
    run.run_phase("sft_dedup: bands", [
        Job(f"bands-{schema.shard_name(i)}", tasks.scatter_task,
            (ctx, "bands", i, upstream, functools.partial(dedup.bands, cfg=cfg, seed=run.recipe.seed)))
        for i in range(n)
    ])
    run.run_phase("sft_dedup: edges", [
        Job(f"edges-p{b:05d}", tasks.reduce_task, (ctx, "edges", "bands", b, n, functools.partial(dedup.edges, cfg=cfg)))
        for b in range(cfg.buckets)
    ])
    run.run_phase("sft_dedup: clusters", [
        Job("clusters-p00000", tasks.reduce_task,
            (ctx, "clusters", "edges", 0, cfg.buckets, functools.partial(dedup.clusters, n_shards=n)))
    ])
    return run.run_tasks("sft_dedup: apply", [
        Job(schema.shard_name(i), tasks.apply_task, (ctx, i, upstream, "clusters", 1, dedup.apply),
            (str(run.run.part(upstream, i)),))
        for i in range(n)
    ])


def render_fn(run: StageRun) -> functools.partial:
    return functools.partial(
        examples.run, cfg=run.cfg, tokenizer_cfg=run.recipe.tokenizer,
        max_tokens=sfttask.sft_output(run.recipe).seq_len,
    )


def pack_phases(run: StageRun) -> list[dict[str, Any]]:
    out = sfttask.sft_output(run.recipe)
    jobs = [
        Job(f"{out.name}-{schema.shard_name(i)}", sfttask.pack_task,
            (run.task, out, i, run.upstream, run.recipe.tokenizer), (str(run.run.part(run.upstream, i)),))
        for i in range(run.shard_count(run.upstream))
    ]
    results = run.run_tasks(f"sft_pack: {out.name}", jobs)
    sfttask.write_set_manifest(run.run, run.recipe, results)
    return results


def _parts(name: str) -> Any:
    return functools.partial(sfttask.stage_hash_parts, name=name)


SFT_INGEST = StageSpec("sft_ingest", "source", SftIngestConfig, plan=sfttask.plan, source_jobs=ingest_jobs)
SFT_VALIDATE = StageSpec("sft_validate", "filter", SftValidateConfig, map_fn=validate_fn)
SFT_SELECT = StageSpec(
    "sft_select", "filter", SftSelectConfig, map_fn=with_driver_index(select.run), hash_parts=_parts("sft_select")
)
SFT_DEDUP = StageSpec("sft_dedup", "global", SftDedupConfig, phases=dedup_phases, hash_parts=_parts("sft_dedup"))
SFT_RENDER = StageSpec("sft_render", "filter", SftRenderConfig, map_fn=render_fn, hash_parts=_parts("sft_render"))
SFT_PACK = StageSpec(
    "sft_pack", "sink", SftPackConfig, phases=pack_phases, hash_parts=_parts("sft_pack"),
    output_dirs=("shards",), output_files=("manifest.json",),
)

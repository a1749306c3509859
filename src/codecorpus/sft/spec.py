"""The SFT / agent-trace stages, declared::

    sft_ingest (source) -> sft_validate (filter) -> sft_select (filter)
        -> sft_dedup (bands -> edges -> clusters -> apply) -> sft_render (filter) -> sft_pack (sink)

They run on the same executor as the pretraining stages (markers, resume, stats, the
rows_in = rows_out + dropped check); the job bodies are in ``sft/bodies.py``. Like every spec
module, this one imports them inside the functions that use them: a recipe's load imports
every spec (the stage registry), and none of the stages' dependencies.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from codecorpus import schema
from codecorpus.filters.spec import with_driver_index
from codecorpus.model import config_hash
from codecorpus.packing.spec import merge_small_shards
from codecorpus.pipeline.spec import Job, StageRun, StageSpec
from codecorpus.sft.config import (
    SftDedupConfig,
    SftIngestConfig,
    SftPackConfig,
    SftRenderConfig,
    SftSelectConfig,
    SftValidateConfig,
)
from codecorpus.storage.atomic import file_digests

if TYPE_CHECKING:
    from codecorpus.sft.ingest import TraceFile


def ingest_jobs(run: StageRun) -> list[Job]:
    from codecorpus.sft import bodies as sft_bodies

    return [
        Job(schema.shard_name(i), sft_bodies.ingest_job, (run.ctx, i, files, run.cfg),
            tuple(f.uri for f in files))
        for i, files in enumerate(run.shards)
    ]


def validate_fn(run: StageRun) -> functools.partial:
    from codecorpus.sft import validate

    return functools.partial(validate.run, cfg=run.cfg)


def dedup_phases(run: StageRun) -> list[dict[str, Any]]:
    """bands (per shard) -> edges (per bucket) -> clusters (one job) -> apply (per shard)."""
    from codecorpus.pipeline import bodies
    from codecorpus.sft import dedup

    cfg, ctx, upstream = run.cfg, run.ctx, run.upstream
    n = run.shard_count(upstream)
    run.run_phase("sft_dedup: bands", [
        Job(f"bands-{schema.shard_name(i)}", bodies.scatter_job,
            (ctx, "bands", i, upstream, functools.partial(dedup.bands, cfg=cfg, seed=run.recipe.seed)))
        for i in range(n)
    ])
    run.run_phase("sft_dedup: edges", [
        Job(f"edges-p{b:05d}", bodies.reduce_job, (ctx, "edges", "bands", b, n, functools.partial(dedup.edges, cfg=cfg)))
        for b in range(cfg.buckets)
    ])
    run.run_phase("sft_dedup: clusters", [
        Job("clusters-p00000", bodies.reduce_job,
            (ctx, "clusters", "edges", 0, cfg.buckets, functools.partial(dedup.clusters, n_shards=n)))
    ])
    return run.run_output_jobs("sft_dedup: apply", [
        Job(schema.shard_name(i), bodies.apply_job, (ctx, i, upstream, "clusters", 1, dedup.apply),
            (str(run.run.part(upstream, i)),))
        for i in range(n)
    ])


def render_fn(run: StageRun) -> functools.partial:
    from codecorpus.sft import bodies as sft_bodies
    from codecorpus.sft import examples

    return functools.partial(
        examples.run, cfg=run.cfg, tokenizer_cfg=run.recipe.tokenizer,
        max_tokens=sft_bodies.sft_output(run.recipe).seq_len,
    )


def pack_phases(run: StageRun) -> list[dict[str, Any]]:
    from codecorpus.sft import bodies as sft_bodies

    out = sft_bodies.sft_output(run.recipe)
    jobs = [
        Job(f"{out.name}-{schema.shard_name(i)}", sft_bodies.pack_job,
            (run.ctx, out, i, run.upstream, run.recipe.tokenizer), (str(run.run.part(run.upstream, i)),))
        for i in range(run.shard_count(run.upstream))
    ]
    results = run.run_output_jobs(f"sft_pack: {out.name}", jobs)
    sft_bodies.write_set_manifest(run.run, run.recipe, results, merge_small_shards(run, out, results))
    return results


def plan_traces(recipe: Any, _tasks: Any = None) -> tuple[list[list[TraceFile]], str]:
    """The trace-file shards of an SFT recipe and the hash of that plan."""
    from codecorpus.sft import ingest

    shards = ingest.plan_shards(recipe.sources, recipe.stages.sft_ingest)
    return shards, config_hash([ingest.plan_fingerprint(s) for s in shards])




def select_parts(recipe: Any) -> list[Any]:
    """The task-id files' and benchmark files' contents."""
    from codecorpus.filters import decontam

    cfg = recipe.stages.sft_select
    bench = decontam.benchmark_fingerprint(cfg.decontam) if cfg.decontam is not None else None
    return [file_digests(cfg.decontam_task_ids), bench]


def dedup_parts(recipe: Any) -> list[Any]:
    return [recipe.seed]


def render_parts(recipe: Any) -> list[Any]:
    """The tokenizer, the chat template's bytes and the context length that splits traces."""
    from codecorpus.sft import bodies as sft_bodies
    from codecorpus.sft.template import choose_template

    template = choose_template(recipe.stages.sft_render, recipe.tokenizer)
    return [recipe.tokenizer, template.sha256, sft_bodies.sft_output(recipe).seq_len]


def pack_parts(recipe: Any) -> list[Any]:
    return [recipe.tokenizer, [o.model_dump(mode="json") for o in recipe.outputs]]


SFT_INGEST = StageSpec("sft_ingest", "source", SftIngestConfig, plan=plan_traces, source_jobs=ingest_jobs)
SFT_VALIDATE = StageSpec("sft_validate", "filter", SftValidateConfig, map_fn=validate_fn)


def select_fn(run: StageRun) -> functools.partial:
    from codecorpus.sft import select

    return with_driver_index(select.run)(run)


SFT_SELECT = StageSpec(
    "sft_select", "filter", SftSelectConfig, map_fn=select_fn, hash_parts=select_parts,
    config_paths=("decontam.files.*.path", "decontam_task_ids.*"),
)
SFT_DEDUP = StageSpec("sft_dedup", "global", SftDedupConfig, phases=dedup_phases, hash_parts=dedup_parts)
SFT_RENDER = StageSpec("sft_render", "filter", SftRenderConfig, map_fn=render_fn, hash_parts=render_parts,
                       config_paths=("chat_template",))
SFT_PACK = StageSpec(
    "sft_pack", "sink", SftPackConfig, phases=pack_phases, hash_parts=pack_parts,
    output_dirs=(schema.SETS_DIR,), output_files=(schema.MANIFEST_NAME,),
)

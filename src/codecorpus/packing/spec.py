"""The pack stage: tokenized shards -> the output sets (a sink).

    [mix scan -> mix plan]   per mixed set (``mixing/bodies.py``): RUN/mixing/plan.json
    short sets: pack each tokenized shard (``packing/bodies.py``)
    long sets:  scatter files by repository -> assemble and pack each bucket (``packing/long_bodies.py``)
    merge:      shards below the split floor merged with their neighbours (``packing/shards.py``)
    set manifests, then the run manifest
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from codecorpus import schema
from codecorpus.packing.config import OutputSet, PackConfig
from codecorpus.pipeline.spec import Job, StageRun, StageSpec
from codecorpus.tokenize.config import TokenizerConfig
from codecorpus.tokenize.spec import run_tokenizer

if TYPE_CHECKING:
    from codecorpus.packing import bodies as pack_bodies

def pack_phases(run: StageRun) -> list[dict[str, Any]]:
    """Every output set; a document is counted once per stage: the first set's view is the stage's rows."""
    from codecorpus.packing import bodies as pack_bodies

    upstream = run.upstream
    n = run.shard_count(upstream)
    tok_cfg = run_tokenizer(run)
    upstream_stats = run.stats_of(upstream)
    plan_mixes(run, n, upstream_stats)  # RUN/mixing/plan.json, read by pack_job
    seed, append_eos = run.recipe.seed, run.recipe.stages.tokenize.append_eos
    set_stats = []
    for out in run.recipe.outputs:
        if out.kind == "long":
            set_stats.append(_pack_long(run, out, n, tok_cfg, upstream_stats["tokens_out"]))
            continue
        jobs = [
            Job(f"{out.name}-{schema.shard_name(i)}", pack_bodies.pack_job,
                (run.ctx, out, i, upstream, tok_cfg, seed, append_eos), (str(run.run.part(upstream, i)),))
            for i in range(n)
        ]
        results = run.run_output_jobs(f"pack: {out.name}", jobs)
        set_stats.append(results)
        emitted = merge_small_shards(run, out, results)
        pack_bodies.write_set_manifest(run.run, out, results, emitted, tok_cfg, run.recipe)
    pack_bodies.write_run_manifest(run.run, run.recipe)
    return set_stats[0]


def _pack_long(run: StageRun, out: OutputSet, n: int, tok_cfg: TokenizerConfig, tokens: int) -> list[dict]:
    """Long-context set: scatter files by repository -> assemble and pack each bucket."""
    from codecorpus.packing import long_bodies
    from codecorpus.pipeline import bodies

    buckets = long_bodies.bucket_count(out.long, tokens)  # sized by tokens, so memory is bounded
    phase = long_bodies.scatter_phase(out)
    run.run_phase(f"pack: {out.name} scatter", [
        Job(f"{phase}-{schema.shard_name(i)}", bodies.scatter_job,
            (run.ctx, phase, i, run.upstream, functools.partial(long_bodies.scatter_repositories, buckets=buckets)),
            (str(run.run.part(run.upstream, i)),))
        for i in range(n)
    ])
    jobs = [
        Job(f"{out.name}-{schema.shard_name(b)}", long_bodies.assemble_job,
            (run.ctx, out, b, n, tok_cfg, run.recipe.seed, run.recipe.stages.tokenize.append_eos))
        for b in range(buckets)
    ]
    results = run.run_output_jobs(f"pack: {out.name}", jobs)
    emitted = merge_small_shards(run, out, results)
    long_bodies.write_long_set_manifest(run.run, out, results, emitted, tok_cfg, run.recipe)
    return results


def merge_small_shards(run: StageRun, out: OutputSet, results: list[dict]) -> pack_bodies.EmittedShards:
    """Merge each packed shard below the split floor with its neighbours (``packing/shards.py``)."""
    from codecorpus.packing import bodies as pack_bodies

    kept, merges = pack_bodies.plan_merges(results)
    jobs = [Job(m.job_name(out.name), pack_bodies.merge_job, (run.ctx, out.name, out.seq_len, m)) for m in merges]
    merged = run.run_phase(f"merge: {out.name}", jobs) if jobs else []
    return pack_bodies.finish_merges(run.run, out.name, kept, merges, merged)


def plan_mixes(run: StageRun, n: int, upstream_stats: dict[str, Any]) -> None:
    """Scan the tokenized shards of every mixed set, then plan them (``mixing/bodies.py``)."""
    from codecorpus.mixing import bodies as mix_bodies

    mixed = mix_bodies.mixed_sets(run.recipe.outputs)
    for out in mixed:
        run.run_phase(f"pack: mix {out.name}", [
            Job(f"{mix_bodies.scan_phase(out.name)}-{schema.shard_name(i)}", mix_bodies.scan_job,
                (run.ctx, out, run.recipe.seed, i, run.upstream), (str(run.run.part(run.upstream, i)),))
            for i in range(n)
        ])
    plans = mix_bodies.plan_sets(run.ctx, mixed, run.recipe.seed, n, upstream_stats)
    mix_bodies.write_plans(run.run, plans)
    for plan in plans:
        if not run.quiet:
            run.say(mix_bodies.format_plan(plan))
        for warning in plan.warnings:
            run.warn(f"mix warning: {warning}")


def output_parts(recipe: Any) -> list[Any]:
    """The tokenizer and every output set's settings shape the packed shards."""
    return [recipe.tokenizer, [o.model_dump(mode="json") for o in recipe.outputs]]


PACK = StageSpec(
    "pack", "sink", PackConfig, phases=pack_phases, hash_parts=output_parts, upstream="tokenize",
    output_dirs=(schema.SETS_DIR,), output_files=(schema.MANIFEST_NAME,),
)

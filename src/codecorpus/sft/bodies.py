"""Job bodies of the SFT pipeline, Ray-free like ``pipeline/bodies.py`` (the specs: ``sft/spec.py``).

::

    sft_ingest (source) -> sft_validate (map) -> sft_select (map)
        -> sft_dedup (bands -> edges -> clusters -> apply) -> sft_render (map) -> sft_pack (sink)

The generic executor runs them with the same machinery as the pretraining stages
(markers, resume, stats, the rows_in = rows_out + dropped check). The set
manifest of an SFT set is the pretraining one plus the tokenizer's chat
template hash and an ``sft`` block: traces, examples, continuation segments,
loss tokens, the mask switches and every selection setting.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from codecorpus import schema
from codecorpus.manifests import manifest as mf
from codecorpus.manifests import megatron
from codecorpus.model import recipe_hash
from codecorpus.packing.bodies import EmittedShards, tokenizer_config_record
from codecorpus.packing.config import OutputSet
from codecorpus.pipeline.bodies import (
    InvariantError,
    JobContext,
    finish_shard,
    lang_breakdown,
    result_stats,
    write_marker,
)
from codecorpus.sft import ingest as sft_ingest
from codecorpus.sft.columns import LOSS_TOKENS, NUM_SEGMENTS, SUMMARY_SOURCE
from codecorpus.sft.config import SftIngestConfig
from codecorpus.sft.pack import pack_examples
from codecorpus.sft.template import choose_template
from codecorpus.stage import MapResult
from codecorpus.storage.parquet import read_parquet
from codecorpus.tokenize.config import TokenizerConfig
from codecorpus.tokenize.tokenizer import load_tokenizer

if TYPE_CHECKING:
    from codecorpus.config.recipe import Recipe


def sft_output(recipe: Recipe) -> OutputSet:
    return next(o for o in recipe.outputs if o.kind == "sft")


# --- sft_ingest --------------------------------------------------------------------------


def ingest_job(ctx: JobContext, shard: int, files: list[sft_ingest.TraceFile], cfg: SftIngestConfig) -> dict:
    """Read one shard of trace files; rows_in is every record read (and every unreadable file)."""
    t0 = time.perf_counter()
    result = sft_ingest.read_shard(files, cfg)
    rows_in = result.counters["records"]
    bytes_in = int(np.sum(result.table.column(schema.BYTES).to_numpy())) if result.table.num_rows else 0
    bytes_in += sum(result.dropped.column(schema.BYTES).to_pylist())
    stats = result_stats(rows_in, bytes_in, 0, {}, result, time.perf_counter() - t0)
    return finish_shard(ctx, shard, result, stats)


# --- sft_pack ------------------------------------------------------------------------------


def pack_job(ctx: JobContext, out: OutputSet, shard: int, in_stage: str, tok_cfg: TokenizerConfig) -> dict:
    """Pack one rendered shard into ``seq_len`` sequences: .bin/.idx, segment table, .mask.bin."""
    t0 = time.perf_counter()
    table = read_parquet(ctx.run.part(in_stage, shard))
    dtype = megatron.token_dtype(load_tokenizer(tok_cfg).vocab_size)
    packed = pack_examples(table, out.seq_len, dtype)
    tokens_in = int(np.sum(table.column(schema.NUM_TOKENS).to_numpy())) if table.num_rows else 0
    loss_in = int(np.sum(table.column(LOSS_TOKENS).to_numpy())) if table.num_rows else 0
    record = None
    if table.num_rows:
        prefix = ctx.run.set_shard_prefix(out.name, shard)
        files = megatron.write_indexed_dataset(prefix, packed.tokens, packed.sequence_lengths, packed.document_indices)
        files["seg"] = megatron.write_segments(prefix, packed.segments)
        files["mask"] = megatron.write_loss_mask(prefix, packed.mask)
        record = mf.record_shard(prefix, files, seq_len=out.seq_len, loss_tokens=int(packed.mask.sum(dtype=np.int64)))
        if record.tokens != tokens_in or record.loss_tokens != loss_in or record.documents != table.num_rows:
            raise InvariantError(f"SFT packing lost data in {prefix}: {record.tokens}/{tokens_in} tokens, "
                                 f"{record.loss_tokens}/{loss_in} loss tokens")
    langs = lang_breakdown(table)
    stats = result_stats(table.num_rows, int(sum(v[1] for v in langs.values())), tokens_in, langs,
                         MapResult(table), time.perf_counter() - t0)
    stats["set"] = {
        "record": record.to_json() if record else None,
        "truncated_documents": 0,
        "documents_by_license": {},
        "examples": int(table.column(NUM_SEGMENTS).to_numpy().sum()) if table.num_rows else 0,
        "split_traces": int((table.column(NUM_SEGMENTS).to_numpy() > 1).sum()) if table.num_rows else 0,
        "summary_sources": dict(Counter(table.column(SUMMARY_SOURCE).to_pylist())),
        "formats": dict(Counter(table.column(schema.TRACE_FORMAT).to_pylist())),
        "outcomes": dict(Counter(table.column(schema.TRACE_OUTCOME).to_pylist())),
    }
    write_marker(ctx, f"{out.name}-{schema.shard_name(shard)}", stats)
    return stats


def _sum_counts(shard_stats: list[dict[str, Any]], key: str) -> dict[str, int]:
    total: Counter[str] = Counter()
    for s in shard_stats:
        total.update(s["set"][key])
    return dict(sorted(total.items()))


def write_set_manifest(
    run: schema.RunPaths, recipe: Recipe, shard_stats: list[dict[str, Any]], emitted: EmittedShards
) -> Path:
    """The SFT set manifest over the emitted shards: the common fields plus the chat template
    and an ``sft`` block."""
    out, tok_cfg, stages = sft_output(recipe), recipe.tokenizer, recipe.stages
    tokenizer = load_tokenizer(tok_cfg)
    template = choose_template(stages.sft_render, tok_cfg)
    manifest = mf.build_set_manifest(
        name=out.name,
        set_dir=run.set_dir(out.name),
        shards=emitted.records,
        tokenizer={**tokenizer.fingerprint(), "config": tokenizer_config_record(run, tok_cfg),
                   "chat_template_sha256": template.sha256},
        token_dtype=megatron.token_dtype(tokenizer.vocab_size).name,
        seq_len=out.seq_len,
        packing={"algorithm": stages.sft_pack.algorithm, "truncated_documents": 0, "padding_stored": False,
                 "merged_shards": emitted.merged},
        recipe_hash=recipe_hash(recipe),
        provenance={
            "sources": [s.model_dump(mode="json") for s in recipe.sources],
            "stages": stages.enabled(),
            "seed": recipe.seed,
        },
    )
    dump = {name: getattr(stages, name).model_dump(mode="json") if getattr(stages, name) else None
            for name in ("sft_ingest", "sft_validate", "sft_select", "sft_dedup")}
    totals = manifest["totals"]
    manifest["kind_of_set"] = "sft"
    manifest["sft"] = {
        "traces": totals["documents"],
        "examples": totals["segments"],
        "continuation_segments": totals["segments"] - totals["documents"],
        "split_traces": sum(s["set"]["split_traces"] for s in shard_stats),
        "loss_tokens": totals["loss_tokens"],
        "chat_template": template.record(),
        "render": stages.sft_render.model_dump(mode="json"),
        "selection": dump,
        "summary_sources": _sum_counts(shard_stats, "summary_sources"),
        "formats": _sum_counts(shard_stats, "formats"),
        "outcomes": _sum_counts(shard_stats, "outcomes"),
    }
    path = run.set_manifest(out.name)
    mf.write_manifest(path, manifest)
    mf.write_run_manifest(run.root, mf.build_run_manifest(run.root, [path]))
    return path

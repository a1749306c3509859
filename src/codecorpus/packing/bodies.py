"""The pack stage's job bodies: tokenized shard -> packed Megatron shard; then the manifests.

Ray-free like ``pipeline/bodies.py``; ``packing/spec.py`` makes the jobs. Each tokenized shard is packed on its own (best-fit
decreasing within the shard), so packing is a map over shards and needs no
single process to see the corpus; the set manifest is assembled from the
shard records kept in the completion markers.

A packed shard below ``splits.SHARD_FLOOR`` packed sequences would leave a
launcher's validation or test split empty, so after a set's shards are packed,
``plan_merges`` groups each small one with its neighbours (``packing/shards.py``)
and ``merge_job`` concatenates each group (short, long and SFT sets alike) into
the first shard's place: it writes ``part-0000i.merging.*``, then its marker;
``finish_merges`` renames those over ``part-0000i.*`` and removes the other
members' files. Both steps are safe to repeat: until the marker exists the
members are untouched, and after it only the renames and removals remain.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from codecorpus import schema
from codecorpus.manifests import manifest as mf
from codecorpus.manifests import megatron, splits
from codecorpus.mixing import sample as mix_sample
from codecorpus.model import recipe_hash
from codecorpus.packing.config import OutputSet
from codecorpus.packing.pack import pack_documents
from codecorpus.packing.shards import merge_groups
from codecorpus.pipeline.bodies import (
    InvariantError,
    JobContext,
    lang_breakdown,
    result_stats,
    write_marker,
)
from codecorpus.stage import MapResult
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import fsync_dir
from codecorpus.storage.parquet import read_parquet
from codecorpus.tokenize import fim
from codecorpus.tokenize.config import TokenizerConfig
from codecorpus.tokenize.tokenizer import load_tokenizer

if TYPE_CHECKING:
    from codecorpus.config.recipe import Recipe


def pack_job(
    ctx: JobContext, out: OutputSet, shard: int, in_stage: str, tok_cfg: TokenizerConfig,
    seed: int = 0, append_eos: bool = True,
) -> dict:
    t0 = time.perf_counter()
    table = read_parquet(ctx.run.part(in_stage, shard))
    tokenizer = load_tokenizer(tok_cfg)
    # FIM is per set, so the set re-encodes the documents it rearranges (tokenize/fim.py)
    table, fim_counts = fim.apply_to_table(table, out.fim, tokenizer, seed, out.name, append_eos)
    dtype = megatron.token_dtype(tokenizer.vocab_size)
    # a mixed set packs each document's copies in separate rounds (mixing/sample.py)
    mix = mix_sample.shard_mix(ctx.run, out, table)
    if mix is not None:
        packed = mix_sample.pack_rounds(table, mix.repeats, out.seq_len, dtype)
    else:
        packed = pack_documents(
            table.column(schema.ID).to_pylist(),
            table.column(schema.TOKENS),
            table.column(schema.LANG).to_pylist(),
            table.column(schema.SOURCE).to_pylist(),
            out.seq_len,
            dtype,
        )
    tokens_in = int(np.sum(table.column(schema.NUM_TOKENS).to_numpy())) if table.num_rows else 0
    want_tokens, want_docs = (tokens_in, table.num_rows) if mix is None else (mix.tokens, mix.copies)
    record = None
    if want_docs:  # an empty shard gets no files (Megatron cannot mmap an empty .bin)
        prefix = ctx.run.set_shard_prefix(out.name, shard)
        files = megatron.write_indexed_dataset(prefix, packed.tokens, packed.sequence_lengths, packed.document_indices)
        files["seg"] = megatron.write_segments(prefix, packed.segments)
        record = mf.record_shard(prefix, files, seq_len=out.seq_len)
        if record.tokens != want_tokens or record.documents != want_docs:
            raise InvariantError(f"packing lost data in {prefix}: {record.tokens} of {want_tokens} tokens")
    langs = lang_breakdown(table)
    stats = result_stats(
        table.num_rows, int(sum(v[1] for v in langs.values())), tokens_in, langs, MapResult(table),
        time.perf_counter() - t0,
    )
    licenses = Counter(table.column(schema.LICENSE).to_pylist())
    stats["set"] = {
        "record": record.to_json() if record else None,
        "truncated_documents": packed.truncated_documents,
        "documents_by_license": dict(licenses),
        "mix": mix.achieved if mix is not None else None,
        "fim": dict(fim_counts),
        "tokenizer": tokenizer.fingerprint(),
    }
    write_marker(ctx, f"{out.name}-{schema.shard_name(shard)}", stats)
    return stats


# --- shards below the split floor --------------------------------------------------------


def merging_shard_name(first: int) -> str:
    """Where shards merged into packed shard ``first`` are written before they replace it."""
    return f"{schema.shard_name(first)}.merging"


@dataclass(frozen=True)
class ShardMerge:
    """Consecutive packed shards (by shard number) that become one emitted shard."""

    shards: tuple[int, ...]
    records: tuple[mf.ShardRecord, ...]

    @property
    def prefix(self) -> str:
        """The merged shard takes the name of its first member."""
        return schema.shard_name(self.shards[0])

    @property
    def staging(self) -> str:
        return merging_shard_name(self.shards[0])

    def job_name(self, set_name: str) -> str:
        return f"{set_name}-merge-{self.prefix}"


@dataclass
class EmittedShards:
    """The shards a set manifest lists, and which packed shards each merged one holds."""

    records: list[mf.ShardRecord]
    merged: dict[str, dict[str, int]] = field(default_factory=dict)
    """merged prefix -> {packed shard prefix: its packed sequences}."""


def plan_merges(shard_stats: list[dict[str, Any]]) -> tuple[list[mf.ShardRecord], list[ShardMerge]]:
    """Shards kept as packed, and the merges that lift the others to ``splits.SHARD_FLOOR``.

    ``shard_stats`` are the pack jobs' stats in shard order (position = shard
    number); an empty shard has no record and takes no part.
    """
    present = [(i, mf.ShardRecord(**s["set"]["record"])) for i, s in enumerate(shard_stats) if s["set"]["record"]]
    kept, merges = [], []
    for group in merge_groups([r.sequences for _, r in present], splits.SHARD_FLOOR):
        if len(group) == 1:
            kept.append(present[group[0]][1])
        else:
            merges.append(ShardMerge(tuple(present[k][0] for k in group), tuple(present[k][1] for k in group)))
    return kept, merges


def merge_job(ctx: JobContext, set_name: str, seq_len: int, merge: ShardMerge) -> dict:
    """Concatenate one group of packed shards into its staging shard, checked against their records.

    The record in the marker names the files the staging ones become (same bytes, same sha256).
    """
    t0 = time.perf_counter()
    set_dir = ctx.run.set_dir(set_name)
    for record in merge.records:
        for info in record.files.values():
            store.ensure_local(set_dir / info["path"])
    staging = set_dir / merge.staging
    files = megatron.concat_shards([set_dir / r.prefix for r in merge.records], staging)
    loss = sum(r.loss_tokens for r in merge.records) if "mask" in files else None
    record = mf.record_shard(staging, files, seq_len=seq_len, loss_tokens=loss)
    for key in mf.SHARD_COUNTS:
        want = sum(getattr(r, key) for r in merge.records)
        if getattr(record, key) != want:
            raise InvariantError(f"merging into {staging} changed {key}: {getattr(record, key)}, expected {want}")
    final = {
        key: megatron.FileInfo(path=megatron.shard_file(merge.prefix, key).name, bytes=info["bytes"],
                               sha256=info["sha256"])
        for key, info in files.items()
    }  # fmt: skip
    record = mf.ShardRecord(**{**record.to_json(), "prefix": merge.prefix, "files": final})
    stats = {"set": {"record": record.to_json()}, "seconds": round(time.perf_counter() - t0, 3)}
    write_marker(ctx, merge.job_name(set_name), stats)
    return stats


def _replace_staged(set_dir: Path, merge: ShardMerge, keys: list[str]) -> None:
    """Rename the staging files of a completed merge over its first member's (done ones are skipped)."""
    for key in keys:
        staged = store.ensure_local(megatron.shard_file(set_dir / merge.staging, key))
        if staged.exists():
            final = megatron.shard_file(set_dir / merge.prefix, key)
            os.replace(staged, final)
            fsync_dir(set_dir)
            store.publish(final)
            store.remove_file(staged)


def finish_merges(
    run: schema.RunPaths, set_name: str, kept: list[mf.ShardRecord], merges: list[ShardMerge],
    merged_stats: list[dict[str, Any]],
) -> EmittedShards:
    """Put every merged shard in place and remove the other members' files; list what the set holds.

    Repeating it (a resumed run) redoes only what a crash left undone.
    """
    set_dir = run.set_dir(set_name)
    merged = [mf.ShardRecord(**s["set"]["record"]) for s in merged_stats]
    for merge, record in zip(merges, merged, strict=True):
        _replace_staged(set_dir, merge, sorted(record.files))
        for member in merge.records[1:]:
            for info in member.files.values():
                store.remove_file(set_dir / info["path"])
    return EmittedShards(
        records=sorted([*kept, *merged], key=lambda r: r.prefix),
        merged={m.prefix: {r.prefix: r.sequences for r in m.records} for m in merges},
    )


# --- manifests ---------------------------------------------------------------------------


def write_set_manifest(
    run: schema.RunPaths, out: OutputSet, shard_stats: list[dict[str, Any]], emitted: EmittedShards,
    tok_cfg: TokenizerConfig, recipe: Recipe,
) -> Path:
    fim_counts = [s["set"].get("fim") for s in shard_stats]
    manifest = build_packed_set_manifest(
        run, out, shard_stats, emitted, tok_cfg, recipe, algorithm=recipe.stages.pack.algorithm,
        fim_counts=fim_counts,
    )
    if out.mix is not None:  # the plan and what the shards achieved, checked equal
        manifest["mix"] = mix_sample.mix_record(run, out, [s["set"].get("mix") for s in shard_stats])
    path = run.set_manifest(out.name)
    mf.write_manifest(path, manifest)
    return path


def build_packed_set_manifest(
    run: schema.RunPaths, out: OutputSet, shard_stats: list[dict[str, Any]], emitted: EmittedShards,
    tok_cfg: TokenizerConfig, recipe: Recipe, *, algorithm: str, fim_counts: list[dict | None],
    provenance_extra: dict | None = None, extra: dict | None = None,
) -> dict[str, Any]:
    """The set manifest of a packed pretraining set (short or long) from its shard job stats
    and the shards it emits (``packing.merged_shards`` records which were merged)."""
    tokenizer = packed_with(shard_stats, tok_cfg)
    return mf.build_set_manifest(
        name=out.name,
        set_dir=run.set_dir(out.name),
        shards=emitted.records,
        tokenizer={**tokenizer, "config": tokenizer_config_record(run, tok_cfg)},
        token_dtype=megatron.token_dtype(tokenizer["vocab_size"]).name,
        seq_len=out.seq_len,
        packing={
            "algorithm": algorithm,
            "truncated_documents": sum(s["set"]["truncated_documents"] for s in shard_stats),
            "padding_stored": False,
            "fim": fim.manifest_record(out.fim, fim_counts),
            "merged_shards": emitted.merged,
        },
        recipe_hash=recipe_hash(recipe),
        provenance={**provenance(recipe, shard_stats), **(provenance_extra or {})},
        extra=extra,
    )


def packed_with(shard_stats: list[dict[str, Any]], tok_cfg: TokenizerConfig) -> dict[str, Any]:
    """The fingerprint of the tokenizer a set's shard jobs packed with (``Tokenizer.fingerprint``).

    Each job has the tokenizer loaded and sends its fingerprint back, so the driver need not
    load it. Shards whose markers were written without
    one (a run resumed from an older release) leave it to the driver's own load.
    """
    seen = [s["set"].get("tokenizer") for s in shard_stats]
    if not seen or None in seen:
        return load_tokenizer(tok_cfg).fingerprint()
    if any(f != seen[0] for f in seen):
        raise InvariantError(f"the shards of one set were packed with different tokenizers: {seen[0]} and others")
    return seen[0]


def tokenizer_config_record(run: schema.RunPaths, tok_cfg: TokenizerConfig) -> dict[str, Any]:
    """The tokenizer config a reader can load again; a path inside the run is kept relative."""
    record = tok_cfg.model_dump(mode="json", exclude_none=True)
    path = record.get("path")
    if path and Path(path).resolve().is_relative_to(run.root.resolve()):
        record["path"] = Path(path).resolve().relative_to(run.root.resolve()).as_posix()
    return record


def provenance(recipe: Recipe, shard_stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Sources and the settings that shaped the set (filters, dedup), for audits."""
    stages = recipe.stages
    return {
        "sources": [s.model_dump(mode="json") for s in recipe.sources],
        "documents_by_license": dict(
            sorted(sum((Counter(s["set"]["documents_by_license"]) for s in shard_stats), Counter()).items())
        ),
        "stages": stages.enabled(),
        "filters": stages.filters.model_dump(mode="json") if stages.filters else None,
        "dedup": stages.dedup.model_dump(mode="json") if stages.dedup else None,
        "seed": recipe.seed,
    }


def write_run_manifest(run: schema.RunPaths, recipe: Recipe) -> Path:
    paths = [run.set_manifest(o.name) for o in recipe.outputs]
    return mf.write_run_manifest(run.root, mf.build_run_manifest(run.root, paths))

"""Task bodies of a long-context set: scatter files by repository, then assemble and pack each bucket.

Ray-free like ``tasks.py``. The set is a global phase because a repository's
files are spread over many tokenized shards:

    scatter (per shard): files -> one work file per repository bucket
    assemble (per bucket): repositories in dependency order -> markers -> pieces
                           -> upsampling / short share -> best-fit pack -> Megatron shard

A bucket holds whole repositories, so one assemble task needs memory for its
bucket's text and tokens (about 1/``long.buckets`` of the set) and the largest
repository must fit in one worker.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.config import OutputSet, Recipe, TokenizerConfig
from codecorpus.manifests import manifest as mf
from codecorpus.manifests import megatron
from codecorpus.packing import longctx
from codecorpus.runtime.tasks import (
    InvariantError,
    TaskContext,
    lang_breakdown,
    read_parquet,
    result_stats,
    write_marker,
)
from codecorpus.stage import MapResult
from codecorpus.tokenize import fim
from codecorpus.tokenize.tokenizer import load_tokenizer

SCATTER_COLUMNS = (schema.ID, schema.SOURCE, schema.REPO, schema.PATH, schema.LANG,
                   schema.LICENSE, schema.BYTES, schema.NUM_TOKENS, schema.TEXT, schema.TOKENS)  # fmt: skip


def scatter_phase(out: OutputSet) -> str:
    return f"{out.name}-scatter"


def scatter_repositories(table: pa.Table, shard: int, buckets: int) -> dict[int, pa.Table]:
    """One table per bucket (every bucket, empty ones too, so readers find every file)."""
    table = table.select(list(SCATTER_COLUMNS))
    sources, repos = table.column(schema.SOURCE).to_pylist(), table.column(schema.REPO).to_pylist()
    keys = np.fromiter(
        (longctx.bucket_of(s, r, buckets) for s, r in zip(sources, repos, strict=True)), np.int64, table.num_rows
    )
    return {b: table.filter(pa.array(keys == b)) for b in range(buckets)}


def repository_id(source: str, repo: str) -> str:
    """Document id of a repository document (its segments carry it; copies add ``#k``)."""
    return schema.document_id(source, repo, "", "repository")


def _repo_files(table: pa.Table, strip_eos: bool) -> list[tuple[str, str, list[longctx.RepoFile]]]:
    """(source, repo, files) of each repository in the table, in (source, repo) order."""
    table = table.sort_by([(schema.SOURCE, "ascending"), (schema.REPO, "ascending"), (schema.PATH, "ascending")])
    tokens = table.column(schema.TOKENS).combine_chunks() if table.num_rows else None
    offsets = tokens.offsets.to_numpy() if tokens is not None else np.zeros(1, np.int64)
    values = tokens.values.to_numpy(zero_copy_only=False) if tokens is not None else np.empty(0, np.uint32)
    cols = {c: table.column(c).to_pylist() for c in (schema.SOURCE, schema.REPO, schema.PATH, schema.LANG, schema.TEXT)}
    out: list[tuple[str, str, list[longctx.RepoFile]]] = []
    for i in range(table.num_rows):
        key = (cols[schema.SOURCE][i], cols[schema.REPO][i])
        if not out or out[-1][:2] != key:
            out.append((*key, []))
        end = offsets[i + 1] - (1 if strip_eos and offsets[i + 1] > offsets[i] else 0)
        out[-1][2].append(longctx.RepoFile(
            cols[schema.PATH][i], cols[schema.LANG][i], cols[schema.TEXT][i], values[offsets[i] : end]
        ))  # fmt: skip
    return out


def _apply_fim(
    repos: list[tuple[str, str, list[longctx.RepoFile]]], out: OutputSet, tokenizer, seed: int, ids: list[str]
) -> Counter[str]:
    """FIM per file inside repository documents (``fim:`` on a long set)."""
    files = [f for _, _, fs in repos for f in fs]
    done, counts = fim.fim_documents(ids, [f.text for f in files], tokenizer, out.fim, seed, out.name)
    for row, toks in done.items():
        files[row].tokens = np.asarray(toks, np.uint32)
    return counts


def assemble_task(
    ctx: TaskContext, out: OutputSet, bucket: int, n_inputs: int, tok_cfg: TokenizerConfig,
    seed: int, append_eos: bool,
) -> dict:
    """One bucket of repositories -> one packed Megatron shard of the long set, then its marker."""
    t0 = time.perf_counter()
    phase = scatter_phase(out)
    table = pa.concat_tables(
        [read_parquet(ctx.run.work_part(ctx.stage, phase, bucket, s)) for s in range(n_inputs)]
    )
    tokenizer = load_tokenizer(tok_cfg)
    cfg = out.long
    repos = _repo_files(table, strip_eos=append_eos)
    counters: Counter[str] = Counter()
    if out.fim is not None:
        sorted_ids = table.sort_by([(schema.SOURCE, "ascending"), (schema.REPO, "ascending"),
                                    (schema.PATH, "ascending")]).column(schema.ID).to_pylist()  # fmt: skip
        counters.update(_apply_fim(repos, out, tokenizer, seed, sorted_ids))
    docs = [
        longctx.assemble_repository(repository_id(s, r), s, r, files, tokenizer, cfg, out.seq_len, append_eos)
        for s, r, files in repos
    ]
    docs, copies = longctx.upsample(docs, cfg, seed)
    docs, left_out = longctx.limit_short_documents(docs, cfg, seed)
    packed = longctx.pack_repositories(docs, out.seq_len)
    record = _write_shard(ctx, out, bucket, packed, tokenizer.vocab_size)
    long_stats = {
        **packed.stats,
        "repositories": len(repos),
        "files": table.num_rows,
        "repository_documents": len(docs),
        "pieces": len(packed.sequence_lengths),
        "continuations": sum(len(d.pieces) - 1 for d in docs),
        "split_repositories": sum(len(d.pieces) > 1 for d in docs),
        "split_files": sum(d.split_files for d in docs),
        "upsampled_copies": copies,
        "short_documents_left_out": len(left_out),
        "short_tokens_left_out": sum(d.tokens for d in left_out),
        "short_tokens": sum(d.tokens for d in docs if d.tokens < cfg.short_doc_tokens),
        "marker_tokens": len(packed.tokens) - _file_tokens(docs, repos, append_eos),
        **{k: int(v) for k, v in counters.items()},
    }
    rows = table.drop_columns([schema.TEXT, schema.TOKENS])
    stats = result_stats(
        table.num_rows, int(pc.sum(table.column(schema.BYTES)).as_py() or 0),
        int(pc.sum(table.column(schema.NUM_TOKENS)).as_py() or 0), lang_breakdown(rows),
        MapResult(rows), time.perf_counter() - t0,
    )
    stats["set"] = {
        "record": record.to_json() if record else None,
        "truncated_documents": long_stats["split_repositories"],
        "documents_by_license": dict(Counter(table.column(schema.LICENSE).to_pylist())),
        "long_context": long_stats,
    }
    write_marker(ctx, f"{out.name}-{schema.shard_name(bucket)}", stats)
    return stats


def _file_tokens(docs: list[longctx.RepoDocument], repos: list, append_eos: bool) -> int:
    """Tokens of file contents (and EOS) in the kept documents, so the rest are marker tokens."""
    per_repo = {
        repository_id(s, r): sum(len(f.tokens) for f in fs) + (1 if append_eos else 0) for s, r, fs in repos
    }
    return sum(per_repo[d.doc_id.split("#")[0]] for d in docs)


def _write_shard(
    ctx: TaskContext, out: OutputSet, bucket: int, packed: longctx.LongPacked, vocab_size: int
) -> mf.ShardRecord | None:
    if not len(packed.sequence_lengths):  # an empty bucket gets no files
        return None
    dtype = megatron.token_dtype(vocab_size)
    if int(packed.tokens.max()) >= vocab_size:
        raise InvariantError(f"token id {int(packed.tokens.max())} outside the vocabulary of {vocab_size}")
    prefix = ctx.run.set_shard_prefix(out.name, bucket)
    files = megatron.write_indexed_dataset(
        prefix, packed.tokens.astype(dtype), packed.sequence_lengths, packed.document_indices
    )
    segments = pa.table(
        {
            schema.SEG_DOC_ID: [d.doc_id for d in packed.seg_doc],
            schema.SEG_DOC_OFFSET: pa.array(packed.seg_offset, pa.int64()),
            schema.SEG_LENGTH: pa.array(packed.sequence_lengths, pa.int32()),
            schema.LANG: [d.lang for d in packed.seg_doc],
            schema.SOURCE: [d.source for d in packed.seg_doc],
        },
        schema=schema.SEGMENT_SCHEMA,
    )
    files["seg"] = megatron.write_segments(prefix, segments)
    return mf.record_shard(prefix, files, seq_len=out.seq_len)


def long_context_totals(shard_stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum of the buckets' long-context statistics, with the single-repository share."""
    total: dict[str, Any] = {}
    for s in shard_stats:
        for k, v in s["set"]["long_context"].items():
            if isinstance(v, dict):
                into = total.setdefault(k, {})
                for kk, vv in v.items():
                    into[kk] = into.get(kk, 0) + vv
            else:
                total[k] = total.get(k, 0) + v
    for k in ("sequence_tokens_histogram", "document_tokens_histogram"):
        total[k] = dict(sorted(total.get(k, {}).items(), key=lambda kv: int(kv[0].split("^")[1])))
    tokens = sum(s["set"]["record"]["tokens"] for s in shard_stats if s["set"]["record"])
    total["single_repo_token_share"] = round(total.get("single_repo_tokens", 0) / tokens, 6) if tokens else 0.0
    seqs = total.get("sequences", 0)
    total["single_repo_sequence_share"] = round(total.get("single_repo_sequences", 0) / seqs, 6) if seqs else 0.0
    return total


def write_long_set_manifest(
    run: schema.RunPaths, out: OutputSet, shard_stats: list[dict[str, Any]], tok_cfg: TokenizerConfig,
    recipe: Recipe,
) -> Path:
    from codecorpus.runtime.packtask import build_packed_set_manifest

    long_stats = long_context_totals(shard_stats)
    fim_counts = {k: long_stats.pop(k) for k in ("fim_documents", "fim_psm", "fim_spm") if k in long_stats}
    manifest = build_packed_set_manifest(
        run, out, shard_stats, tok_cfg, recipe, algorithm="bfd-repository", fim_counts=[fim_counts],
        provenance_extra={"long": out.long.model_dump(mode="json")},
        extra={"set_kind": "long", "long_context": long_stats},
    )
    path = run.set_manifest(out.name)
    mf.write_manifest(path, manifest)
    return path

"""Job bodies of a long-context set: scatter files by repository, then assemble and pack each bucket.

Ray-free like ``pipeline/bodies.py``; ``packing/spec.py`` makes the jobs. The set is a global phase because a repository's
files are spread over many tokenized shards:

    scatter (per shard): files -> one work file per repository bucket
    assemble (per bucket): repositories in dependency order -> markers -> pieces
                           -> upsampling / short share -> best-fit pack -> Megatron shard

A bucket holds whole repositories. The number of buckets grows with the set
(``bucket_count``: about ``long.bucket_tokens`` tokens each), and a bucket's
repositories are assembled one at a time, so an assemble job needs about 25
bytes per token of its bucket (its rows with their text, the pieces, the packed
shard; measured 426 MiB for a 16.5M-token bucket) plus one repository's text.
One repository must fit in one job: repository-level documents cannot be cut
before they are assembled.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.manifests import manifest as mf
from codecorpus.manifests import megatron
from codecorpus.packing import longctx
from codecorpus.packing.bodies import EmittedShards, build_packed_set_manifest
from codecorpus.packing.config import LongContextConfig, OutputSet
from codecorpus.pipeline.bodies import (
    InvariantError,
    JobContext,
    lang_breakdown,
    result_stats,
    write_marker,
)
from codecorpus.stage import MapResult
from codecorpus.storage.parquet import read_parquet
from codecorpus.tokenize import fim
from codecorpus.tokenize.config import TokenizerConfig
from codecorpus.tokenize.tokenizer import load_tokenizer

if TYPE_CHECKING:
    from codecorpus.config.recipe import Recipe

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


def bucket_count(cfg: LongContextConfig, tokens: int) -> int:
    """Repository buckets of a long set holding about ``tokens`` tokens (the tokenized corpus,
    times the largest upsampling factor): at least ``cfg.buckets``, and enough that a bucket
    holds about ``cfg.bucket_tokens``. Deterministic: a run's token count is.

    >>> from codecorpus.packing.config import LongContextConfig
    >>> bucket_count(LongContextConfig(buckets=8, bucket_tokens=1000), 20_500)
    21
    """
    factor = max([1.0, *cfg.upsample.values()])
    return max(cfg.buckets, math.ceil(tokens * factor / cfg.bucket_tokens))


def _repositories(table: pa.Table) -> Iterator[tuple[str, str, np.ndarray]]:
    """(source, repo, row indices in path order) of each repository, in (source, repo) order.

    Only the three key columns are sorted; a repository's rows are taken when it is assembled.
    """
    keys = table.select([schema.SOURCE, schema.REPO, schema.PATH])
    order = pc.sort_indices(keys, sort_keys=[(c, "ascending") for c in keys.column_names]).to_numpy()
    sources = keys.column(schema.SOURCE).take(order).to_pylist()
    repos = keys.column(schema.REPO).take(order).to_pylist()
    start = 0
    for i in range(1, len(order) + 1):
        if i == len(order) or (sources[i], repos[i]) != (sources[start], repos[start]):
            yield sources[start], repos[start], order[start:i]
            start = i


def _repo_files(rows: pa.Table, strip_eos: bool) -> list[longctx.RepoFile]:
    """The files of one repository's rows (already in path order)."""
    tokens = rows.column(schema.TOKENS).combine_chunks()
    offsets = tokens.offsets.to_numpy()
    values = tokens.values.to_numpy(zero_copy_only=False)
    paths, langs = rows.column(schema.PATH).to_pylist(), rows.column(schema.LANG).to_pylist()
    texts = rows.column(schema.TEXT).to_pylist()
    files = []
    for i in range(rows.num_rows):
        end = offsets[i + 1] - (1 if strip_eos and offsets[i + 1] > offsets[i] else 0)
        files.append(longctx.RepoFile(paths[i], langs[i], texts[i], values[offsets[i] : end]))
    return files


def _apply_fim(files: list[longctx.RepoFile], ids: list[str], out: OutputSet, tokenizer, seed: int) -> Counter[str]:
    """FIM per file inside a repository document (``fim:`` on a long set)."""
    done, counts = fim.fim_documents(ids, [f.text for f in files], tokenizer, out.fim, seed, out.name)
    for row, toks in done.items():
        files[row].tokens = np.asarray(toks, np.uint32)
    return counts


def assemble_job(
    ctx: JobContext, out: OutputSet, bucket: int, n_inputs: int, tok_cfg: TokenizerConfig,
    seed: int, append_eos: bool,
) -> dict:
    """One bucket of repositories -> one packed Megatron shard of the long set, then its marker.

    Repositories are assembled one at a time: the job holds the bucket's rows, the pieces
    made so far, and the text and tokens of one repository.
    """
    t0 = time.perf_counter()
    phase = scatter_phase(out)
    table = pa.concat_tables(
        [read_parquet(ctx.run.work_part(ctx.stage, phase, bucket, s)) for s in range(n_inputs)]
    )
    tokenizer = load_tokenizer(tok_cfg)
    cfg = out.long
    counters: Counter[str] = Counter()
    docs, file_tokens = [], {}
    for source, repo, rows in _repositories(table):
        # one-row zero-copy slices: ``take`` on a many-chunk table would concatenate every chunk
        taken = pa.concat_tables([table.slice(int(i), 1) for i in rows])
        files = _repo_files(taken, strip_eos=append_eos)
        if out.fim is not None:
            counters.update(_apply_fim(files, taken.column(schema.ID).to_pylist(), out, tokenizer, seed))
        doc_id = repository_id(source, repo)
        docs.append(longctx.assemble_repository(doc_id, source, repo, files, tokenizer, cfg, out.seq_len, append_eos))
        file_tokens[doc_id] = sum(len(f.tokens) for f in files) + (1 if append_eos else 0)
        del taken, files
    n_repos, rows = len(docs), table.drop_columns([schema.TEXT, schema.TOKENS])
    del table  # text and tokens now live only in the pieces
    docs, copies = longctx.upsample(docs, cfg, seed)
    docs, left_out = longctx.limit_short_documents(docs, cfg, seed)
    packed = longctx.pack_repositories(docs, out.seq_len)
    record = _write_shard(ctx, out, bucket, packed, tokenizer.vocab_size)
    long_stats = {
        **packed.stats,
        "repositories": n_repos,
        "files": rows.num_rows,
        "repository_documents": len(docs),
        "pieces": len(packed.sequence_lengths),
        "continuations": sum(len(d.pieces) - 1 for d in docs),
        "split_repositories": sum(len(d.pieces) > 1 for d in docs),
        "split_files": sum(d.split_files for d in docs),
        "upsampled_copies": copies,
        "short_documents_left_out": len(left_out),
        "short_tokens_left_out": sum(d.tokens for d in left_out),
        "short_tokens": sum(d.tokens for d in docs if d.tokens < cfg.short_doc_tokens),
        "marker_tokens": len(packed.tokens) - sum(file_tokens[d.doc_id.split("#")[0]] for d in docs),
        **{k: int(v) for k, v in counters.items()},
    }
    stats = result_stats(
        rows.num_rows, int(pc.sum(rows.column(schema.BYTES)).as_py() or 0),
        int(pc.sum(rows.column(schema.NUM_TOKENS)).as_py() or 0), lang_breakdown(rows),
        MapResult(rows), time.perf_counter() - t0,
    )
    stats["set"] = {
        "record": record.to_json() if record else None,
        "truncated_documents": long_stats["split_repositories"],
        "documents_by_license": dict(Counter(rows.column(schema.LICENSE).to_pylist())),
        "long_context": long_stats,
        "tokenizer": tokenizer.fingerprint(),
    }
    write_marker(ctx, f"{out.name}-{schema.shard_name(bucket)}", stats)
    return stats


def _write_shard(
    ctx: JobContext, out: OutputSet, bucket: int, packed: longctx.LongPacked, vocab_size: int
) -> mf.ShardRecord | None:
    if not len(packed.sequence_lengths):  # an empty bucket gets no files
        return None
    dtype = megatron.token_dtype(vocab_size)
    if int(packed.tokens.max()) >= vocab_size:
        raise InvariantError(f"token id {int(packed.tokens.max())} outside the vocabulary of {vocab_size}")
    prefix = ctx.run.set_shard_prefix(out.name, bucket)
    files = megatron.write_indexed_dataset(
        prefix, packed.tokens.astype(dtype, copy=False), packed.sequence_lengths, packed.document_indices
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
    run: schema.RunPaths, out: OutputSet, shard_stats: list[dict[str, Any]], emitted: EmittedShards,
    tok_cfg: TokenizerConfig, recipe: Recipe,
) -> Path:
    """The long set's manifest: the packed-set fields over the emitted shards, plus ``long_context``."""
    long_stats = long_context_totals(shard_stats)
    fim_counts = {k: long_stats.pop(k) for k in ("fim_documents", "fim_psm", "fim_spm") if k in long_stats}
    manifest = build_packed_set_manifest(
        run, out, shard_stats, emitted, tok_cfg, recipe, algorithm="bfd-repository", fim_counts=[fim_counts],
        provenance_extra={"long": out.long.model_dump(mode="json")},
        extra={"set_kind": "long", "long_context": long_stats},
    )
    path = run.set_manifest(out.name)
    mf.write_manifest(path, manifest)
    return path

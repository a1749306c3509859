"""Pack tokenized documents into ``seq_len`` sequences: split the over-long, BFD the rest.

A document that fits in ``seq_len`` is never cut. One that does not is split
into full ``seq_len`` chunks, each a sequence on its own, and its remainder
(the tail) goes into Best-Fit-Decreasing with the other documents. Sequences
are ordered: the full chunks first (document order), then the BFD bins in
creation order; within a bin, segments in placement order (longest first).

Padding is not stored: a sequence is a run of segments whose lengths sum to at
most ``seq_len``, and the loader pads. The token gather is one numpy fancy
index over the flat token buffer, so packing costs O(tokens) in C plus the BFD
(and a transient 16 bytes per token for the index: 40 MB for a 2.5M-token shard).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from codecorpus import schema
from codecorpus.packing.bfd import best_fit_decreasing

TokenLists = pa.LargeListArray | pa.ListArray | pa.ChunkedArray | Sequence[np.ndarray]
Strings = pa.Array | pa.ChunkedArray | Sequence[str]


@dataclass
class PackedShard:
    """The packed form of one shard, in the layout of a Megatron indexed dataset.

    Megatron's words are used as it reads them: a "sequence" of the ``.idx`` is
    one document *segment* here, and its "documents" are our packed sequences.
    """

    tokens: np.ndarray
    """All segments' tokens, concatenated in sequence order (no padding)."""
    sequence_lengths: np.ndarray
    """int32, one per segment."""
    document_indices: np.ndarray
    """int64 packed-sequence boundaries in segment space: sequence j is segments [d[j], d[j+1])."""
    segments: pa.Table
    """``schema.SEGMENT_SCHEMA``: which piece of which document each segment is."""
    sequences: int
    padding_tokens: int
    """Sum over sequences of ``seq_len`` minus the tokens used."""
    truncated_documents: int
    """Documents longer than ``seq_len``, split into several segments."""


def pack_documents(
    doc_ids: Strings,
    token_lists: TokenLists,
    langs: Strings,
    sources: Strings,
    seq_len: int,
    dtype: npt.DTypeLike = np.int32,
) -> PackedShard:
    """Pack documents (row-aligned inputs) into sequences of at most ``seq_len`` tokens.

    ``dtype`` is the token dtype of the shard (uint16 below 65,500 ids, else
    int32, as Megatron chooses); ids that do not fit are a ``ValueError``.
    Documents with no tokens produce no segment.
    """
    if seq_len <= 0:
        raise ValueError(f"seq_len must be positive, got {seq_len}")
    values, starts, lengths = _flat_tokens(token_lists)
    counts = {"doc_ids": len(doc_ids), "langs": len(langs), "sources": len(sources)}
    if any(n != len(lengths) for n in counts.values()):
        raise ValueError(f"inputs must be row-aligned: {len(lengths)} token lists but {counts}")

    # over-long documents: full chunks become sequences of their own
    full_chunks = np.where(lengths > seq_len, lengths // seq_len, 0)
    chunk_doc = np.repeat(np.arange(len(lengths)), full_chunks)
    chunk_offset = _rank_within_group(full_chunks) * seq_len

    # everything else (whole short documents and remainders) goes into BFD
    rest_offset = full_chunks * seq_len
    rest_len = lengths - rest_offset
    rest_doc = np.flatnonzero(rest_len > 0)
    bins = best_fit_decreasing(rest_len[rest_doc], seq_len)
    placed = rest_doc[np.fromiter((i for b in bins for i in b), np.int64, len(rest_doc))]

    seg_doc = np.concatenate([chunk_doc, placed]).astype(np.int64)
    seg_offset = np.concatenate([chunk_offset, rest_offset[placed]]).astype(np.int64)
    seg_len = np.concatenate([np.full(len(chunk_doc), seq_len), rest_len[placed]]).astype(np.int64)
    bin_sizes = np.fromiter(map(len, bins), np.int64, len(bins))
    document_indices = np.concatenate(
        [np.arange(len(chunk_doc) + 1), len(chunk_doc) + np.cumsum(bin_sizes)]
    ).astype(np.int64)

    tokens = _gather(values, starts[seg_doc] + seg_offset, seg_len)
    _check_fits(tokens, np.dtype(dtype))
    tokens = tokens.astype(dtype, copy=False)
    sequences = len(document_indices) - 1
    return PackedShard(
        tokens=tokens,
        sequence_lengths=seg_len.astype(np.int32),
        document_indices=document_indices,
        segments=_segment_table(doc_ids, langs, sources, seg_doc, seg_offset, seg_len),
        sequences=sequences,
        padding_tokens=sequences * seq_len - len(tokens),
        truncated_documents=int(np.count_nonzero(full_chunks)),
    )


def _flat_tokens(token_lists: TokenLists) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat token buffer, start of each document in it, length of each document)."""
    if isinstance(token_lists, pa.ChunkedArray):
        token_lists = (
            token_lists.combine_chunks()
            if token_lists.num_chunks
            else pa.array([], token_lists.type)
        )
    if isinstance(token_lists, pa.LargeListArray | pa.ListArray):
        if token_lists.null_count:
            raise ValueError("tokens column has nulls: every row must be tokenized before packing")
        offsets = token_lists.offsets.to_numpy().astype(np.int64)  # respects slicing
        values = token_lists.values.to_numpy(zero_copy_only=False)  # unsliced child
        return values, offsets[:-1], np.diff(offsets)
    arrays = [np.asarray(a) for a in token_lists]
    lengths = np.fromiter(map(len, arrays), np.int64, len(arrays))
    starts = np.cumsum(lengths) - lengths
    values = np.concatenate(arrays) if arrays else np.empty(0, np.int64)
    return values, starts, lengths


def _rank_within_group(counts: np.ndarray) -> np.ndarray:
    """0..k-1 for each group of size k, concatenated: ``[2, 0, 3] -> [0, 1, 0, 1, 2]``."""
    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)


def _check_fits(tokens: np.ndarray, dtype: np.dtype) -> None:
    if not tokens.size:
        return
    info = np.iinfo(dtype)
    low, high = int(tokens.min()), int(tokens.max())
    if low < info.min or high > info.max:
        raise ValueError(
            f"token id {high if high > info.max else low} does not fit the shard dtype {dtype}: "
            "use int32 tokens for vocabularies of 65,500 ids or more"
        )


def _gather(values: np.ndarray, src_starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenate ``values[s:s+n]`` for each (s, n) with one fancy index, no Python loop."""
    total = int(lengths.sum())
    dst_starts = np.cumsum(lengths) - lengths
    index = np.arange(total, dtype=np.int64) + np.repeat(src_starts - dst_starts, lengths)
    return values[index]


def _segment_table(
    doc_ids: Strings,
    langs: Strings,
    sources: Strings,
    seg_doc: np.ndarray,
    seg_offset: np.ndarray,
    seg_len: np.ndarray,
) -> pa.Table:
    take = pa.array(seg_doc, pa.int64())

    def pick(values: Strings) -> pa.Array:
        arr = (
            values
            if isinstance(values, pa.Array | pa.ChunkedArray)
            else pa.array(values, pa.string())
        )
        picked = arr.take(take)
        if isinstance(picked, pa.ChunkedArray):
            picked = picked.combine_chunks()
        return picked.cast(pa.string())

    return pa.Table.from_arrays(
        [
            pick(doc_ids),
            pa.array(seg_offset, pa.int64()),
            pa.array(seg_len, pa.int32()),
            pick(langs),
            pick(sources),
        ],
        schema=schema.SEGMENT_SCHEMA,
    )

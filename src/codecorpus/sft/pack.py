"""Pack SFT examples into ``seq_len`` sequences: tokens, loss mask and boundaries.

Each example (a whole trace, or one continuation segment of a split trace) is
an item for Best-Fit-Decreasing; none is ever cut, since ``sft_render`` already
made every example fit ``seq_len``. The output is the layout of the pretraining
sets (``packing/pack.py``): one idx *sequence* per example, ``document_indices``
marking packed sequences, no padding stored, plus the loss mask gathered with
the same index as the tokens so the two stay aligned by construction.

In the segment table ``doc_id`` is the trace id and ``doc_offset`` the token
offset of the example among its trace's examples, so a trace's first example
has offset 0 and the manifest's ``documents`` counts traces, ``segments`` examples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.packing.bfd import best_fit_decreasing
from codecorpus.sft.columns import LOSS_MASK, SEGMENT_LENGTHS


@dataclass
class PackedSft:
    tokens: np.ndarray
    mask: np.ndarray  # uint8, one per token
    sequence_lengths: np.ndarray  # int32, one per example
    document_indices: np.ndarray  # int64, packed-sequence boundaries in example space
    segments: pa.Table  # schema.SEGMENT_SCHEMA
    sequences: int
    padding_tokens: int


def _flat(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = arr.offsets.to_numpy().astype(np.int64)
    return arr.values.to_numpy(zero_copy_only=False), offsets


def pack_examples(table: pa.Table, seq_len: int, dtype: np.dtype) -> PackedSft:
    """Pack the examples of a ``sft_render`` shard (row-aligned token, mask and length columns)."""
    if table.num_rows == 0:
        empty = pa.Table.from_pylist([], schema=schema.SEGMENT_SCHEMA)
        return PackedSft(np.zeros(0, dtype), np.zeros(0, np.uint8), np.zeros(0, np.int32),
                         np.zeros(1, np.int64), empty, 0, 0)
    tokens, tok_off = _flat(table.column(schema.TOKENS))
    mask, mask_off = _flat(table.column(LOSS_MASK))
    if not np.array_equal(tok_off, mask_off):
        raise ValueError("tokens and loss_mask are not aligned row by row")
    seg_lists = table.column(SEGMENT_LENGTHS).to_pylist()
    row = np.repeat(np.arange(len(seg_lists)), [len(s) for s in seg_lists])
    length = np.asarray([n for s in seg_lists for n in s], np.int64)
    within = np.concatenate([np.cumsum([0, *s[:-1]]) for s in seg_lists]).astype(np.int64)
    if np.any(length > seq_len):
        raise ValueError(f"an example is longer than seq_len {seq_len}: sft_render must split it first")
    bins = best_fit_decreasing(length, seq_len)
    order = np.fromiter((i for b in bins for i in b), np.int64, len(length))
    src = tok_off[row[order]] + within[order]
    lens = length[order]
    index = np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(src - (np.cumsum(lens) - lens), lens)
    doc_indices = np.concatenate([[0], np.cumsum([len(b) for b in bins])]).astype(np.int64)
    take = pa.array(row[order], pa.int64())
    segments = pa.Table.from_arrays(
        [
            table.column(schema.ID).take(take).combine_chunks().cast(pa.string()),
            pa.array(within[order], pa.int64()),
            pa.array(lens, pa.int32()),
            table.column(schema.LANG).take(take).combine_chunks().cast(pa.string()),
            table.column(schema.SOURCE).take(take).combine_chunks().cast(pa.string()),
        ],
        schema=schema.SEGMENT_SCHEMA,
    )
    packed_tokens = tokens[index]
    if packed_tokens.size and int(packed_tokens.max()) > np.iinfo(dtype).max:
        raise ValueError(f"token ids do not fit {dtype}")
    return PackedSft(
        tokens=packed_tokens.astype(dtype),
        mask=mask[index].astype(np.uint8),
        sequence_lengths=lens.astype(np.int32),
        document_indices=doc_indices,
        segments=segments,
        sequences=len(bins),
        padding_tokens=len(bins) * seq_len - int(lens.sum()),
    )

"""Tokenize stage: an annotator that adds ``tokens`` and ``num_tokens`` to every row.

The token column never goes through Python lists: the engine returns each batch
as one flat uint32 buffer with offsets (``Tokenizer.encode_flat``), EOS ids are
placed with one scatter, and the column is assembled from those buffers. On 20 MB
of Python source everything but the encoding itself takes a few percent of the
stage (``bench/tokenize_bench.py`` prints the stage against the bare engine and
against tiktoken and HF ``tokenizers``).

Each shard's first non-empty document is encoded again by the vocabulary's own library
(``Tokenizer.check``): an engine that disagrees with it fails the job instead
of writing other ids.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.stage import MapResult, with_column
from codecorpus.tokenize.config import TokenizeConfig, TokenizerConfig
from codecorpus.tokenize.tokenizer import Tokenizer, load_tokenizer


def run(table: pa.Table, cfg: TokenizeConfig, tokenizer_cfg: TokenizerConfig) -> MapResult:
    """Encode ``text`` in batches of ``cfg.batch_size``; EOS closes every document if asked.

    ``num_tokens`` counts the EOS, so it is exactly the length of ``tokens`` and
    ``counters["tokens"]`` is the number of tokens the shards will hold.
    """
    tokenizer = load_tokenizer(tokenizer_cfg)
    texts = table.column(schema.TEXT)
    tokenizer.expect(pc.sum(pc.utf8_length(texts)).as_py() or 0)
    first = pc.index(pc.not_equal(texts, ""), True).as_py()
    if first >= 0:
        tokenizer.check(texts[first].as_py())
    tokens = encode_column(texts, tokenizer, cfg.batch_size, cfg.append_eos)
    lengths = np.diff(tokens.offsets.to_numpy())
    out = with_column(table, schema.TOKENS, tokens)
    out = with_column(out, schema.NUM_TOKENS, pa.array(lengths, pa.int64()))
    return MapResult(table=out, counters=Counter(tokens=int(lengths.sum())))


def encode_column(
    texts: pa.ChunkedArray | pa.Array,
    tokenizer: Tokenizer,
    batch_size: int,
    append_eos: bool,
) -> pa.LargeListArray:
    """``large_list<uint32>`` of the token ids of each text, in row order."""
    values: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        ids, offsets = tokenizer.encode_flat(texts.slice(start, batch_size).to_pylist())
        if append_eos:
            ids, offsets = with_eos(ids, offsets, tokenizer.eos_id)
        values.append(ids)
        lengths.append(np.diff(offsets))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
    flat = np.concatenate(values) if values else np.empty(0, np.uint32)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat.astype(np.uint32, copy=False)))


def with_eos(ids: np.ndarray, offsets: np.ndarray, eos_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat ids and offsets with ``eos_id`` after every text.

    >>> ids, off = with_eos(np.array([1, 2, 3], np.uint32), np.array([0, 2, 2, 3]), 9)
    >>> ids.tolist(), off.tolist()
    ([1, 2, 9, 9, 3, 9], [0, 3, 4, 6])
    """
    shifted = offsets + np.arange(len(offsets), dtype=np.int64)
    out = np.empty(len(ids) + len(offsets) - 1, np.uint32)
    out[shifted[1:] - 1] = eos_id
    # a slice copy per text: a fixed cost per text, where a boolean-mask scatter pays per token
    for a, b, at in zip(offsets[:-1].tolist(), offsets[1:].tolist(), shifted[:-1].tolist(), strict=True):
        out[at : at + b - a] = ids[a:b]
    return out, shifted

"""Tokenize stage: an annotator that adds ``tokens`` and ``num_tokens`` to every row.

The token column is built without a Python list of lists reaching Arrow: each
batch of encoded documents is flattened once into a ``uint32`` numpy array
(``np.fromiter`` over ``itertools.chain``, the fastest way out of Python ints)
and the column is assembled zero-copy from an offsets array and a values array.
``pa.array(list_of_lists)`` does the same job about twice as slowly and holds
a second copy of every token as a Python object while it runs.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.config import TokenizeConfig, TokenizerConfig
from codecorpus.stage import MapResult, with_column
from codecorpus.tokenize.tokenizer import Tokenizer, load_tokenizer


def run(table: pa.Table, cfg: TokenizeConfig, tokenizer_cfg: TokenizerConfig) -> MapResult:
    """Encode ``text`` in batches of ``cfg.batch_size``; EOS closes every document if asked.

    ``num_tokens`` counts the EOS, so it is exactly the length of ``tokens`` and
    ``counters["tokens"]`` is the number of tokens the shards will hold.
    """
    tokenizer = load_tokenizer(tokenizer_cfg)
    tokens = encode_column(table.column(schema.TEXT), tokenizer, cfg.batch_size, cfg.append_eos)
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
    eos_id = tokenizer.eos_id
    lengths: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        batch = texts.slice(start, batch_size).to_pylist()
        encoded = tokenizer.encode_batch(batch)
        if append_eos:
            for ids in encoded:
                ids.append(eos_id)
        lengths.append(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        count = int(lengths[-1].sum())
        values.append(np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.uint32, count=count))
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
    flat = np.concatenate(values) if values else np.empty(0, dtype=np.uint32)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat))

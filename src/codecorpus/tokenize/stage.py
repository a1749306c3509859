"""Tokenize stage: an annotator that adds ``tokens`` and ``num_tokens`` to every row.

The token column never goes through ``pa.array(list_of_lists)``: each
document's id list is appended to one growing ``array.array('I')`` (its C-level
``fromlist`` costs about 13 ns a token, against 32 for ``np.fromiter`` over
``itertools.chain`` and 43 for ``pa.array``), and the column is assembled
zero-copy from that buffer and an offsets array. On 20 MB of Python source
(qwen2.5, 5.1M tokens) everything but the encoding itself takes 0.02 s against
2.6 s for bare ``encode_ordinary_batch``: the stage runs at >99% of library speed.
"""

from __future__ import annotations

import array
from collections import Counter

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.config import TokenizeConfig, TokenizerConfig
from codecorpus.stage import MapResult, with_column
from codecorpus.tokenize.tokenizer import Tokenizer, load_tokenizer

_UINT32 = "I"
assert array.array(_UINT32).itemsize == 4, "array typecode I must be 32-bit on this platform"


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
    values = array.array(_UINT32)
    lengths = np.empty(len(texts), dtype=np.int64)
    eos_id = tokenizer.eos_id
    row = 0
    for start in range(0, len(texts), batch_size):
        encoded = tokenizer.encode_batch(texts.slice(start, batch_size).to_pylist())
        for ids in encoded:
            values.fromlist(ids)
            if append_eos:
                values.append(eos_id)
        lengths[row : row + len(encoded)] = np.fromiter(map(len, encoded), np.int64, len(encoded))
        row += len(encoded)
    if append_eos:
        lengths += 1
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.frombuffer(values, dtype=np.uint32) if len(values) else np.empty(0, np.uint32)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat))

"""Group keys and document hashes: the two per-row quantities a mixture is planned and sampled on.

A document's group is the value of the set's ``mix.by`` column(s) (several joined
with ``/``), mapped through ``mix.groups`` when the recipe names groups. Its
sampling coordinate is a 64-bit hash of (recipe seed, set name, document id):
the same document gets the same coordinate on every worker, on every rerun, and
an independent one in every set.

The plan sees each group through a token histogram over the top ``HASH_BINS``
bits of that hash (``scan_groups``): enough to choose, per group, the hash
threshold below which documents get their extra copy so the selected tokens
hit the target, without holding one row per document anywhere.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.mixing.config import MixConfig
from codecorpus.model import RecipeError

HASH_BITS = 12
HASH_BINS = 1 << HASH_BITS
"""Histogram resolution of the sampling threshold: a group's achieved tokens miss
its target by at most the tokens of one bin (1/4096 of the group on large data;
on small data bins hold single documents, so it is exact to one document)."""

GROUP = "group"
BIN = "bin"
DOCS = "docs"
TOKENS = "tokens"
SCAN_SCHEMA = pa.schema(
    [(GROUP, pa.string()), (BIN, pa.int32()), (DOCS, pa.int64()), (TOKENS, pa.int64())]
)


def key_columns(mix: MixConfig) -> list[str]:
    return list(mix.by)


def check_key_columns(mix: MixConfig, columns: list[str], set_name: str) -> None:
    missing = [c for c in mix.by if c not in columns]
    if missing:
        raise RecipeError(
            f"outputs.{set_name}.mix.by: column(s) {missing} are not in the tokenized documents; "
            f"use one of {sorted(c for c in columns if c not in (schema.TEXT, schema.TOKENS))}"
        )


def group_values(table: pa.Table, mix: MixConfig) -> list[str]:
    """The group of every row: key column values (nulls -> ``unknown``), mapped by ``mix.groups``.

    >>> from codecorpus.mixing.config import MixConfig
    >>> t = pa.table({"lang": ["C", "Rust", "Python"], "source": ["a", "a", "b"]})
    >>> group_values(t, MixConfig(by=("source", "lang")))
    ['a/C', 'a/Rust', 'b/Python']
    >>> group_values(t, MixConfig(groups={"systems": ("C", "Rust")}))
    ['systems', 'systems', 'other']
    """
    parts = [
        pc.fill_null(pc.cast(table.column(c), pa.string()), schema.UNKNOWN).to_pylist()
        for c in mix.by
    ]
    keys = parts[0] if len(parts) == 1 else ["/".join(vals) for vals in zip(*parts, strict=True)]
    if not mix.groups:
        return keys
    lookup = {v: g for g, values in mix.groups.items() for v in values}
    return [lookup.get(k, mix.other) for k in keys]


def doc_hashes(ids: list[str], seed: int, set_name: str) -> np.ndarray:
    """uint64 blake2b of (seed, set, id) per document: the sampling coordinate.

    >>> a = doc_hashes(["x", "y"], 1, "s"); b = doc_hashes(["x", "y"], 1, "s")
    >>> bool((a == b).all()) and bool((doc_hashes(["x"], 2, "s") != a[:1]).all())
    True
    """
    base = hashlib.blake2b(f"{seed}\x00{set_name}\x00".encode(), digest_size=8)
    out = np.empty(len(ids), np.uint64)
    for i, doc_id in enumerate(ids):
        h = base.copy()
        h.update(doc_id.encode("utf-8", "surrogatepass"))
        out[i] = int.from_bytes(h.digest(), "big")
    return out


def hash_bins(hashes: np.ndarray) -> np.ndarray:
    """The histogram bin of each hash: its top ``HASH_BITS`` bits."""
    return (hashes >> np.uint64(64 - HASH_BITS)).astype(np.int64)


def scan_groups(table: pa.Table, mix: MixConfig, seed: int, set_name: str) -> pa.Table:
    """Per (group, hash bin): documents and tokens of one tokenized shard (``SCAN_SCHEMA``)."""
    if table.num_rows == 0:
        return SCAN_SCHEMA.empty_table()
    groups = pa.array(group_values(table, mix), pa.string()).dictionary_encode()
    codes = groups.indices.to_numpy().astype(np.int64)
    bins = hash_bins(doc_hashes(table.column(schema.ID).to_pylist(), seed, set_name))
    tokens = table.column(schema.NUM_TOKENS).to_numpy()
    cell = codes * HASH_BINS + bins
    cells, inverse = np.unique(cell, return_inverse=True)
    docs = np.bincount(inverse)
    toks = np.bincount(inverse, weights=tokens).astype(np.int64)
    names = np.asarray(groups.dictionary.to_pylist(), dtype=object)
    return pa.table(
        {
            GROUP: pa.array(names[cells // HASH_BINS].tolist(), pa.string()),
            BIN: pa.array(cells % HASH_BINS, pa.int32()),
            DOCS: pa.array(docs, pa.int64()),
            TOKENS: pa.array(toks, pa.int64()),
        },
        schema=SCAN_SCHEMA,
    )

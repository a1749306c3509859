"""Exact deduplication as three shard-level phases (a small map-reduce).

    keys     (per input shard)  -> (content_hash, id, shard) scattered into hash buckets
    resolve  (per bucket)       -> one keeper per content hash; losers routed to their shard
    apply    (per input shard)  -> drop losers (reason ``exact_duplicate``, ``dup_of`` = keeper),
                                   annotate keepers with ``dup_count``

No phase holds more than one bucket of keys, so memory per task is
(corpus documents / buckets) x ~100 bytes. The keeper of a group is the
smallest document id: deterministic whatever the worker count or shard order.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.config import DedupConfig
from codecorpus.stage import MapResult, with_column

STAGE = "dedup"
REASON = "exact_duplicate"
SHARD = "shard"
KEY_SCHEMA = pa.schema([(schema.CONTENT_HASH, pa.string()), (schema.ID, pa.string()), (SHARD, pa.int32())])
VERDICT_SCHEMA = pa.schema(
    [(schema.ID, pa.string()), (schema.DUP_OF, pa.string()), (schema.DUP_COUNT, pa.int32())]
)


def bucket_of(hashes: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """Bucket of each hex content hash, from its first 8 hex digits."""
    head = pc.utf8_slice_codeunits(hashes, 0, 8).to_pylist()
    return np.array([int(h, 16) % buckets for h in head], dtype=np.int64)


def keys(table: pa.Table, shard: int, cfg: DedupConfig) -> dict[int, pa.Table]:
    """Phase 1: this shard's (hash, id) pairs, split by bucket."""
    keyed = pa.table(
        {
            schema.CONTENT_HASH: table.column(schema.CONTENT_HASH),
            schema.ID: table.column(schema.ID),
            SHARD: pa.array(np.full(table.num_rows, shard, dtype=np.int32)),
        },
        schema=KEY_SCHEMA,
    )
    return _split(keyed, bucket_of(keyed.column(schema.CONTENT_HASH), cfg.buckets), cfg.buckets)


def resolve(bucket_keys: pa.Table, n_shards: int) -> dict[int, pa.Table]:
    """Phase 2: in one bucket, pick the keeper of every hash group; route verdicts to shards.

    Only rows of groups larger than one are emitted (unique documents need no verdict).
    """
    t = bucket_keys.sort_by([(schema.CONTENT_HASH, "ascending"), (schema.ID, "ascending")])
    hashes = t.column(schema.CONTENT_HASH).to_numpy(zero_copy_only=False)
    n = len(hashes)
    if n == 0:
        return _split(VERDICT_SCHEMA.empty_table(), np.zeros(0, np.int64), n_shards)
    starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]])
    sizes = np.diff(np.r_[starts, n])
    group_of_row = np.repeat(np.arange(len(starts)), sizes)
    in_dup_group = sizes[group_of_row] > 1
    ids = t.column(schema.ID).to_numpy(zero_copy_only=False)
    keeper = ids[starts][group_of_row]
    is_keeper = np.zeros(n, bool)
    is_keeper[starts] = True
    rows = np.flatnonzero(in_dup_group)
    verdicts = pa.table(
        {
            schema.ID: pa.array(ids[rows], pa.string()),
            schema.DUP_OF: pa.array(np.where(is_keeper[rows], None, keeper[rows]), pa.string()),
            schema.DUP_COUNT: pa.array(sizes[group_of_row][rows], pa.int32()),
        },
        schema=VERDICT_SCHEMA,
    )
    shards = t.column(SHARD).to_numpy()[rows].astype(np.int64)
    return _split(verdicts, shards, n_shards)


def apply(table: pa.Table, verdicts: pa.Table, cfg: DedupConfig) -> MapResult:
    """Phase 3: drop this shard's losers and annotate every kept row with its group size."""
    lookup = dict(zip(verdicts.column(schema.ID).to_pylist(), zip(
        verdicts.column(schema.DUP_OF).to_pylist(), verdicts.column(schema.DUP_COUNT).to_pylist(), strict=True
    ), strict=True))
    ids = table.column(schema.ID).to_pylist()
    dup_of = [lookup.get(i, (None, 1))[0] for i in ids]
    counts = [lookup.get(i, (None, 1))[1] for i in ids]
    table = with_column(table, schema.DUP_COUNT, counts)
    lose = pa.array([d is not None for d in dup_of], pa.bool_())
    losers = table.filter(lose)
    dropped = schema.drops_from_rows(
        losers, STAGE, REASON, dup_of=[d for d in dup_of if d is not None]
    )
    return MapResult(table.filter(pc.invert(lose)), dropped)


def _split(table: pa.Table, part: np.ndarray, n_parts: int) -> dict[int, pa.Table]:
    """Rows of ``table`` by partition number, every partition present (possibly empty)."""
    order = np.argsort(part, kind="stable")
    sorted_parts = part[order]
    bounds = np.searchsorted(sorted_parts, np.arange(n_parts + 1))
    taken = table.take(pa.array(order, pa.int64())) if table.num_rows else table
    return {p: taken.slice(bounds[p], bounds[p + 1] - bounds[p]) for p in range(n_parts)}


# --- issue 5: the key of exact grouping (optionally whitespace-normalised) -------------------


def normalized_whitespace_hash(texts: pa.Array | pa.ChunkedArray) -> list[str]:
    """sha256 hex of each text with every whitespace run collapsed to one space, ends trimmed.

    A re-indented, CRLF or trailing-whitespace copy gets the same hash; a change
    inside a token does not. The regex pass is Arrow's (RE2) over the whole column.

    >>> a, b, c = normalized_whitespace_hash(pa.array(["def f():\\n    return 1\\n", "def f():\\r\\n\\treturn 1", "def f(): return 2"]))
    >>> a == b, a == c
    (True, False)
    """
    folded = pc.utf8_trim_whitespace(pc.replace_substring_regex(texts, r"\s+", " "))
    return [schema.content_hash(t.encode("utf-8", "surrogatepass")) for t in folded.to_pylist()]


def exact_keys(table: pa.Table, whitespace: bool) -> list[str]:
    """The hex hash that groups exact duplicates: ``content_hash``, or the whitespace-normalised one."""
    if whitespace:
        return normalized_whitespace_hash(table.column(schema.TEXT))
    return table.column(schema.CONTENT_HASH).to_pylist()

"""Exact + near-duplicate dedup as shard- and bucket-level phases (docs/dedup.md).

    sig      per input shard  shingles -> MinHash -> LSH band keys (+ content-hash keys),
                              scattered into ``buckets`` partitions by key
    pairs    per bucket       documents sharing a key -> edges (verified if the recipe says so)
    clusters one job          connected components, streaming edge shards (see clusters.py)
    members  per input shard  each clustered document's keep-policy values, by cluster bucket
    keep     per bucket       one keeper per cluster by the keep policy -> verdicts by shard
    apply    per input shard  drop ``exact_duplicate`` / ``near_duplicate`` rows (``dup_of`` =
                              keeper); kept rows get ``dup_count``, ``dup_cluster``, ``dup_cluster_size``

A document is ``gid = shard << 32 | row``. Exact duplicates and near
duplicates form one graph, so a cluster mixing both has one keeper; a dropped
row whose content hash equals its keeper's is an ``exact_duplicate``, any
other a ``near_duplicate``. Every sort has a total order (keys, then gid), so
the result is the same bytes for any worker count.

Shuffle volume per document: (bands + 1) rows of ~(6 + 4 x rows) bytes; with
``verify: estimated`` each band row also carries the 4 x num_perm byte
signature, with ``verify: exact`` the document's shingle hashes (8 bytes
each) -- the price of checking candidates next to each other in one job.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.dedup import clusters as cc
from codecorpus.dedup import forks, lsh, minhash
from codecorpus.dedup import keep as keep_policy
from codecorpus.dedup.config import DedupConfig
from codecorpus.dedup.exact import exact_keys
from codecorpus.dedup.shingles import fmix64, shingle_texts
from codecorpus.stage import MapResult, with_column

STAGE = "dedup"
EXACT_REASON = "exact_duplicate"
NEAR_REASON = "near_duplicate"
GID, KEY, PAYLOAD, U, V, ROOT, SIZE = "gid", "key", "payload", "u", "v", "root", "size"
ROW_BITS = 32
_ROW_MASK = np.int64((1 << ROW_BITS) - 1)
EXACT_PREFIX = b"\xff\xff"  # band indices are < 0xffff, so exact keys never equal band keys
ANCHORS = 4
"""Verified buckets larger than ``2 * ANCHORS`` compare members with their first ANCHORS only."""

CANDIDATE_SCHEMA = pa.schema([(KEY, pa.binary()), (GID, pa.int64()), (PAYLOAD, pa.large_binary())])
EDGE_SCHEMA = pa.schema([(U, pa.int64()), (V, pa.int64())])
LABEL_SCHEMA = pa.schema([(GID, pa.int64()), (ROOT, pa.int64()), (SIZE, pa.int32())])
MEMBER_SCHEMA = pa.schema(
    [(ROOT, pa.int64()), (GID, pa.int64()), (SIZE, pa.int32()), (schema.CONTENT_HASH, pa.string()),
     ("license", pa.int8()), ("stars", pa.int64()), ("last_commit", pa.int64()), ("length", pa.int64()),
     ("id", pa.string())]
)
VERDICT_SCHEMA = pa.schema(
    [(GID, pa.int64()), (schema.REASON, pa.string()), (schema.DUP_OF, pa.string()),
     (schema.DUP_CLUSTER, pa.string()), (schema.DUP_CLUSTER_SIZE, pa.int32()), (schema.DUP_COUNT, pa.int32())]
)


def banding(cfg: DedupConfig) -> tuple[int, int]:
    """The recipe's ``(bands, rows)``, or the optimum for its threshold and num_perm."""
    if cfg.bands is not None and cfg.rows is not None:
        return cfg.bands, cfg.rows
    return lsh.optimal_params(cfg.threshold, cfg.num_perm)


def gids(shard: int, n: int) -> np.ndarray:
    return (np.int64(shard) << ROW_BITS) | np.arange(n, dtype=np.int64)


def _route(hashes: np.ndarray, parts: int) -> np.ndarray:
    return (hashes % np.uint64(parts)).astype(np.int64)


# --- phase 1: signatures and keys ------------------------------------------------------


def candidates(table: pa.Table, shard: int, cfg: DedupConfig, seed: int) -> dict[int, pa.Table]:
    """This shard's exact and LSH band keys, each with its document's gid, by bucket."""
    return _candidates(table, gids(shard, table.num_rows), cfg, seed)


def candidates_without_forks(
    table: pa.Table, forks_table: pa.Table, shard: int, cfg: DedupConfig, seed: int
) -> dict[int, pa.Table]:
    """``candidates`` of the rows whose repository is not removed as a fork (dedup/forks.py).

    A fork's rows take no part in file-level dedup: were a fork's file the
    keeper of a cluster, dropping the fork would drop every copy of that file.
    """
    keep_rows = np.flatnonzero(~forks.fork_mask(table, forks_table))
    ids = gids(shard, table.num_rows)[keep_rows]
    return _candidates(table.take(pa.array(keep_rows, pa.int64())), ids, cfg, seed)


def _candidates(table: pa.Table, ids: np.ndarray, cfg: DedupConfig, seed: int) -> dict[int, pa.Table]:
    pieces: list[pa.Table] = []
    routes: list[np.ndarray] = []
    if cfg.exact:
        hashes = exact_keys(table, cfg.exact_whitespace)
        keys = pa.array([EXACT_PREFIX + bytes.fromhex(h) for h in hashes], pa.binary())
        pieces.append(_candidate_table(keys, ids, None))
        routes.append(np.array([int(h[:16], 16) for h in hashes], np.uint64))
    if cfg.near:
        band_pieces, band_routes = _band_candidates(table, ids, cfg, seed)
        pieces += band_pieces
        routes += band_routes
    if not pieces:
        return _split(CANDIDATE_SCHEMA.empty_table(), np.zeros(0, np.int64), cfg.buckets)
    return _split(pa.concat_tables(pieces), _route(np.concatenate(routes), cfg.buckets), cfg.buckets)


def _band_candidates(
    table: pa.Table, ids: np.ndarray, cfg: DedupConfig, seed: int
) -> tuple[list[pa.Table], list[np.ndarray]]:
    shingles = shingle_texts(table.column(schema.TEXT), cfg.ngram)
    sig = minhash.signatures(shingles, cfg.num_perm, seed, cfg.engine)
    has = np.flatnonzero(shingles.counts() > 0)  # documents with no token are nobody's duplicate
    sig = sig[has]
    payload = _payloads(sig, shingles, has, cfg)
    bands, rows = banding(cfg)
    pieces, routes = [], []
    for band in range(bands):
        keys, mixed = lsh.band_keys(sig, band, rows)
        pieces.append(_candidate_table(keys.cast(pa.binary()), ids[has], payload))
        routes.append(mixed)
    return pieces, routes


def _payloads(sig: np.ndarray, shingles, has: np.ndarray, cfg: DedupConfig) -> pa.Array | None:
    if cfg.verify == "estimated":  # each row's signature bytes, straight from the matrix's buffer
        n, width = sig.shape[0], 4 * sig.shape[1]
        offsets = np.arange(n + 1, dtype=np.int64) * width
        data = np.ascontiguousarray(sig, np.uint32)
        return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if cfg.verify == "exact":
        off = shingles.offsets
        return pa.array(
            [np.unique(shingles.hashes[off[d] : off[d + 1]]).tobytes() for d in has], pa.large_binary()
        )
    return None


def _candidate_table(keys: pa.Array, ids: np.ndarray, payload: pa.Array | None) -> pa.Table:
    if payload is None:
        payload = pa.nulls(len(ids), pa.large_binary())
    return pa.table({KEY: keys, GID: pa.array(ids, pa.int64()), PAYLOAD: payload}, schema=CANDIDATE_SCHEMA)


# --- phase 2: candidate pairs per bucket -------------------------------------------------


def pairs(bucket_rows: pa.Table, cfg: DedupConfig) -> dict[int, pa.Table]:
    """Edges between documents that share a key in this bucket (one output partition).

    Unverified groups (and exact-hash groups) become stars on their smallest gid:
    connected components need no more than that, and a bucket of m copies costs
    m - 1 edges instead of m^2 / 2.
    """
    t = bucket_rows.sort_by([(KEY, "ascending"), (GID, "ascending")])
    n = t.num_rows
    if n < 2:
        return {0: EDGE_SCHEMA.empty_table()}
    keys = t.column(KEY)
    same = np.asarray(pc.equal(keys.slice(1), keys.slice(0, n - 1)).to_numpy(zero_copy_only=False), bool)
    starts = np.flatnonzero(np.r_[True, ~same])
    sizes = np.diff(np.r_[starts, n])
    g = t.column(GID).to_numpy()
    exact = _is_exact(keys)
    group_of = np.repeat(np.arange(len(starts)), sizes)
    multi = sizes[group_of] > 1
    star = multi & ((cfg.verify == "none") | exact[starts][group_of])
    not_first = np.ones(n, bool)
    not_first[starts] = False
    sel = star & not_first
    us, vs = [g[starts][group_of][sel]], [g[sel]]
    if cfg.verify != "none":
        payload = t.column(PAYLOAD)
        for gi in np.flatnonzero((sizes > 1) & ~exact[starts]):
            u, v = _verified(g, payload, int(starts[gi]), int(sizes[gi]), cfg)
            us.append(u)
            vs.append(v)
    return {0: _edges(np.concatenate(us), np.concatenate(vs))}


def _is_exact(keys: pa.ChunkedArray) -> np.ndarray:
    heads = pc.binary_slice(keys, 0, len(EXACT_PREFIX)).to_pylist()
    return np.array([h == EXACT_PREFIX for h in heads], bool)


def _verified(g: np.ndarray, payload: pa.ChunkedArray, start: int, size: int, cfg: DedupConfig):
    """Pairs of one bucket group whose similarity reaches the threshold (all pairs, or vs anchors)."""
    blobs = payload.slice(start, size).to_pylist()
    members = g[start : start + size]
    left = range(size) if size <= 2 * ANCHORS else range(ANCHORS)
    us, vs = [], []
    for i in left:
        for j in range(i + 1, size):
            if _similarity(blobs[i], blobs[j], cfg) >= cfg.threshold:
                us.append(members[i])
                vs.append(members[j])
    return np.array(us, np.int64), np.array(vs, np.int64)


def _similarity(a: bytes, b: bytes, cfg: DedupConfig) -> float:
    if cfg.verify == "estimated":
        return float(minhash.estimated_jaccard(np.frombuffer(a, np.uint32), np.frombuffer(b, np.uint32)))
    sa, sb = np.frombuffer(a, np.uint64), np.frombuffer(b, np.uint64)
    inter = len(np.intersect1d(sa, sb, assume_unique=True))
    union = len(sa) + len(sb) - inter
    return inter / union if union else 1.0


def _edges(u: np.ndarray, v: np.ndarray) -> pa.Table:
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    both = np.unique(np.stack([lo, hi], axis=1), axis=0) if len(lo) else np.zeros((0, 2), np.int64)
    return pa.table({U: both[:, 0], V: both[:, 1]}, schema=EDGE_SCHEMA)


# --- phase 3: connected components -------------------------------------------------------


def components(edge_shards: Iterable[pa.Table], shard_rows: list[int]) -> dict[int, pa.Table]:
    """Cluster root and size of every document that has a duplicate, routed to its shard."""
    n_shards = len(shard_rows)
    base = np.zeros(n_shards + 1, np.int64)
    np.cumsum(shard_rows, out=base[1:])

    def dense(gid: np.ndarray) -> np.ndarray:
        return base[gid >> ROW_BITS] + (gid & _ROW_MASK)

    def edges():
        for t in edge_shards:
            yield dense(t.column(U).to_numpy()), dense(t.column(V).to_numpy())

    labels = cc.connected_components(int(base[-1]), edges())
    sizes = np.bincount(labels, minlength=len(labels))
    nodes = np.flatnonzero(sizes[labels] > 1)
    roots = labels[nodes]

    def sparse(idx: np.ndarray) -> np.ndarray:
        shard = np.searchsorted(base, idx, side="right") - 1
        return (shard.astype(np.int64) << ROW_BITS) | (idx - base[shard])

    node_gids = sparse(nodes)
    out = pa.table(
        {GID: node_gids, ROOT: sparse(roots), SIZE: sizes[roots].astype(np.int32)}, schema=LABEL_SCHEMA
    )
    return _split(out, node_gids >> ROW_BITS, n_shards)


# --- phase 4: members' keep-policy values ------------------------------------------------


def members(table: pa.Table, labels: pa.Table, shard: int, cfg: DedupConfig) -> dict[int, pa.Table]:
    """For this shard's clustered rows: (root, gid, policy values), by the root's bucket."""
    rows = labels.column(GID).to_numpy() & _ROW_MASK
    picked = table.take(pa.array(rows, pa.int64()))
    attrs = keep_policy.policy_attributes(picked)
    out = pa.table(
        {
            ROOT: labels.column(ROOT), GID: labels.column(GID), SIZE: labels.column(SIZE),
            schema.CONTENT_HASH: pa.array(exact_keys(picked, cfg.exact_whitespace), pa.string()),
            **{name: attrs[name] for name in ("license", "stars", "last_commit", "length", "id")},
        },
        schema=MEMBER_SCHEMA,
    )
    root_hash = fmix64(labels.column(ROOT).to_numpy().astype(np.uint64))
    return _split(out, _route(root_hash, cfg.buckets), cfg.buckets)


# --- phase 5: one keeper per cluster ------------------------------------------------------


def keep(bucket_members: pa.Table, cfg: DedupConfig, n_shards: int) -> dict[int, pa.Table]:
    """Pick each cluster's keeper by the keep policy; a verdict for every member, by shard."""
    t = bucket_members.sort_by([(ROOT, "ascending"), *keep_policy.sort_keys(cfg.keep_policy)])
    n = t.num_rows
    if n == 0:
        return _split(VERDICT_SCHEMA.empty_table(), np.zeros(0, np.int64), n_shards)
    root = t.column(ROOT).to_numpy()
    starts = np.flatnonzero(np.r_[True, root[1:] != root[:-1]])
    group_of = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    ids = t.column("id").to_numpy(zero_copy_only=False)
    hashes = t.column(schema.CONTENT_HASH).to_numpy(zero_copy_only=False)
    keeper_id, keeper_hash = ids[starts][group_of], hashes[starts][group_of]
    is_keeper = np.zeros(n, bool)
    is_keeper[starts] = True
    exact_copy = hashes == keeper_hash
    dup_count = np.bincount(group_of, weights=exact_copy, minlength=len(starts)).astype(np.int32)
    reason = np.where(is_keeper, None, np.where(exact_copy, EXACT_REASON, NEAR_REASON))
    verdicts = pa.table(
        {
            GID: t.column(GID),
            schema.REASON: pa.array(reason, pa.string()),
            schema.DUP_OF: pa.array(np.where(is_keeper, None, keeper_id), pa.string()),
            schema.DUP_CLUSTER: pa.array(keeper_id, pa.string()),
            schema.DUP_CLUSTER_SIZE: t.column(SIZE),
            schema.DUP_COUNT: pa.array(np.where(is_keeper, dup_count[group_of], 1), pa.int32()),
        },
        schema=VERDICT_SCHEMA,
    )
    return _split(verdicts, t.column(GID).to_numpy() >> ROW_BITS, n_shards)


# --- phase 6: apply ------------------------------------------------------------------------


def apply(table: pa.Table, verdicts: pa.Table, cfg: DedupConfig) -> MapResult:
    """Drop this shard's duplicates; annotate kept rows with their cluster."""
    n = table.num_rows
    rows = verdicts.column(GID).to_numpy() & _ROW_MASK
    reason = np.full(n, None, object)
    dup_of = np.full(n, None, object)
    cluster = table.column(schema.ID).to_numpy(zero_copy_only=False).copy()
    size = np.ones(n, np.int32)
    count = np.ones(n, np.int32)
    reason[rows] = verdicts.column(schema.REASON).to_numpy(zero_copy_only=False)
    dup_of[rows] = verdicts.column(schema.DUP_OF).to_numpy(zero_copy_only=False)
    cluster[rows] = verdicts.column(schema.DUP_CLUSTER).to_numpy(zero_copy_only=False)
    size[rows] = verdicts.column(schema.DUP_CLUSTER_SIZE).to_numpy()
    count[rows] = verdicts.column(schema.DUP_COUNT).to_numpy()
    table = with_column(table, schema.DUP_COUNT, pa.array(count, pa.int32()))
    table = with_column(table, schema.DUP_CLUSTER, pa.array(cluster, pa.string()))
    table = with_column(table, schema.DUP_CLUSTER_SIZE, pa.array(size, pa.int32()))
    lose = np.array([r is not None for r in reason], bool)
    lost = np.flatnonzero(lose)
    dropped = schema.drops_from_rows(
        table.take(pa.array(lost, pa.int64())), STAGE, [str(r) for r in reason[lost]],
        dup_of=[str(d) for d in dup_of[lost]], threshold=[cfg.threshold if r == NEAR_REASON else None
                                                             for r in reason[lost]],
    )
    return MapResult(table.filter(pa.array(~lose)), dropped)


def apply_with_forks(table: pa.Table, verdicts: pa.Table, forks_table: pa.Table, cfg: DedupConfig) -> MapResult:
    """``apply``, then drop the rows of repositories removed as forks (reason ``fork_of``)."""
    return forks.drop_forks(apply(table, verdicts, cfg), forks_table, cfg.forks)


def _split(table: pa.Table, part: np.ndarray, n_parts: int) -> dict[int, pa.Table]:
    """Rows of ``table`` by partition number, every partition present (possibly empty)."""
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(n_parts + 1))
    taken = table.take(pa.array(order, pa.int64())) if table.num_rows else table
    return {p: taken.slice(bounds[p], bounds[p + 1] - bounds[p]) for p in range(n_parts)}

"""Exact and near-duplicate removal of traces: a global stage in three phases plus apply.

::

    bands    (per shard)     conversation text -> word shingles -> MinHash -> LSH band keys,
                             plus the content hash as one more "band" (exact duplicates),
                             routed to ``buckets`` partitions by key
    edges    (per bucket)    rows sharing a (band, key): each is linked to the group's
                             smallest id when its estimated Jaccard with it is >= threshold
                             (exact-band links always hold); all edges go to partition 0
    clusters (one job)       union-find over the edges; each component keeps its smallest
                             id, the others are routed to their own shard as removals
    apply    (per shard)     drop the removals: ``exact_duplicate`` when the content hash
                             equals the keeper's, else ``near_duplicate`` (score = Jaccard)

Shingling and MinHash are ``codecorpus.dedup`` (the pretraining near-dedup); the
text is ``select.conversation_text``, which does not depend on the chat template.
Only the clusters job sees all edges, and edges exist only for duplicates, so
its memory is proportional to the duplicates, not the corpus.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.dedup.minhash import EMPTY, estimated_jaccard, signatures
from codecorpus.dedup.shingles import shingle_texts
from codecorpus.sft.config import SftDedupConfig
from codecorpus.sft.select import conversation_text
from codecorpus.stage import MapResult

STAGE = "sft_dedup"
EXACT_BAND = -1

BAND_SCHEMA = pa.schema([
    ("band", pa.int32()), ("key", pa.uint64()), ("id", pa.string()), ("content_hash", pa.string()),
    ("shard", pa.int32()), ("sig", pa.list_(pa.uint32())),
])  # fmt: skip
EDGE_SCHEMA = pa.schema([
    ("id", pa.string()), ("other", pa.string()), ("score", pa.float64()),
    ("id_hash", pa.string()), ("other_hash", pa.string()), ("id_shard", pa.int32()), ("other_shard", pa.int32()),
])  # fmt: skip
REMOVAL_SCHEMA = pa.schema([("id", pa.string()), ("reason", pa.string()), ("dup_of", pa.string()), ("score", pa.float64())])


def _key(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def bands(table: pa.Table, shard: int, cfg: SftDedupConfig, seed: int) -> dict[int, pa.Table]:
    """Scatter phase: the band rows of one shard, one table per bucket (all buckets present)."""
    ids = table.column(schema.ID).to_pylist()
    hashes = table.column(schema.CONTENT_HASH).to_pylist()
    rows: list[tuple[int, int, str, str, list[int]]] = []
    sig = np.zeros((len(ids), cfg.num_perm), np.uint32)
    if cfg.near and ids:
        texts = [conversation_text(m) for m in table.column(schema.TRACE_MESSAGES).to_pylist()]
        sig = signatures(shingle_texts(texts, cfg.ngram), cfg.num_perm, seed)
    r = cfg.num_perm // cfg.bands
    for i, (rid, h) in enumerate(zip(ids, hashes, strict=True)):
        if cfg.exact:
            rows.append((EXACT_BAND, int(h[:16], 16), rid, h, sig[i].tolist()))
        if cfg.near and not np.all(sig[i] == EMPTY):
            rows.extend((b, _key(sig[i, b * r : (b + 1) * r].tobytes()), rid, h, sig[i].tolist()) for b in range(cfg.bands))
    out: dict[int, list] = {p: [] for p in range(cfg.buckets)}
    for band, key, rid, h, s in rows:
        out[key % cfg.buckets].append({"band": band, "key": key, "id": rid, "content_hash": h, "shard": shard, "sig": s})
    return {p: pa.Table.from_pylist(v, schema=BAND_SCHEMA) for p, v in out.items()}


def edges(table: pa.Table, cfg: SftDedupConfig) -> dict[int, pa.Table]:
    """Reduce phase per bucket: verified links from each group member to the group's smallest id."""
    table = table.sort_by([("band", "ascending"), ("key", "ascending"), ("id", "ascending")])
    d = table.to_pydict()
    out = []
    i, n = 0, table.num_rows
    while i < n:
        j = i
        while j < n and d["band"][j] == d["band"][i] and d["key"][j] == d["key"][i]:
            j += 1
        anchor = np.asarray(d["sig"][i], np.uint32)
        for k in range(i + 1, j):
            if d["id"][k] == d["id"][i]:
                continue
            score = 1.0 if d["band"][i] == EXACT_BAND else float(estimated_jaccard(np.asarray(d["sig"][k], np.uint32), anchor))
            if score >= cfg.threshold:
                out.append({"id": d["id"][k], "other": d["id"][i], "score": score,
                            "id_hash": d["content_hash"][k], "other_hash": d["content_hash"][i],
                            "id_shard": d["shard"][k], "other_shard": d["shard"][i]})
        i = j
    return {0: pa.Table.from_pylist(out, schema=EDGE_SCHEMA)}


def _find(parent: dict[str, str], x: str) -> str:
    root = x
    while parent.get(root, root) != root:
        root = parent[root]
    while parent.get(x, x) != root:  # path compression
        parent[x], x = root, parent[x]
    return root


def clusters(table: pa.Table, n_shards: int) -> dict[int, pa.Table]:
    """The single clusters job: union-find, keeper = smallest id; removals routed by shard."""
    d = table.sort_by([("id", "ascending"), ("other", "ascending")]).to_pydict()
    parent: dict[str, str] = {}
    info: dict[str, tuple[str, int]] = {}
    best: dict[tuple[str, str], float] = {}
    for a, b, score, ha, hb, sa, sb in zip(*(d[k] for k in EDGE_SCHEMA.names), strict=True):
        info[a], info[b] = (ha, sa), (hb, sb)
        best[(a, b)] = max(score, best.get((a, b), 0.0))
        ra, rb = _find(parent, a), _find(parent, b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    out: dict[int, list] = {s: [] for s in range(n_shards)}
    for node in sorted(info):
        root = _find(parent, node)
        if root == node:
            continue
        exact = info[node][0] == info[root][0]
        score = best.get((node, root), best.get((root, node)))
        out[info[node][1]].append({"id": node, "reason": "exact_duplicate" if exact else "near_duplicate",
                                   "dup_of": root, "score": 1.0 if exact else score})
    return {s: pa.Table.from_pylist(v, schema=REMOVAL_SCHEMA) for s, v in out.items()}


def apply(table: pa.Table, removals: pa.Table) -> MapResult:
    """Drop the shard's removals, each with its reason, keeper id and score."""
    by_id = {r["id"]: r for r in removals.to_pylist()}
    ids = table.column(schema.ID).to_pylist()
    drop_idx = [i for i, rid in enumerate(ids) if rid in by_id]
    keep_idx = [i for i, rid in enumerate(ids) if rid not in by_id]
    gone = [by_id[ids[i]] for i in drop_idx]
    dropped = schema.drops_from_rows(
        table.take(pa.array(drop_idx, pa.int64())), STAGE, [g["reason"] for g in gone],
        dup_of=[g["dup_of"] for g in gone], score=[g["score"] for g in gone],
    )
    return MapResult(table.take(pa.array(keep_idx, pa.int64())), dropped)

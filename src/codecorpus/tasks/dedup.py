"""The commit_dedup stage: the same change once, wherever it was committed.

Exact: ``git patch-id --stable`` of each commit's diff (git's own identity of a
change: whitespace and line numbers ignored, file order irrelevant), so a fix
cherry-picked onto a branch or copied into a fork is one task. A commit whose
diff has no patch id (a mode-only change) is keyed by its sha, so identical
shas across fork repositories still count once.

Near: MinHash of the diff's code-aware shingles with LSH banding, dedup's own
kernels (:mod:`codecorpus.dedup.shingles`, :mod:`~codecorpus.dedup.minhash`,
:mod:`~codecorpus.dedup.lsh`); rows sharing a band are near-duplicates.

Both give edges of one graph; its connected components
(:func:`codecorpus.dedup.clusters.connected_components`) are the clusters. A
cluster keeps one row by the keep policy (permissive license, then the oldest
commit, i.e. the original rather than the cherry-pick, then repository and sha
names) and drops the others as ``duplicate_exact`` (same patch id as the
keeper) or ``duplicate_near``, with ``dup_of`` naming the keeper.

:func:`run` does it all on one table. Across shards it runs as phases
(``tasks/spec.py``), each correct for any number of shards:

    keys (per shard)       patch id and band keys of every commit, routed by hash(key) % buckets
    groups (per bucket)    keys shared by several commits -> (id, group root) member rows
    clusters (one job)     connected components and keepers, routed to each member's shard
    apply (per shard)      drop the non-keepers, add patch_id / dup_cluster / dup_cluster_size

Only ``clusters`` sees rows of every shard, and only of commits that share a key
with another one (duplicates): one small record (id, shard, patch id, license,
date, repository, sha; about 200 bytes) per such member, so a million duplicated
commits are about 200 MB.
"""

from __future__ import annotations

import hashlib
import subprocess

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.dedup import lsh, minhash, shingles
from codecorpus.dedup.clusters import connected_components
from codecorpus.dedup.keep import license_rank
from codecorpus.stage import MapResult
from codecorpus.tasks import columns as C
from codecorpus.tasks import gitlog
from codecorpus.tasks.config import CommitDedupConfig

STAGE = "commit_dedup"


def patch_ids(shas: list[str], diffs: list[str]) -> list[str]:
    """``git patch-id --stable`` of each diff (one git process); ``sha:<sha>`` where git gives none."""
    payload = b"".join(
        f"commit {sha}\n".encode() + diff.encode("utf-8", "surrogateescape") + (b"" if diff.endswith("\n") else b"\n")
        for sha, diff in zip(shas, diffs, strict=True)
    )
    proc = subprocess.run(["git", "patch-id", "--stable"], input=payload, capture_output=True,
                          env=gitlog.GIT_ENV, check=True)  # fmt: skip
    found = {}
    for line in proc.stdout.decode("ascii").splitlines():
        pid, sha = line.split()
        found.setdefault(sha, pid)
    return [found.get(sha, f"sha:{sha}") for sha in shas]


def add_patch_ids(table: pa.Table) -> pa.Table:
    ids = patch_ids(table.column(C.SHA).to_pylist(), table.column(C.DIFF).to_pylist())
    return C.with_column(table, C.PATCH_ID, ids)


def signatures(table: pa.Table, cfg: CommitDedupConfig) -> np.ndarray:
    """MinHash signatures of the diffs' changed lines (context lines and headers left out)."""
    changed = [_changed_lines(d) for d in table.column(C.DIFF).to_pylist()]
    return minhash.signatures(shingles.shingle_texts(pa.array(changed, pa.large_string()), cfg.ngram),
                              cfg.num_perm, cfg.seed)  # fmt: skip


def _changed_lines(diff: str) -> str:
    return "\n".join(
        line for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    )  # fmt: skip


def keep_order(table: pa.Table, policy: tuple[str, ...]) -> np.ndarray:
    """Rank of every row under the keep policy (0 = kept first); ``sha`` and ``id`` break every tie."""
    keys = {
        "license": pa.array(license_rank(table.column(schema.LICENSE))),
        "oldest": table.column(C.COMMITTER_DATE).combine_chunks().cast(pa.int64()),
        "repo": table.column(schema.REPO).combine_chunks(),
        "sha": table.column(C.SHA).combine_chunks(),
    }
    order = [c for c in policy if c != "sha"] + ["sha"]
    sort_table = pa.table({**{c: keys[c] for c in order}, "id": table.column(schema.ID)})
    indices = pc.sort_indices(sort_table, [(c, "ascending") for c in [*order, "id"]]).to_numpy()
    rank = np.empty(len(indices), np.int64)
    rank[indices] = np.arange(len(indices))
    return rank


def exact_edges(patch_id: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Edges joining every row to the first row with its patch id."""
    first: dict[str, int] = {}
    u, v = [], []
    for i, pid in enumerate(patch_id):
        j = first.setdefault(pid, i)
        if j != i:
            u.append(j)
            v.append(i)
    return np.array(u, np.int64), np.array(v, np.int64)


def near_edges(sig: np.ndarray, cfg: CommitDedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """Edges joining rows that share an LSH band (empty diffs never match)."""
    bands, rows = lsh.optimal_params(cfg.threshold, cfg.num_perm)
    nonempty = np.flatnonzero(~(sig == minhash.EMPTY).all(axis=1))
    u, v = [], []
    for band in range(bands):
        keys, _ = lsh.band_keys(sig[nonempty], band, rows)
        first: dict[bytes, int] = {}
        for i, key in zip(nonempty.tolist(), keys.to_pylist(), strict=True):
            j = first.setdefault(key, i)
            if j != i:
                u.append(j)
                v.append(i)
    return np.array(u, np.int64), np.array(v, np.int64)


def cluster(table: pa.Table, sig: np.ndarray | None, cfg: CommitDedupConfig) -> tuple[np.ndarray, np.ndarray]:
    """(keeper row index, cluster size) of every row."""
    n = table.num_rows
    edges = []
    pids = table.column(C.PATCH_ID).to_pylist()
    if cfg.exact:
        edges.append(exact_edges(pids))
    if cfg.near and sig is not None:
        edges.append(near_edges(sig, cfg))
    root = connected_components(n, edges)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    best: dict[int, int] = {}  # component root -> its member ranked first by the keep policy
    for i in np.argsort(keep_order(table, cfg.keep_policy), kind="stable").tolist():
        best.setdefault(int(root[i]), i)
    keeper = np.array([best[int(r)] for r in root], np.int64)
    return keeper, np.bincount(root, minlength=n)[root]


def run(table: pa.Table, cfg: CommitDedupConfig) -> MapResult:
    """Exact and near dedup of one table of commits (every phase in one process)."""
    table = add_patch_ids(table) if C.PATCH_ID not in table.column_names else table
    sig = signatures(table, cfg) if cfg.near and table.num_rows else None
    keeper, sizes = cluster(table, sig, cfg)
    ids = table.column(schema.ID).to_pylist()
    pids = table.column(C.PATCH_ID).to_pylist()
    out = C.with_column(table, C.DUP_CLUSTER, [ids[k] for k in keeper])
    out = C.with_column(out, C.DUP_CLUSTER_SIZE, sizes.tolist())
    n = table.num_rows
    kept = np.flatnonzero(keeper == np.arange(n))
    gone = np.flatnonzero(keeper != np.arange(n))
    reasons = ["duplicate_exact" if pids[i] == pids[keeper[i]] else "duplicate_near" for i in gone.tolist()]
    dropped = schema.drops_from_rows(
        out.take(pa.array(gone, pa.int64())), STAGE, reasons,
        dup_of=[ids[keeper[i]] for i in gone.tolist()],
        detail=[f"patch-id {pids[i]}" for i in gone.tolist()],
    )
    return MapResult(out.take(pa.array(kept, pa.int64())), dropped)


# --- the phases across shards ----------------------------------------------------------

KEY = "key"
ROOT = "root"
SHARD = "shard"
KEEPER = "keeper"
REASON = "reason"
MEMBER_COLUMNS = (schema.ID, C.PATCH_ID, schema.LICENSE, C.COMMITTER_DATE, schema.REPO, C.SHA)
"""What the clusters phase needs of a member: its id, patch id and the keep policy's keys."""


def bucket_of(key: bytes, buckets: int) -> int:
    """Stable bucket of a key (the same on every worker and every run)."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") % buckets


def row_keys(table: pa.Table, cfg: CommitDedupConfig) -> list[list[bytes]]:
    """The dedup keys of every row: ``x`` + its patch id, ``n`` + each LSH band key of its diff."""
    keys: list[list[bytes]] = [[] for _ in range(table.num_rows)]
    if cfg.exact:
        for i, pid in enumerate(table.column(C.PATCH_ID).to_pylist()):
            keys[i].append(b"x" + pid.encode())
    if cfg.near and table.num_rows:
        sig = signatures(table, cfg)
        bands, rows = lsh.optimal_params(cfg.threshold, cfg.num_perm)
        nonempty = np.flatnonzero(~(sig == minhash.EMPTY).all(axis=1))
        for band in range(bands):
            band_keys, _ = lsh.band_keys(sig[nonempty], band, rows)
            for i, key in zip(nonempty.tolist(), band_keys.to_pylist(), strict=True):
                keys[i].append(b"n" + key)
    return keys


def scatter_keys(table: pa.Table, shard: int, cfg: CommitDedupConfig, buckets: int) -> dict[int, pa.Table]:
    """Phase ``keys``: every (key, member) routed to its bucket; partition ``buckets`` keeps the
    shard's own patch ids for ``apply`` (so git patch-id runs once per commit)."""
    table = add_patch_ids(table)
    members = table.select(list(MEMBER_COLUMNS))
    rows: list[list[int]] = [[] for _ in range(buckets)]
    keys: list[list[bytes]] = [[] for _ in range(buckets)]
    for i, row_key in enumerate(row_keys(table, cfg)):
        for key in row_key:
            b = bucket_of(key, buckets)
            rows[b].append(i)
            keys[b].append(key)
    out = {}
    for b in range(buckets):
        part = members.take(pa.array(rows[b], pa.int64()))
        part = part.append_column(KEY, pa.array(keys[b], pa.binary()))
        out[b] = part.append_column(SHARD, pa.array([shard] * len(rows[b]), pa.int32()))
    out[buckets] = table.select([schema.ID, C.PATCH_ID])
    return out


def group_keys(table: pa.Table) -> dict[int, pa.Table]:
    """Phase ``groups``: the members of every key held by two or more commits, each with the
    group's root (its smallest id); one partition, for the clusters task."""
    table = table.sort_by([(KEY, "ascending"), (schema.ID, "ascending")])
    keys, ids = table.column(KEY).to_pylist(), table.column(schema.ID).to_pylist()
    take, roots = [], []
    start = 0
    for end in range(1, len(keys) + 1):
        if end < len(keys) and keys[end] == keys[start]:
            continue
        if len(set(ids[start:end])) > 1:
            take += range(start, end)
            roots += [ids[start]] * (end - start)
        start = end
    out = table.take(pa.array(take, pa.int64())).drop_columns([KEY])
    return {0: out.append_column(ROOT, pa.array(roots, pa.string()))}


def decide_clusters(table: pa.Table, cfg: CommitDedupConfig, n_shards: int) -> dict[int, pa.Table]:
    """Phase ``clusters`` (one job, duplicates only): components of the shared keys, the keep
    policy's keeper of each, and per member its keeper, cluster size and drop reason, routed
    to the member's shard."""
    ids = sorted(set(table.column(schema.ID).to_pylist()))
    index = {doc: i for i, doc in enumerate(ids)}
    u = np.array([index[d] for d in table.column(schema.ID).to_pylist()], np.int64)
    v = np.array([index[d] for d in table.column(ROOT).to_pylist()], np.int64)
    root = connected_components(len(ids), [(u, v)])
    first = pc.index_in(pa.array(ids, pa.string()), table.column(schema.ID)).to_numpy()
    members = table.take(pa.array(first, pa.int64()))  # one row per member, in ``ids`` order
    best: dict[int, int] = {}
    for i in np.argsort(keep_order(members, cfg.keep_policy), kind="stable").tolist():
        best.setdefault(int(root[i]), i)
    keeper = [best[int(r)] for r in root]
    sizes = np.bincount(root, minlength=len(ids))[root] if ids else np.zeros(0, np.int64)
    pids = members.column(C.PATCH_ID).to_pylist()
    reasons = [None if k == i else "duplicate_exact" if pids[i] == pids[k] else "duplicate_near"
               for i, k in enumerate(keeper)]  # fmt: skip
    decided = pa.table({
        schema.ID: pa.array(ids, pa.string()),
        KEEPER: pa.array([ids[k] for k in keeper], pa.string()),
        C.DUP_CLUSTER_SIZE: pa.array(sizes.tolist(), pa.int32()),
        REASON: pa.array(reasons, pa.string()),
        C.PATCH_ID: pa.array([pids[k] for k in keeper], pa.string()),
    })  # fmt: skip
    shard = members.column(SHARD).to_numpy()
    return {s: decided.filter(pa.array(shard == s)) for s in range(n_shards)}


def apply_clusters(table: pa.Table, own: pa.Table, decided: pa.Table) -> MapResult:
    """Phase ``apply``: the shard's kept commits with the dedup columns; the others dropped."""
    if not own.column(schema.ID).equals(table.column(schema.ID)):
        raise ValueError("commit_dedup: the keys phase's patch ids are not of this shard's rows")
    ids = table.column(schema.ID).to_pylist()
    pids = own.column(C.PATCH_ID).to_pylist()
    found = {r[schema.ID]: r for r in decided.to_pylist()}
    keeper = [found[d][KEEPER] if d in found else d for d in ids]
    out = C.with_column(table, C.PATCH_ID, pids)
    out = C.with_column(out, C.DUP_CLUSTER, keeper)
    out = C.with_column(out, C.DUP_CLUSTER_SIZE, [found[d][C.DUP_CLUSTER_SIZE] if d in found else 1 for d in ids])
    gone = [i for i, d in enumerate(ids) if d in found and found[d][REASON] is not None]
    kept = [i for i, d in enumerate(ids) if not (d in found and found[d][REASON] is not None)]
    dropped = schema.drops_from_rows(
        out.take(pa.array(gone, pa.int64())), STAGE, [found[ids[i]][REASON] for i in gone],
        dup_of=[keeper[i] for i in gone], detail=[f"patch-id {pids[i]}" for i in gone],
    )
    return MapResult(out.take(pa.array(kept, pa.int64())), dropped)

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

Phases: patch ids and signatures are per shard (:func:`add_patch_ids`,
:func:`signatures`); clustering needs only the small key columns and the band
keys of every row (:func:`cluster`), the same shape as pretraining dedup, so
the runtime can shuffle band keys by hash bucket exactly as it does there.
"""

from __future__ import annotations

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

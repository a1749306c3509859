"""Repository-level dedup: forks and vendored copies are removed as a whole (reason ``fork_of``).

A repository R is a *fork candidate of* S when at least ``min_shared_frac`` of
R's distinct file hashes (the exact-grouping key: ``content_hash``, or the
whitespace-normalised hash) also occur in S, and R has at least
``min_files`` distinct files. Phases, none holding the corpus:

    fkeys    per input shard  (file hash, repo, keep-policy values) scattered by file hash
    fcount   per hash bucket  repositories sharing each hash -> per repo pair shared counts, and
                              per repo partial totals; both routed by repository
    fedges   per repo bucket  totals -> candidate edges R -> S (with R's repo-level policy values)
    fdecide  one job          resolve the candidate graph -> the removed repositories, broadcast

Which one goes: when only R mostly copies S (S also has much of its own),
R goes and S stays. When both mostly copy each other (a fork and its
origin), the keep policy aggregated per repository picks the keeper:
permissive license first (the best license among its files), then more
stars, then the newest commit, then more files, then the smaller name (the
``length`` criterion becomes "more files", ``id`` the repository name).
A repository is removed only in favour of a repository that is kept, so the
removed content always survives in a kept repository: chains (A copies B
copies C) are resolved in rounds, and a cycle, rare as it is, keeps its
best-ranked member.

Cost: hashes held by more than ``max_repos_per_hash`` repositories
(licenses, empty ``__init__.py``) pair nobody: a hash held by k repositories
makes k(k-1)/2 pairs. The decide job holds only candidate edges (the forks),
and its output, one row per removed repository, is read by every shard.

Rows of removed repositories take no part in file-level dedup (see
``near.candidates_without_forks``) and are dropped in the apply phase with
``detail`` = the kept repository, ``score`` = the shared fraction and
``threshold`` = ``min_shared_frac``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.dedup import keep as keep_policy
from codecorpus.dedup.config import DedupConfig, ForksConfig
from codecorpus.dedup.exact import exact_keys
from codecorpus.stage import MapResult

STAGE = "dedup"
REASON = "fork_of"
HASH, REPO, OTHER, COUNT, FILES, SHARED, FRAC, FORK_OF = "hash", "repo", "other", "n", "files", "shared", "frac", "fork_of"
_ATTRS = [("license", pa.int8()), ("stars", pa.int64()), ("last_commit", pa.int64())]

KEY_SCHEMA = pa.schema([(HASH, pa.string()), (REPO, pa.string()), *_ATTRS])
COUNT_SCHEMA = pa.schema([(REPO, pa.string()), (OTHER, pa.string()), (COUNT, pa.int64()), *_ATTRS])
"""``other`` null: a repository's distinct hashes in one hash bucket (and its policy values);
``other`` set: hashes the two repositories share in that bucket."""
EDGE_SCHEMA = pa.schema(
    [(REPO, pa.string()), (OTHER, pa.string()), (SHARED, pa.int64()), (FILES, pa.int64()), (FRAC, pa.float64()),
     *_ATTRS]
)
FORK_SCHEMA = pa.schema(
    [(REPO, pa.string()), (FORK_OF, pa.string()), (SHARED, pa.int64()), (FILES, pa.int64()), (FRAC, pa.float64())]
)


def repo_keys(table: pa.Table) -> pa.Array:
    """A repository's identity: ``source/repo`` (two sources may both have a repo named ``x``)."""
    joined = pc.binary_join_element_wise(table.column(schema.SOURCE), table.column(schema.REPO), "/")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _route_strings(values: Sequence[str], parts: int) -> np.ndarray:
    """Partition of each string from the first 8 bytes of its blake2b (stable across processes)."""
    return np.array(
        [int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "little") % parts for v in values],
        np.int64,
    )


# --- phase 1: (hash, repo) by hash bucket -------------------------------------------------


def keys(table: pa.Table, shard: int, cfg: DedupConfig) -> dict[int, pa.Table]:
    """This shard's (file hash, repository, policy values) rows, by hash bucket."""
    del shard  # the rows carry everything the later phases need
    hashes = exact_keys(table, cfg.exact_whitespace)
    attrs = keep_policy.policy_attributes(table)
    out = pa.table(
        {HASH: pa.array(hashes, pa.string()), REPO: repo_keys(table),
         **{name: attrs[name].cast(t) for name, t in _ATTRS}},
        schema=KEY_SCHEMA,
    )
    route = np.array([int(h[:15], 16) % cfg.buckets for h in hashes], np.int64)
    return _split(out, route, cfg.buckets)


# --- phase 2: shared hashes per repository pair, in one hash bucket ---------------------


def count(bucket_rows: pa.Table, cfg: DedupConfig) -> dict[int, pa.Table]:
    """Per repository: distinct hashes here; per repository pair: hashes both hold. By repository."""
    distinct = bucket_rows.group_by([REPO, HASH], use_threads=False).aggregate(
        [("license", "min"), ("stars", "max"), ("last_commit", "max")]
    )
    totals = distinct.group_by(REPO, use_threads=False).aggregate(
        [(HASH, "count"), ("license_min", "min"), ("stars_max", "max"), ("last_commit_max", "max")]
    )
    total_rows = pa.table(
        {REPO: totals.column(REPO), OTHER: pa.nulls(totals.num_rows, pa.string()),
         COUNT: totals.column(f"{HASH}_count").cast(pa.int64()),
         "license": totals.column("license_min_min"), "stars": totals.column("stars_max_max"),
         "last_commit": totals.column("last_commit_max_max")},
        schema=COUNT_SCHEMA,
    )
    a, b, shared = shared_pairs(
        distinct.column(HASH).to_numpy(zero_copy_only=False), distinct.column(REPO).to_numpy(zero_copy_only=False),
        cfg.forks.max_repos_per_hash,
    )
    n_pairs = len(a)
    pair_rows = pa.table(
        {REPO: pa.array(np.r_[a, b], pa.string()), OTHER: pa.array(np.r_[b, a], pa.string()),
         COUNT: pa.array(np.r_[shared, shared], pa.int64()), "license": pa.nulls(2 * n_pairs, pa.int8()),
         "stars": pa.nulls(2 * n_pairs, pa.int64()), "last_commit": pa.nulls(2 * n_pairs, pa.int64())},
        schema=COUNT_SCHEMA,
    )
    out = pa.concat_tables([total_rows, pair_rows]).sort_by([(REPO, "ascending"), (OTHER, "ascending")])
    return _split(out, _route_strings(out.column(REPO).to_pylist(), cfg.buckets), cfg.buckets)


def shared_pairs(hashes: np.ndarray, repos: np.ndarray, max_repos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Repository pairs ``a < b`` holding a common hash, and how many hashes they share.

    ``(hashes[i], repos[i])`` must be distinct. Hashes held by more than
    ``max_repos`` repositories are skipped. Vectorised per group size: all groups
    of k repositories expand through one ``triu_indices(k)``.

    >>> a, b, n = shared_pairs(np.array(["h1", "h1", "h2", "h2", "h2"]), np.array(["x", "y", "x", "y", "z"]), 8)
    >>> list(zip(a.tolist(), b.tolist(), n.tolist()))
    [('x', 'y', 2), ('x', 'z', 1), ('y', 'z', 1)]
    """
    if len(hashes) == 0:
        empty = np.zeros(0, object)
        return empty, empty, np.zeros(0, np.int64)
    names, repo_idx = np.unique(repos, return_inverse=True)
    _, hash_idx = np.unique(hashes, return_inverse=True)
    order = np.lexsort((repo_idx, hash_idx))
    h, r = hash_idx[order], repo_idx[order].astype(np.int64)
    starts = np.flatnonzero(np.r_[True, h[1:] != h[:-1]])
    sizes = np.diff(np.r_[starts, len(h)])
    codes = []
    for k in np.unique(sizes[(sizes >= 2) & (sizes <= max_repos)]):
        i, j = np.triu_indices(int(k), 1)
        group_starts = starts[sizes == k][:, None]
        codes.append((r[group_starts + i] * len(names) + r[group_starts + j]).ravel())
    if not codes:
        empty = np.zeros(0, object)
        return empty, empty, np.zeros(0, np.int64)
    pair, shared = np.unique(np.concatenate(codes), return_counts=True)
    return names[pair // len(names)], names[pair % len(names)], shared.astype(np.int64)


# --- phase 3: candidate edges, per repository bucket -------------------------------------------


def edges(part_rows: pa.Table, cfg: DedupConfig) -> dict[int, pa.Table]:
    """Repository totals, then every R -> S with shared/files(R) >= ``min_shared_frac`` (to one job)."""
    is_total = pc.is_null(part_rows.column(OTHER))
    totals = part_rows.filter(is_total).group_by(REPO, use_threads=False).aggregate(
        [(COUNT, "sum"), ("license", "min"), ("stars", "max"), ("last_commit", "max")]
    )
    pairs = part_rows.filter(pc.invert(is_total)).group_by([REPO, OTHER], use_threads=False).aggregate(
        [(COUNT, "sum")]
    )
    files = pa.table({REPO: totals.column(REPO), FILES: totals.column(f"{COUNT}_sum"),
                      "license": totals.column("license_min"), "stars": totals.column("stars_max"),
                      "last_commit": totals.column("last_commit_max")})
    joined = pairs.join(files, REPO, join_type="inner", use_threads=False)
    shared = joined.column(f"{COUNT}_sum")
    frac = pc.divide(pc.cast(shared, pa.float64()), pc.cast(joined.column(FILES), pa.float64()))
    keep = pc.and_(pc.greater_equal(frac, cfg.forks.min_shared_frac),
                   pc.greater_equal(joined.column(FILES), cfg.forks.min_files))
    out = pa.table(
        {REPO: joined.column(REPO), OTHER: joined.column(OTHER), SHARED: shared, FILES: joined.column(FILES),
         FRAC: frac, **{name: joined.column(name) for name, _ in _ATTRS}},
    ).filter(keep)
    out = out.cast(EDGE_SCHEMA).sort_by([(REPO, "ascending"), (OTHER, "ascending")])
    return {0: out}


# --- phase 4: decide ----------------------------------------------------------------------------


def decide(edge_rows: pa.Table, cfg: DedupConfig, n_shards: int) -> dict[int, pa.Table]:
    """The removed repositories (``fork_of`` = a kept one), the same table for every shard."""
    rows = edge_rows.sort_by([(REPO, "ascending"), (OTHER, "ascending")]).to_pylist()
    rank = {r[REPO]: _rank(r, cfg.keep_policy) for r in rows}
    candidate = {(r[REPO], r[OTHER]) for r in rows}
    targets: dict[str, list[dict]] = {}
    for r in rows:
        mutual = (r[OTHER], r[REPO]) in candidate
        if not mutual or rank[r[OTHER]] < rank[r[REPO]]:  # a mutual copy goes only to the better-ranked
            targets.setdefault(r[REPO], []).append(r)
    removed = resolve(targets, rank)
    out = pa.Table.from_pylist(
        [{REPO: repo, FORK_OF: e[OTHER], SHARED: e[SHARED], FILES: e[FILES], FRAC: e[FRAC]}
         for repo, e in sorted(removed.items())],
        schema=FORK_SCHEMA,
    )
    return dict.fromkeys(range(n_shards), out)


def resolve(targets: dict[str, list[dict]], rank: dict[str, tuple]) -> dict[str, dict]:
    """Remove a repository only in favour of a kept one; returns repo -> the edge it is removed by.

    Repositories without outgoing edges are kept. In rounds: a repository with a
    kept target is removed (its best target: highest shared fraction, then most
    shared, then name); one whose targets are all removed is kept. If a round
    decides nothing (a cycle), the best-ranked undecided repository is kept.

    >>> e = lambda a, b: {"repo": a, "other": b, "frac": 0.9, "shared": 9}
    >>> sorted(resolve({"a": [e("a", "b")], "b": [e("b", "c")]}, {"a": (1,), "b": (0,)}))
    ['b']
    """
    kept: set[str] = set()
    removed: dict[str, dict] = {}
    undecided = set(targets)

    def is_kept(repo: str) -> bool:
        return repo in kept or repo not in targets

    while undecided:
        progress = False
        for repo in sorted(undecided):
            live = [e for e in targets[repo] if is_kept(e[OTHER])]
            if live:
                removed[repo] = min(live, key=lambda e: (-e[FRAC], -e[SHARED], e[OTHER]))
            elif all(e[OTHER] in removed for e in targets[repo]):
                kept.add(repo)
            else:
                continue
            undecided.discard(repo)
            progress = True
        if not progress:
            best = min(undecided, key=lambda r: (rank[r], r))
            kept.add(best)
            undecided.discard(best)
    return removed


def _rank(row: dict, policy: Sequence[str]) -> tuple:
    """Sort key of a repository under the keep policy (smaller is better); name breaks ties."""
    values = {"license": row["license"], "stars": -row["stars"], "last_commit": -row["last_commit"],
              "length": -row[FILES]}
    return (*(values[c] for c in policy if c in values), row[REPO])


# --- apply --------------------------------------------------------------------------------------


def fork_mask(table: pa.Table, forks_table: pa.Table) -> np.ndarray:
    """True for rows of a removed repository."""
    if forks_table.num_rows == 0 or table.num_rows == 0:
        return np.zeros(table.num_rows, bool)
    hit = pc.is_in(repo_keys(table), value_set=forks_table.column(REPO).combine_chunks())
    return np.asarray(hit.to_numpy(zero_copy_only=False), bool)


def drop_forks(result: MapResult, forks_table: pa.Table, cfg: ForksConfig) -> MapResult:
    """Move the rows of removed repositories from ``result.table`` to its drop log."""
    mask = fork_mask(result.table, forks_table)
    if not mask.any():
        return result
    gone = result.table.filter(pa.array(mask))
    by_repo = {r[REPO]: r for r in forks_table.to_pylist()}
    verdicts = [by_repo[k] for k in repo_keys(gone).to_pylist()]
    dropped = schema.drops_from_rows(
        gone, STAGE, REASON, detail=[v[FORK_OF] for v in verdicts], score=[v[FRAC] for v in verdicts],
        threshold=[cfg.min_shared_frac] * gone.num_rows,
    )
    return MapResult(result.table.filter(pa.array(~mask)), pa.concat_tables([result.dropped, dropped]),
                     result.counters)


def _split(table: pa.Table, part: np.ndarray, n_parts: int) -> dict[int, pa.Table]:
    """Rows of ``table`` by partition number, every partition present (possibly empty)."""
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(n_parts + 1))
    taken = table.take(pa.array(order, pa.int64())) if table.num_rows else table
    return {p: taken.slice(bounds[p], bounds[p + 1] - bounds[p]) for p in range(n_parts)}

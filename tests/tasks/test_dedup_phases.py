"""commit_dedup's phases across shards (keys -> groups -> clusters -> apply) decide as the one-table run."""

from __future__ import annotations

import pyarrow as pa
import pytest
from tasks_repos import fork, fork_repo, project, project_repo

from codecorpus import schema
from codecorpus.tasks import columns as C
from codecorpus.tasks import dedup
from codecorpus.tasks.commits import plan_slices, read_slice_table
from codecorpus.tasks.config import CommitDedupConfig, CommitsConfig

__all__ = ["fork", "fork_repo", "project", "project_repo"]  # fixtures


def run_phases(shards: list[pa.Table], cfg: CommitDedupConfig, buckets: int) -> list:
    """The four phases as the runtime runs them: files routed by partition, then gathered."""
    keys = [dedup.scatter_keys(t, i, cfg, buckets) for i, t in enumerate(shards)]
    groups = [dedup.group_keys(pa.concat_tables([k[b] for k in keys]))[0] for b in range(buckets)]
    decided = dedup.decide_clusters(pa.concat_tables(groups), cfg, len(shards))
    return [dedup.apply_clusters(t, keys[i][buckets], decided[i]) for i, t in enumerate(shards)]


def outcome(table: pa.Table, dropped: pa.Table) -> tuple:
    kept = sorted(zip(*(table.column(c).to_pylist() for c in (schema.ID, C.PATCH_ID, C.DUP_CLUSTER,
                                                                 C.DUP_CLUSTER_SIZE)), strict=True))
    drops = sorted(zip(*(dropped.column(c).to_pylist() for c in (schema.ID, schema.REASON, schema.DUP_OF)),
                       strict=True))  # fmt: skip
    return kept, drops


@pytest.fixture(scope="module")
def sliced(project_repo, fork_repo) -> list[pa.Table]:
    """Both repositories' histories in slices of 5 commits: the cherry-pick and the fork's copies
    of the project's commits sit in other shards than their originals."""
    cfg = CommitsConfig(commits_per_slice=5)
    return [read_slice_table(sl, cfg).table for sl in plan_slices([project_repo, fork_repo], cfg)]


@pytest.mark.parametrize("buckets", [1, 3])
@pytest.mark.parametrize("near", [False, True])
def test_phases_across_shards_equal_the_one_table_run(sliced, buckets, near):
    cfg = CommitDedupConfig(near=near, threshold=0.7)
    results = run_phases(sliced, cfg, buckets)
    whole = dedup.run(pa.concat_tables(sliced), cfg)
    phased = outcome(pa.concat_tables([r.table for r in results]), pa.concat_tables([r.dropped for r in results]))
    assert phased == outcome(whole.table, whole.dropped)
    dropped = sum(r.dropped.num_rows for r in results)
    assert dropped >= 2 and len(sliced) >= 4  # duplicates across shards really were found
    for shard, r in zip(sliced, results, strict=True):
        assert r.table.num_rows + r.dropped.num_rows == shard.num_rows


def test_keys_route_every_key_to_one_bucket_and_keep_own_patch_ids(sliced):
    cfg = CommitDedupConfig()
    parts = dedup.scatter_keys(sliced[0], 0, cfg, 4)
    assert sorted(parts) == [0, 1, 2, 3, 4]
    assert parts[4].column(schema.ID).equals(sliced[0].column(schema.ID))
    for b in range(4):
        assert all(dedup.bucket_of(k, 4) == b for k in parts[b].column(dedup.KEY).to_pylist())

"""One task per change: exact duplicates across repositories dropped before the task files are written.

The candidates read every repository's history whole, so a fork that shares its upstream's
commits, or a cherry-pick of a pull request into another repository or branch, would give the
same task twice. (The edit set's ``commit_dedup`` never sees the changes: it reads single
commits under CommitPackFT's rules.) Two tasks are the same when their ``patch`` and
``test_patch`` are byte for byte the same; the keeper is the one merged first, then by
repository and sha (the original, not the copy), the same on any run. The others are
``duplicate_task`` drops of task_outputs naming the keeper's instance id.

Phases (``tasks/spec.py`` ``output_phases``): :func:`task_keys` per candidates shard ->
:func:`decide` in one job (a key and a few ids per task) -> :func:`split_duplicates` per
shard, before its records are written.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pyarrow as pa

from codecorpus import schema
from codecorpus.tasks import columns as C

STAGE = "task_outputs"
KEY_SCHEMA = pa.schema([
    ("key", pa.string()), ("merged_at", pa.timestamp("s", tz="UTC")), ("repo", pa.string()), ("sha", pa.string()),
    ("instance_id", pa.string()), ("shard", pa.int32()), ("row", pa.int64()),
])  # fmt: skip
DUP_SCHEMA = pa.schema([("row", pa.int64()), ("dup_of", pa.string())])


def task_key(patch: str, test_patch: str) -> str:
    """The identity of a task's change: a hash of its gold patch and its test patch.

    >>> task_key("a", "b") == task_key("a", "b") != task_key("a", "c")
    True
    """
    return hashlib.sha256(f"{patch}\0{test_patch}".encode()).hexdigest()[:32]


def task_keys(table: pa.Table, shard: int) -> dict[int, pa.Table]:
    """One candidates shard -> its keys, all to the one deciding partition."""
    cols = table.select([C.PATCH, C.TEST_PATCH, C.MERGED_AT, schema.REPO, C.SHA, C.INSTANCE_ID]).to_pydict()
    rows = [{"key": task_key(p, t), "merged_at": m, "repo": r, "sha": s, "instance_id": i, "shard": shard, "row": n}
            for n, (p, t, m, r, s, i) in enumerate(zip(*cols.values(), strict=True))]  # fmt: skip
    return {0: pa.Table.from_pylist(rows, schema=KEY_SCHEMA)}


def decide(keys: pa.Table, n_shards: int) -> dict[int, pa.Table]:
    """Every shard's duplicates (row, keeper's instance id), one table per shard (empty when none)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for k in keys.to_pylist():
        groups.setdefault(k["key"], []).append(k)
    out: dict[int, list[dict[str, Any]]] = {s: [] for s in range(n_shards)}
    for members in groups.values():
        if len(members) < 2:
            continue
        keeper, *copies = sorted(members, key=lambda m: (m["merged_at"], m["repo"], m["sha"]))
        for m in copies:
            out[m["shard"]].append({"row": m["row"], "dup_of": keeper["instance_id"]})
    return {s: pa.Table.from_pylist(sorted(rows, key=lambda r: r["row"]), schema=DUP_SCHEMA) for s, rows in out.items()}


def split_duplicates(table: pa.Table, dups: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(the shard's tasks without its duplicates, their drop rows)."""
    rows = dups.column("row").to_pylist()
    if not rows:
        return table, schema.drops_from_rows(table.slice(0, 0), STAGE, "duplicate_task")
    drop = set(rows)
    kept = table.take(pa.array([i for i in range(table.num_rows) if i not in drop], pa.int64()))
    dropped = schema.drops_from_rows(table.take(pa.array(rows, pa.int64())), STAGE, "duplicate_task",
                                     dup_of=dups.column("dup_of").to_pylist())  # fmt: skip
    return kept, dropped

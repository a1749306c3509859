"""The tasks of an RL manifest as sessions take them: record, environment spec, repository.

A task's repository is found through the run's ``env_verify`` rows (each names the git
directory of its environment's version); a snapshot another node of an S3 run made is
cloned from its published bundle (``repos.repository_of``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from codecorpus import schema
from codecorpus.envs.config import ENV_CACHE_DIR
from codecorpus.envs.repos import repository_of
from codecorpus.envs.session import TaskEntry
from codecorpus.storage import mirror as store


def tasks_of(manifest: Path) -> dict[str, TaskEntry]:
    """Every task of an RL manifest by instance id, with its spec and its repository on this
    node (the ``env_verify`` rows name each environment's git directory; a snapshot an S3
    run's other node made is cloned from its bundle)."""
    manifest = store.ensure_local(manifest)  # an S3 run: this node's copy, fetched
    root = manifest.parent
    m = json.loads(manifest.read_text())
    gitdirs = {}
    for part in store.list_files(schema.RunPaths(root).stage_dir("env_verify"), "part-*.parquet", fetch=True):
        for row in pq.read_table(part, columns=["env_file", "git_dir"]).to_pylist():
            gitdirs[row["env_file"]] = row
    entries = {}
    for line in store.ensure_local(root / m["tasks"]["path"]).read_text().splitlines():
        task = json.loads(line)
        spec = json.loads(store.ensure_local(root / task["environment"]).read_text())
        row = gitdirs.get(Path(task["environment"]).name)
        if row is None:
            raise ValueError(f"{manifest}: no env_verify row names {task['environment']}: the run "
                             "directory lacks its env_verify stage outputs")
        entries[task["instance_id"]] = TaskEntry(task, spec, repository_of(row))
    return entries


def run_cache_dir(manifest: Path) -> str:
    """The run's environment cache on this node, the default ``SessionConfig.cache_dir``."""
    return str(store.node_path(Path(manifest).parent) / ENV_CACHE_DIR)

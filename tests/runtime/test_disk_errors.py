"""A run directory that cannot be written, or fills up, stops the run with a clear error.

Root ignores file permissions, so "unwritable" is a read-only tmpfs mount (and a
path under a regular file); "disk full" is a 96 KiB tmpfs. The mount tests skip
where this machine does not allow mounts.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from codecorpus.config import load_recipe_data
from codecorpus.runtime.executor import Executor, PipelineError
from conftest import write_repos


def _recipe(corpus: Path) -> dict:
    return {
        "sources": [{"type": "local", "name": "fixture", "path": str(corpus)}],
        "stages": {"ingest": {"shard_bytes": 300}, "langid": {}, "filters": {}, "tokenize": {}, "pack": {}},
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [{"name": "short", "seq_len": 64}],
    }


@pytest.fixture
def tmpfs(tmp_path):
    mounted: list[Path] = []

    def mount(options: str) -> Path:
        where = tmp_path / f"mnt{len(mounted)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_run_dir_under_a_file_fails_before_any_work(tmp_path, ray_local):
    corpus = write_repos(tmp_path / "corpus")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(PipelineError, match=r"cannot write .*afile/run/recipe.yaml: Not a directory"):
        Executor(load_recipe_data(_recipe(corpus)), tmp_path / "afile" / "run", quiet=True).run_pipeline()


def test_read_only_run_dir(tmp_path, tmpfs, ray_local):
    corpus = write_repos(tmp_path / "corpus")
    ro = tmpfs("ro,size=1m")
    with pytest.raises(PipelineError, match="Read-only file system"):
        Executor(load_recipe_data(_recipe(corpus)), ro / "run", quiet=True).run_pipeline()


def test_disk_full_stops_with_the_failing_file_and_leaves_no_partial_file(tmp_path, tmpfs, ray_local):
    corpus = write_repos(tmp_path / "corpus")
    for i in range(30):  # enough text that the parquet parts overflow 96 KiB
        (corpus / "repo-b" / f"gen{i}.py").write_text("".join(f"value_{i}_{j} = {j}\n" for j in range(400)))
    small = tmpfs("size=96k")
    with pytest.raises(PipelineError, match=r"cannot write .*: No space left on device\. Free space"):
        Executor(load_recipe_data(_recipe(corpus)), small / "run", quiet=True).run_pipeline()
    assert not list(small.rglob(".*.tmp"))
    for part in small.rglob("*.parquet"):
        pq.read_metadata(part)  # every file under a final name is complete

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from codecorpus import schema
from codecorpus.config import IngestConfig, LocalSource, PythonEnvSource, RecipeError
from codecorpus.ingest.plan import cut_into_shards, plan_shards
from codecorpus.ingest.read import read_shard
from codecorpus.ingest.repometa import FORKS
from conftest import MAIN_PY, write_repos


def _ingest(root: Path, **cfg):
    shards = plan_shards([LocalSource(type="local", name="t", path=str(root))], IngestConfig(**cfg))
    results = [read_shard(s) for s in shards]
    return shards, results


def test_local_repos_rows_and_drop_reasons(tmp_path):
    shards, results = _ingest(write_repos(tmp_path))
    refs = [r for s in shards for r in s]
    rows = sum(r.table.num_rows for r in results)
    drops = Counter(x for r in results for x in r.dropped.column(schema.REASON).to_pylist())
    assert len(refs) == 13
    skipped = Counter(x for r in results for x in r.skipped.column(schema.REASON).to_pylist())
    assert drops == {"binary": 1, "undecodable": 1, "empty": 1}
    assert skipped == {"skipped_dir": 1}  # .git: an entry, not a dropped document
    assert rows + sum(drops.values()) + sum(skipped.values()) == len(refs)
    table = results[0].table
    assert table.select(schema.DOC_SCHEMA.names).schema == schema.DOC_SCHEMA
    extra = {schema.LICENSE_METHOD, schema.STARS, FORKS, schema.LAST_COMMIT}
    assert set(table.column_names) - set(schema.DOC_SCHEMA.names) == extra
    by_path = {(r, p): t for r, p, t in zip(table["repo"].to_pylist(), table["path"].to_pylist(), table["text"].to_pylist(), strict=True)}
    assert by_path[("repo-a", "main.py")] == MAIN_PY
    assert ("repo-a", "src/util.js") in by_path
    assert not any(p.startswith(".git/") for _, p in by_path)


def test_ids_are_stable_and_hashes_match(tmp_path):
    write_repos(tmp_path)
    _, first = _ingest(tmp_path)
    _, second = _ingest(tmp_path)
    assert first[0].table.column("id").to_pylist() == second[0].table.column("id").to_pylist()
    t = first[0].table
    for text, h, n in zip(t["text"].to_pylist(), t["content_hash"].to_pylist(), t["bytes"].to_pylist(), strict=True):
        assert schema.content_hash(text.encode()) == h
        assert len(text.encode()) == n


def test_size_cap_and_symlink(tmp_path):
    write_repos(tmp_path)
    (tmp_path / "repo-b" / "big.py").write_text("x = 1\n" * 1000)
    (tmp_path / "repo-b" / "link.py").symlink_to(tmp_path / "repo-a" / "main.py")
    _, results = _ingest(tmp_path, max_file_bytes=3000)
    drops = Counter(x for r in results for x in r.dropped.column(schema.REASON).to_pylist())
    skipped = Counter(x for r in results for x in r.skipped.column(schema.REASON).to_pylist())
    assert drops["too_large"] == 1
    assert skipped["symlink"] == 1 and "symlink" not in drops


def test_unreadable_file_is_dropped_not_raised(tmp_path):
    write_repos(tmp_path)
    shards, _ = _ingest(tmp_path)
    ref = next(r for r in shards[0] if r.path == "main.py")
    Path(ref.abspath).unlink()
    result = read_shard(shards[0])
    assert "missing" in result.dropped.column(schema.REASON).to_pylist()


def test_single_repo_layout(tmp_path):
    write_repos(tmp_path)
    shards = plan_shards([LocalSource(type="local", name="t", path=str(tmp_path / "repo-b"))], IngestConfig())
    assert {r.repo for s in shards for r in s} == {"repo-b"}


def test_shards_are_cut_by_bytes_in_order(tmp_path):
    write_repos(tmp_path)
    shards = plan_shards([LocalSource(type="local", name="t", path=str(tmp_path))], IngestConfig(shard_bytes=200))
    assert len(shards) > 3
    flat = [(r.repo, r.path) for s in shards for r in s]
    assert flat == sorted(flat)
    assert cut_into_shards([], 10) == [[]]


def test_missing_source_dir_is_a_recipe_error(tmp_path):
    with pytest.raises(RecipeError, match="not a directory"):
        plan_shards([LocalSource(type="local", name="t", path=str(tmp_path / "nope"))], IngestConfig())


def test_python_env_source_lists_stdlib_and_distributions():
    src = PythonEnvSource(type="python-env", name="env", distributions=("pyyaml",), stdlib_tests=False)
    shards = plan_shards([src], IngestConfig(shard_bytes=10**12))
    refs = shards[0]
    repos = {r.repo for r in refs}
    assert repos == {"python-stdlib", "PyYAML"}
    paths = {r.path for r in refs if r.repo == "python-stdlib"}
    assert "json/__init__.py" in paths
    assert not any(p.startswith(("site-packages/", "test/")) for p in paths)
    assert any(r.path == "yaml/__init__.py" for r in refs if r.repo == "PyYAML")
    with pytest.raises(RecipeError, match="not installed"):
        plan_shards([PythonEnvSource(type="python-env", distributions=("no-such-dist-xyz",))], IngestConfig())

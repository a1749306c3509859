"""Every source type loads from a recipe, and the ingest task's stats obey the conservation law
when units expand (archives, JSONL) inside the task."""

from __future__ import annotations

import functools
import io
import json
import tarfile
from pathlib import Path

import pytest

from codecorpus import schema
from codecorpus.config import RecipeError, load_recipe_data, recipe_to_yaml
from codecorpus.ingest.plan import document_bytes, plan_shards
from codecorpus.ingest.read import read_shard
from codecorpus.pipeline import bodies
from conftest import write_repos


def _recipe(sources: list[dict]) -> dict:
    return {"sources": sources, "stages": {"ingest": {"shard_bytes": 10_000_000}, "langid": {}}}


def test_every_source_type_validates_and_secrets_are_not_written():
    recipe = load_recipe_data(_recipe([
        {"type": "local", "name": "l", "path": "/tmp/x", "metadata": "/tmp/meta.jsonl"},
        {"type": "git", "name": "g", "path": "https://example.com/r.git", "revision": "v1.0"},
        {"type": "archive", "name": "a", "path": "/tmp/a.tar.zst", "layout": "repos"},
        {"type": "s3", "name": "s", "url": "s3://bucket/prefix",
         "s3": {"endpoint_url": "http://127.0.0.1:1", "access_key_id": "AKIA-SECRET-ID",
                "secret_access_key": "very-secret"}},
        {"type": "parquet", "name": "p", "path": "/tmp/stack", "columns": {"license": "license"}},
        {"type": "jsonl", "name": "j", "path": "/tmp/x.jsonl.zst"},
        {"type": "hf", "name": "h", "path": "/tmp/ds"},
        {"type": "docs", "name": "d", "path": "/tmp/docs"},
    ]))
    assert [s.type for s in recipe.sources] == ["local", "git", "archive", "s3", "parquet", "jsonl", "hf", "docs"]
    text = recipe_to_yaml(recipe)
    assert "very-secret" not in text and "AKIA-SECRET-ID" not in text


def test_bad_source_keys_name_the_key():
    with pytest.raises(RecipeError, match=r"sources\.0\.url: "):
        load_recipe_data(_recipe([{"type": "s3", "name": "s", "url": "http://not-s3"}]))
    with pytest.raises(RecipeError, match="colums"):
        load_recipe_data(_recipe([{"type": "parquet", "name": "p", "path": "/x", "colums": {}}]))


def test_ingest_task_counts_expanded_units(tmp_path: Path):
    write_repos(tmp_path / "repos")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in [("a.py", b"x = 1\n"), ("/abs.py", b"y = 2\n"), ("b.py", b"z = 3\n")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tmp_path / "arch").mkdir()
    (tmp_path / "arch" / "r.tar.gz").write_bytes(buf.getvalue())
    (tmp_path / "d.jsonl").write_text(json.dumps({"content": "print(1)\n", "path": "p.py"}) + "\nnot json\n")
    recipe = load_recipe_data(_recipe([
        {"type": "local", "name": "l", "path": str(tmp_path / "repos")},
        {"type": "archive", "name": "a", "path": str(tmp_path / "arch")},
        {"type": "jsonl", "name": "j", "path": str(tmp_path / "d.jsonl")},
    ]))
    shards = plan_shards(recipe.sources, recipe.stages.ingest)
    assert len(shards) == 1 and len(shards[0]) == 13 + 1 + 1
    run = schema.RunPaths(tmp_path / "run")
    ctx = bodies.JobContext(run, "ingest", "h")
    read = functools.partial(read_shard, shards[0], recipe.stages.ingest)
    stats = bodies.ingest_job(ctx, 0, read, document_bytes(shards[0]), 15)
    assert stats["rows_in"] == 12 + 3 + 2 and stats["skipped_entries"] == {"skipped_dir": 1}  # .git is no document
    assert stats["rows_in"] == stats["rows_out"] + sum(stats["dropped"].values())
    assert stats["bytes_in"] + stats["bytes_changed"] == stats["bytes_out"] + stats["bytes_dropped"]
    assert stats["dropped"]["unsafe_path"] == 1 and stats["dropped"]["bad_json"] == 1
    assert schema.EXPANDED_ROWS not in stats.get("counters", {})

"""A run whose inputs and run directory are s3:// URLs, against a real SeaweedFS on 127.0.0.1.

The runs are real ``python -m codecorpus run`` processes (their Ray workers
inherit the run store), with credentials in the usual AWS variables only.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import yaml

from codecorpus import schema
from conftest import NONDETERMINISTIC, make_bucket, run_outputs, s3_client, write_repos


def _upload_tree(client, root: Path, bucket: str, prefix: str) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(root).as_posix()}")


def _env(s3: dict, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CODECORPUS_"))}
    env.update(
        AWS_ACCESS_KEY_ID=s3["access_key_id"], AWS_SECRET_ACCESS_KEY=s3["secret_access_key"],
        AWS_ENDPOINT_URL=s3["endpoint_url"], AWS_DEFAULT_REGION="us-east-1", CODECORPUS_CACHE_DIR=str(cache),
    )
    return env


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codecorpus", *args], env=env, capture_output=True, text=True, timeout=600)


def _bucket_outputs(client, bucket: str, prefix: str) -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix) + 1 :]
            parts = rel.split("/")
            if "_done" in parts or "report" in parts or parts[-1] in NONDETERMINISTIC:
                continue
            out[rel] = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    return out


def test_s3_inputs_and_run_dir_give_the_local_bytes(tmp_path, s3_server):
    client = make_bucket(s3_server, "s3run-corpus")
    make_bucket(s3_server, "s3run-runs")
    _upload_tree(client, write_repos(tmp_path / "corpus"), "s3run-corpus", "repos")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({
        "sources": [{"type": "s3", "name": "fixture", "url": "s3://s3run-corpus/repos/",
                     "s3": {"endpoint_url": s3_server["endpoint_url"]}}],
        "stages": {"ingest": {"shard_bytes": 300}, "langid": {}, "filters": {}, "dedup": {"buckets": 4},
                   "tokenize": {}, "pack": {}},
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [{"name": "short", "seq_len": 64}],
    }))
    env = _env(s3_server, tmp_path / "cache")
    local = tmp_path / "local-run"
    done = _cli(["run", str(recipe), "--out", str(local), "--workers", "2", "--quiet"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    remote = _cli(["run", str(recipe), "--out", "s3://s3run-runs/r1", "--workers", "2", "--quiet"], env)
    assert remote.returncode == 0, remote.stderr[-3000:]

    expected, got = run_outputs(local), _bucket_outputs(s3_client(s3_server), "s3run-runs", "r1")
    assert sorted(expected) == sorted(got)
    assert [k for k in expected if expected[k] != got[k]] == []
    assert s3_server["secret_access_key"] not in remote.stdout + remote.stderr

    # another machine: an empty mirror; verify fetches the shards, a rerun resumes from S3 markers
    fresh = _env(s3_server, tmp_path / "other-node-cache")
    verified = _cli(["manifest", "verify", "s3://s3run-runs/r1"], fresh)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    funnel = client.get_object(Bucket="s3run-runs", Key="r1/report/funnel.csv")["Body"].read()
    again = _cli(["run", str(recipe), "--out", "s3://s3run-runs/r1", "--workers", "2", "--quiet"], fresh)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = re.search(r"resumed: (\d+) of (\d+) shards", again.stderr)
    assert resumed and resumed[1] == resumed[2], again.stderr[-3000:]  # every task skipped on its S3 marker
    report = [p.read_bytes() for p in (tmp_path / "other-node-cache").glob("*/report/funnel.csv")]
    assert report == [funnel]  # the rerun's report read the whole run from the bucket
    after = _bucket_outputs(s3_client(s3_server), "s3run-runs", "r1")
    assert after == got


def test_listings_of_an_s3_run_are_the_buckets_and_each_node_has_its_own_mirror(tmp_path, s3_server, monkeypatch):
    """``list_files`` lists the bucket (what every node wrote), not this node's mirror; paths the
    driver names are rebased onto this node's mirror; ``exists`` fetches what it finds."""
    from codecorpus.storage import mirror as store
    from codecorpus.storage.atomic import atomic_write_bytes

    client = make_bucket(s3_server, "s3run-listing")
    for key, value in _env(s3_server, tmp_path / "driver-cache").items():
        monkeypatch.setenv(key, value)
    driver = Path(store.activate("s3://s3run-listing/run").local_root)
    try:
        atomic_write_bytes(driver / "a" / "_stats.json", b"{}")
        atomic_write_bytes(driver / "a" / "part-00000.parquet", b"p0")
        client.put_object(Bucket="s3run-listing", Key="run/a/part-00001.parquet", Body=b"p1")  # another node's
        client.put_object(Bucket="s3run-listing", Key="run/b/_stats.json", Body=b"{}")
        client.put_object(Bucket="s3run-listing", Key="run/ab/part-00009.parquet", Body=b"x")  # not under a/
        (driver / "a" / "part-00002.parquet").write_bytes(b"stale")  # in the mirror only: removed elsewhere

        assert store.list_files(driver / "a", "part-*.parquet") == [driver / "a" / "part-00000.parquet",
                                                                     driver / "a" / "part-00001.parquet"]
        assert store.list_files(driver, "*/_stats.json") == [driver / "a" / "_stats.json", driver / "b" / "_stats.json"]
        for i in range(30):  # a stage's many parts: a listing of one level down never returns them
            client.put_object(Bucket="s3run-listing", Key=f"run/b/deep/part-{i:05d}.parquet", Body=b"")
        listed = []
        handler = lambda parsed, **_: listed.extend(o["Key"] for o in parsed.get("Contents", []))  # noqa: E731
        store._client().meta.events.register("after-call.s3.ListObjectsV2", handler)
        try:
            assert len(store.list_files(driver, "*/_stats.json")) == 2
        finally:
            store._client().meta.events.unregister("after-call.s3.ListObjectsV2", handler)
        assert listed and not [k for k in listed if "/deep/" in k]
        assert store.list_files(driver / "c", "*") == []
        assert not (driver / "b" / "_stats.json").exists()
        assert [p.read_bytes() for p in store.list_files(driver, "*/_stats.json", fetch=True)] == [b"{}", b"{}"]
        assert store.exists(driver / "a" / "part-00001.parquet") and not store.exists(driver / "a" / "nothing")

        # a worker whose node keeps its mirror elsewhere: the driver's paths name its own files
        monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / "worker-cache"))
        store._active.cache_clear()
        worker = store.mirror_root("s3://s3run-listing/run")
        assert store.node_path(driver / "a" / "x") == worker / "a" / "x"
        assert store.node_path(tmp_path / "input.txt") == tmp_path / "input.txt"
        assert pickle.loads(pickle.dumps(schema.RunPaths(driver))).part("a", 0) == worker / "a" / "part-00000.parquet"
        assert store.ensure_local(driver / "a" / "part-00001.parquet").read_bytes() == b"p1"
        assert (worker / "a" / "part-00001.parquet").is_file()
        atomic_write_bytes(driver / "w" / "out.bin", b"w")  # lands in the worker's mirror, then the bucket
        assert (worker / "w" / "out.bin").read_bytes() == b"w" and not (driver / "w").exists()
        assert client.get_object(Bucket="s3run-listing", Key="run/w/out.bin")["Body"].read() == b"w"
        assert store.list_files(driver / "a", "part-*.parquet")[0] == worker / "a" / "part-00000.parquet"
    finally:
        store.deactivate()


def test_a_mirror_copy_is_read_only_while_it_is_the_buckets_version(tmp_path, s3_server, monkeypatch):
    """Node B keeps a copy of a file; a rerun elsewhere rewrites it, then a reset removes another:
    B reads the new bytes, never its old copy, and drops the removed file's copy, while a file
    B never published (its own working file) stays."""
    from codecorpus.storage import mirror as store
    from codecorpus.storage.atomic import atomic_write_bytes

    make_bucket(s3_server, "s3run-fresh")
    for key, value in _env(s3_server, tmp_path / "a-cache").items():
        monkeypatch.setenv(key, value)

    def on_node(name: str) -> Path:
        monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / f"{name}-cache"))
        return Path(store.activate("s3://s3run-fresh/run").local_root)

    try:
        a = on_node("a")
        atomic_write_bytes(a / "filters" / "part-00000.parquet", b"version 1")
        atomic_write_bytes(a / "filters" / "part-00001.parquet", b"only in the first run")
        b = on_node("b")
        assert store.ensure_local(b / "filters" / "part-00000.parquet").read_bytes() == b"version 1"
        assert [p.name for p in store.list_files(b / "filters", "part-*", fetch=True)] == [
            "part-00000.parquet", "part-00001.parquet"]
        (b / "work").mkdir()
        (b / "work" / "scratch.txt").write_bytes(b"node-local")

        a = on_node("a")  # a changed recipe: the stage is reset and redone, with one shard fewer
        store.remove_tree(a / "filters")
        atomic_write_bytes(a / "filters" / "part-00000.parquet", b"version 2")

        b = on_node("b")
        assert (b / "filters" / "part-00001.parquet").is_file()  # B's old copies are still on disk
        assert store.ensure_local(b / "filters" / "part-00000.parquet").read_bytes() == b"version 2"
        assert not store.exists(b / "filters" / "part-00001.parquet")
        assert not (b / "filters" / "part-00001.parquet").exists()
        assert store.list_files(b / "filters", "part-*", fetch=True) == [b / "filters" / "part-00000.parquet"]
        assert store.exists(b / "work" / "scratch.txt")
        assert store.ensure_local(b / "work" / "scratch.txt").read_bytes() == b"node-local"

        big = os.urandom(store._SINGLE_PUT_BYTES + 1)  # a multipart upload: its version noted by a HEAD
        atomic_write_bytes(b / "shards" / "big.bin", big)
        a = on_node("a")
        assert store.ensure_local(a / "shards" / "big.bin").read_bytes() == big
        atomic_write_bytes(a / "shards" / "big.bin", big[::-1])
        b = on_node("b")
        assert store.ensure_local(b / "shards" / "big.bin").read_bytes() == big[::-1]
    finally:
        store.deactivate()

"""Two Ray nodes that share nothing but an S3 bucket (SeaweedFS on 127.0.0.1) give the local run's bytes.

Each node's raylet starts with its own ``CODECORPUS_CACHE_DIR``, so its workers keep
their own mirror of the run and the driver a third one: a task on one node can only
find what another node wrote by asking the bucket. ``manifest verify`` and ``report``
then run in fresh processes with an empty mirror and read everything from the bucket.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codecorpus.config import load_recipe_data
from codecorpus.reports.build import write_report
from codecorpus.runtime.executor import Executor, init_ray
from codecorpus.storage import mirror as store
from conftest import NONDETERMINISTIC, fixture_recipe, make_bucket, run_outputs, write_repos

BUCKET, PREFIX = "cluster-runs", "nofs/r1"


def _aws_env(s3: dict) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": s3["access_key_id"], "AWS_SECRET_ACCESS_KEY": s3["secret_access_key"],
            "AWS_ENDPOINT_URL": s3["endpoint_url"], "AWS_DEFAULT_REGION": "us-east-1"}


def _bucket_files(client, prefix: str) -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            out[obj["Key"][len(prefix) + 1 :]] = client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
    return out


def _outputs(files: dict[str, bytes]) -> dict[str, bytes]:
    """The deterministic outputs of a run (``conftest.run_outputs``'s selection) from a bucket listing."""
    def kept(rel: str) -> bool:
        parts = rel.split("/")
        return "_done" not in parts and parts[0] != "report" and parts[-1] not in NONDETERMINISTIC
    return {rel: data for rel, data in files.items() if kept(rel)}


def _report_tables(files: dict[str, bytes]) -> dict[str, bytes]:
    return {rel: data for rel, data in files.items() if rel.startswith("report/") and rel.endswith((".csv", ".parquet"))}


def _stage_files(mirror: Path) -> set[str]:
    """The stage outputs and work files in one mirror (written by that node's tasks, or fetched for them)."""
    return {p.relative_to(mirror).as_posix() for p in mirror.rglob("*.parquet") if "shards" not in p.parts}


def _cli(args: list[str], s3: dict, cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CODECORPUS_"))}
    env.update(_aws_env(s3), CODECORPUS_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "codecorpus", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def _cluster_run(recipe, s3: dict, mirrors: dict[str, Path], monkeypatch):
    """The recipe on a head and a worker node, each with its own mirror, into the bucket."""
    import ray
    from ray.cluster_utils import Cluster

    for key, value in _aws_env(s3).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(store.CACHE_ENV, str(mirrors["head"]))  # raylets (and their workers) inherit it
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        monkeypatch.setenv(store.CACHE_ENV, str(mirrors["worker"]))
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        monkeypatch.setenv(store.CACHE_ENV, str(mirrors["driver"]))
        run_dir = Path(store.activate(f"s3://{BUCKET}/{PREFIX}").local_root)
        init_ray(None, cluster.address)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        return Executor(recipe, run_dir, quiet=True).run_pipeline()
    finally:
        store.deactivate()
        ray.shutdown()
        cluster.shutdown()


def test_cluster_without_shared_fs_gives_the_local_bytes(tmp_path, s3_server, monkeypatch):
    import ray

    client = make_bucket(s3_server, BUCKET)
    recipe = load_recipe_data(fixture_recipe(write_repos(tmp_path / "corpus")))
    local = tmp_path / "local"
    init_ray(2, None)
    Executor(recipe, local, quiet=True).run_pipeline()
    write_report(local)
    ray.shutdown()

    mirrors = {name: tmp_path / f"cache-{name}" for name in ("driver", "head", "worker")}
    result = _cluster_run(recipe, s3_server, mirrors, monkeypatch)

    assert [s.stats["nodes"] for s in result.stages] == [2] * len(result.stages)  # every stage used both nodes
    head, worker, driver = (_stage_files(mirrors[n]) for n in ("head", "worker", "driver"))
    assert driver == set()  # the driver writes and reads no stage file: every one is a task's
    assert head & worker  # files one node's tasks wrote and the other's read, through the bucket alone
    expected, got = run_outputs(local), _outputs(_bucket_files(client, PREFIX))
    assert sorted(got) == sorted(expected)
    assert [k for k in expected if expected[k] != got[k]] == []

    fresh = tmp_path / "cache-fresh"  # another machine: nothing of the run on its disk
    verified = _cli(["manifest", "verify", f"s3://{BUCKET}/{PREFIX}"], s3_server, fresh)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    reported = _cli(["report", f"s3://{BUCKET}/{PREFIX}"], s3_server, tmp_path / "cache-report")
    assert reported.returncode == 0, reported.stdout + reported.stderr

    local_tables = {f"report/{p.name}": p.read_bytes() for p in (local / "report").iterdir()
                    if p.suffix in (".csv", ".parquet")}
    s3_tables = _report_tables(_bucket_files(client, PREFIX))
    assert len(local_tables) > 10
    assert sorted(s3_tables) == sorted(local_tables)
    assert [k for k in local_tables if local_tables[k] != s3_tables[k]] == []


@pytest.fixture(autouse=True)
def _restore_local_ray():
    yield
    store.deactivate()
    init_ray(2, None)

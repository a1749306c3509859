"""The session pool on a two-node ``ray.cluster_utils.Cluster`` that shares nothing but an S3
bucket (SeaweedFS on 127.0.0.1): sessions placed by the slots each node declares, each node
opening them from its own mirror of the run (manifest, spec, tasks and the repository's
snapshot bundle fetched from the bucket) and its own install of the environment, made once."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs"))
from envs_helpers import FIXED, LIB, PATCH, UNITTESTS
from rollout_helpers import verified_task

from codecorpus import schema
from codecorpus.envs import env_spec, repos, verify
from codecorpus.envs import sandbox as sb
from codecorpus.envs.config import ENV_CACHE_DIR, ENVS_DIR, VERIFIED_TASKS
from codecorpus.manifests import rl
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import atomic_write_bytes
from conftest import make_bucket

NO_SANDBOX = sb.available()
pytestmark = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"no sandbox: {NO_SANDBOX}")
BUCKET = "pool-runs"
URL = f"s3://{BUCKET}/envs"


def _aws(s3: dict) -> dict[str, str]:
    return {"AWS_ACCESS_KEY_ID": s3["access_key_id"], "AWS_SECRET_ACCESS_KEY": s3["secret_access_key"],
            "AWS_ENDPOINT_URL": s3["endpoint_url"], "AWS_DEFAULT_REGION": "us-east-1"}


def _publish_run(root: Path, tmp: Path) -> tuple[Path, str]:
    """The planted task as an environments run in the bucket: its repository as a snapshot
    with its bundle, the spec, the env_verify row, the verified tasks and the RL manifest."""
    folder = tmp / "calc"
    (folder / "tests").mkdir(parents=True)
    (folder / "calc.py").write_text(LIB)
    (folder / "tests" / "test_calc.py").write_text(UNITTESTS)
    snap = repos.publish_snapshot(folder, schema.RunPaths(root).snapshot("env_discover", "calc"))
    base = verify.run_git(snap, "rev-parse", "HEAD").stdout.decode().strip()
    entry = verified_task(snap, base, tmp / "verify-cache")  # the driver's scratch: no node sees it
    spec_path = env_spec.write_spec(entry.spec, root / ENVS_DIR)
    sink = io.BytesIO()
    pq.write_table(pa.table({"env_file": [spec_path.name], "git_dir": [str(store.origin_path(snap))]}), sink)
    atomic_write_bytes(root / "env_verify" / "part-00000.parquet", sink.getvalue())
    task = {**entry.task, "environment": f"{ENVS_DIR}/{spec_path.name}"}
    atomic_write_bytes(root / VERIFIED_TASKS, (json.dumps(task, sort_keys=True) + "\n").encode())
    rl.write_manifest(root, rl.build_manifest(root, ENVS_DIR, VERIFIED_TASKS))
    return root / rl.MANIFEST_NAME, entry.spec["cache_key"]


@pytest.fixture(autouse=True)
def _restore_local_ray():
    """The test leaves the session's local Ray for a cluster: the tests after it that share
    that Ray (``ray_local``) find it running again."""
    import ray

    from codecorpus.runtime.session import init_ray

    was_running = ray.is_initialized()
    yield
    if was_running and not ray.is_initialized():
        init_ray(2, None)


def test_pool_places_sessions_by_node_capacity_without_a_shared_fs(s3_server, tmp_path, monkeypatch):
    import ray
    from ray.cluster_utils import Cluster

    from codecorpus.runtime.pool import SLOT, SessionPool
    from codecorpus.runtime.session import init_ray

    make_bucket(s3_server, BUCKET)
    for key, value in _aws(s3_server).items():
        monkeypatch.setenv(key, value)
    caches = {n: tmp_path / f"cache-{n}" for n in ("driver", "head", "worker")}
    monkeypatch.setenv(store.CACHE_ENV, str(caches["driver"]))
    root = Path(store.activate(URL).local_root)
    try:
        manifest, key = _publish_run(root, tmp_path)
        if ray.is_initialized():
            ray.shutdown()
        monkeypatch.setenv(store.CACHE_ENV, str(caches["head"]))  # the raylets inherit it
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {SLOT: 1}})
        try:
            monkeypatch.setenv(store.CACHE_ENV, str(caches["worker"]))
            cluster.add_node(num_cpus=1, resources={SLOT: 2})
            cluster.wait_for_nodes()
            monkeypatch.setenv(store.CACHE_ENV, str(caches["driver"]))
            init_ray(None, cluster.address)
            pool = SessionPool(str(manifest), {"command_limits": {"wall_seconds": 60}})
            assert pool.capacity() == 3
            sessions = pool.open("example__calc-1", 3)
            assert sorted(pool.placement().values()) == [1, 2]
            with pytest.raises(ValueError, match="slots free"):
                pool.open("example__calc-1", 1)
            outs = ray.get([s.run.remote("python -c 'import calc; print(calc.add(2, 3))'") for s in sessions])
            assert [o.output for o in outs] == ["-1\n"] * 3, outs
            ray.get(sessions[0].write_file.remote("calc.py", FIXED))
            gold, empty = ray.get([sessions[0].evaluate.remote(), sessions[1].evaluate.remote()])
            assert gold["resolved"] and gold["reward"] == 1.0, gold
            assert not empty["resolved"]
            assert ray.get(sessions[2].evaluate.remote(PATCH))["resolved"]
            assert ray.get(sessions[1].read_file.remote("calc.py")) == LIB  # nothing shared
            pool.close()
            ray.shutdown()
        finally:
            cluster.shutdown()
    finally:
        store.deactivate()
    mirror = store.mirror_root(URL).name
    for node in ("head", "worker"):  # each node: the run through the bucket, its own install, once
        run = caches[node] / mirror
        assert (run / ENV_CACHE_DIR / key / ".complete.json").is_file(), node
        assert sorted(p.name for p in (run / ENV_CACHE_DIR).iterdir()) == [f".{key}.lock", key]
        assert repos.snapshot_bundle(run / "env_discover" / "repos" / "calc").is_file()
        assert (run / "manifest.json").is_file()
    assert not (caches["driver"] / mirror / ENV_CACHE_DIR).exists()

"""Two Ray nodes that share nothing but an S3 bucket (SeaweedFS on 127.0.0.1) give the local run's bytes.

Each node's raylet starts with its own ``CODECORPUS_CACHE_DIR``, so its workers keep
their own mirror of the run and the driver a third one: a task on one node can only
find what another node wrote by asking the bucket. Two pipelines run on one such
cluster, each into its own prefix, and each also on a local Ray as the reference:
pretraining over ``write_repos``, and repository tasks over two small git-made
histories (commits, filters, dedup, task candidates, the edit set rendered with the
SFT render stage and packed by the SFT pack body, the task files, the run manifest).
``manifest verify`` and ``report`` then run in fresh processes with an empty mirror
and read everything from the bucket.

The environment stages run their repositories' tests in the sandbox, which a cluster run
and its local reference would do twice over; their job bodies are called here on three
mirrors in turn (three nodes' worth, no Ray), each node's disk gone before the next starts.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codecorpus import schema
from codecorpus.config import Recipe, load_recipe_data
from codecorpus.envs import bodies as envs
from codecorpus.envs import repos
from codecorpus.envs import sandbox as sb
from codecorpus.envs.config import VERIFIED_TASKS
from codecorpus.pipeline import bodies
from codecorpus.pipeline.spec import PLAN_INLINE_ENV
from codecorpus.reports.build import write_report
from codecorpus.runtime.executor import Executor, RunResult, init_ray
from codecorpus.runtime.remote import WARM_MODULES, _warm
from codecorpus.storage import mirror as store
from conftest import (
    NONDETERMINISTIC,
    fixture_recipe,
    make_bucket,
    run_git,
    run_outputs,
    s3_client,
    write_repos,
)

BUCKET = "cluster-runs"
NODES = ("driver", "head", "worker")
EXAMPLES = Path(__file__).resolve().parents[2] / "pipelines" / "data"
NO_SANDBOX = sb.available()

CALC = "def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a / b\n"
CALC_TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"


def _aws_env(s3: dict) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": s3["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": s3["secret_access_key"],
        "AWS_ENDPOINT_URL": s3["endpoint_url"],
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def _bucket_files(client, prefix: str) -> dict[str, bytes]:
    out = {}
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
    for page in pages:
        for obj in page.get("Contents", []):
            body = client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"]
            out[obj["Key"][len(prefix) + 1 :]] = body.read()
    return out


def _outputs(files: dict[str, bytes]) -> dict[str, bytes]:
    """The deterministic outputs of a run (``conftest.run_outputs``'s selection) from a bucket listing."""

    def kept(rel: str) -> bool:
        parts = rel.split("/")
        return "_done" not in parts and parts[0] != "report" and parts[-1] not in NONDETERMINISTIC

    return {rel: data for rel, data in files.items() if kept(rel)}


def _report_tables(files: dict[str, bytes]) -> dict[str, bytes]:
    return {
        rel: data
        for rel, data in files.items()
        if rel.startswith("report/") and rel.endswith((".csv", ".parquet"))
    }


def _stage_files(mirror: Path) -> set[str]:
    """The stage outputs and work files in one mirror (written by that node's tasks, or fetched for them)."""
    return {
        p.relative_to(mirror).as_posix()
        for p in mirror.rglob("*.parquet")
        if "shards" not in p.parts
    }


def _cli(args: list[str], s3: dict, cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CODECORPUS_"))}
    env.update(_aws_env(s3), CODECORPUS_CACHE_DIR=str(cache))
    return subprocess.run(
        [sys.executable, "-m", "codecorpus", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _commits(path: Path, commits: list[tuple[str, dict[str, str]]]) -> None:
    """A git repository at ``path`` with one commit per (message, files written) (``conftest.GIT_ENV``)."""
    path.mkdir(parents=True)
    run_git(path, "init", "-q", "-b", "main")
    for message, files in commits:
        for rel, text in files.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text)
        run_git(path, "add", "-A")
        run_git(path, "commit", "-q", "-m", message)


def _histories(root: Path) -> Path:
    """Two repositories of three commits: a calculator with a test, a fix that changes code and test
    (a task candidate), and a helper of each one's own. The first two are the same in both, so
    exact dedup keeps one of each pair across shards."""
    fixed = CALC.replace(
        "    return a / b", "    if b == 0:\n        raise ZeroDivisionError(b)\n    return a / b"
    )
    for name in ("alpha", "beta"):
        _commits(root / name, [
            ("Add a calculator", {"calc.py": CALC, "tests/test_calc.py": CALC_TEST}),
            ("Fix division by zero", {"calc.py": fixed, "tests/test_calc.py": CALC_TEST + "\n\ndef test_div():\n"
                                                                                         "    assert div(4, 2) == 2\n"}),
            (f"Add the {name} helper", {f"{name}.py": f"def {name}():\n    return 1\n"}),
        ])  # fmt: skip
    return root


def _tasks_recipe(histories: Path) -> dict:
    """The repository-tasks pipeline on ``_histories``: two commits a slice, so every stage has four shards;
    every parent walked, as the shipped recipe does, so each slice reads its commits from the plan's
    walk file, which a planning task wrote to the bucket."""
    return {
        "name": "nofs-tasks", "seed": 7,
        "sources": [{"type": "git", "name": "histories", "path": str(histories)}],
        "stages": {
            "commits": {"commits_per_slice": 2, "first_parent": False},
            "commit_filters": {"max_files_changed": 10, "require_imperative": False, "permissive_only": False},
            "commit_dedup": {"buckets": 2}, "task_candidates": {}, "edit_set": {"target": "diff"},
            "sft_render": {}, "task_outputs": {},
        },
        "tokenizer": {"builtin": "qwen2.5"},
        "outputs": [{"name": "edit", "kind": "sft", "seq_len": 2048}],
    }  # fmt: skip


@dataclass(frozen=True)
class ClusterRun:
    """One recipe run locally (the reference) and on the cluster into ``s3://BUCKET/<prefix>``."""

    local: Path
    prefix: str
    result: RunResult
    mirrors: dict[str, Path]
    """This run's mirror on the driver, the head and the worker."""

    @property
    def url(self) -> str:
        return f"s3://{BUCKET}/{self.prefix}"


def _worker_on_each_node() -> None:
    """Start this job's worker on both nodes before its tasks, as ``launch.start`` warms one per CPU.

    Without it the head's worker is up first and Ray hands it the stage's queued tasks one after
    another (a granted lease is reused for tasks of the same shape), so the worker node may run none.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    assert len(nodes) == 2
    ray.get([
        _warm.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(WARM_MODULES)
        for node in nodes
    ])  # fmt: skip


def _cluster_runs(
    recipes: dict[str, Recipe], s3: dict, caches: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> dict[str, RunResult]:
    """Each recipe on a head and a worker node, each with its own mirror, into the bucket
    (``nofs/<name>``); the driver joins the cluster once per run, as ``codecorpus run`` would."""
    import ray
    from ray.cluster_utils import Cluster

    for key, value in _aws_env(s3).items():
        monkeypatch.setenv(key, value)
    # the raylets (and their workers) inherit it
    monkeypatch.setenv(store.CACHE_ENV, str(caches["head"]))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        monkeypatch.setenv(store.CACHE_ENV, str(caches["worker"]))
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        monkeypatch.setenv(store.CACHE_ENV, str(caches["driver"]))
        results = {}
        for name, recipe in recipes.items():
            # the repository tasks are planned in tasks, so the nodes write the walk files (the local
            # reference plans on its driver); ingest's plan files in tasks would be files a local run lacks
            monkeypatch.setenv(PLAN_INLINE_ENV, "0" if name == "repo-tasks" else "")
            run_dir = Path(store.activate(f"s3://{BUCKET}/nofs/{name}").local_root)
            init_ray(None, cluster.address)  # its workers get this run's store
            _worker_on_each_node()
            results[name] = Executor(recipe, run_dir, quiet=True).run_pipeline()
            ray.shutdown()
        return results
    finally:
        store.deactivate()
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def bucket(s3_server):
    """The bucket every run of this module writes under (a boto3 client of the test server)."""
    return make_bucket(s3_server, BUCKET)


@pytest.fixture(scope="module")
def cluster_runs(tmp_path_factory, s3_server, bucket) -> Iterator[dict[str, ClusterRun]]:
    """Pretraining and repository tasks, each run on a local Ray, then both on one two-node cluster."""
    import ray

    root = tmp_path_factory.mktemp("nofs")
    recipes = {
        "pretrain": load_recipe_data(fixture_recipe(write_repos(root / "corpus"))),
        "repo-tasks": load_recipe_data(_tasks_recipe(_histories(root / "histories"))),
    }
    init_ray(2, None)
    for name, recipe in recipes.items():
        Executor(recipe, root / f"local-{name}", quiet=True).run_pipeline()
        write_report(root / f"local-{name}")
    ray.shutdown()
    caches = {node: root / f"cache-{node}" for node in NODES}
    with pytest.MonkeyPatch.context() as monkeypatch:
        results = _cluster_runs(recipes, s3_server, caches, monkeypatch)
    runs = {}
    for name, result in results.items():
        mirror = store.mirror_root(f"s3://{BUCKET}/nofs/{name}").name
        runs[name] = ClusterRun(
            root / f"local-{name}",
            f"nofs/{name}",
            result,
            {node: caches[node] / mirror for node in NODES},
        )
    yield runs
    store.deactivate()
    init_ray(2, None)  # the local Ray the rest of the session runs on


def _assert_the_bucket_holds_the_local_run(run: ClusterRun, s3: dict, tmp_path: Path) -> None:
    """The run's tasks ran on both nodes, which exchanged files through the bucket alone; the bucket
    holds the local run's bytes; verify and report from a fresh process with an empty mirror pass
    and give the local report's tables."""
    client = s3_client(s3)
    # which node runs a task is Ray's choice (SPREAD over warmed workers puts most stages on both);
    # the run as a whole used both
    assert max(s.stats["nodes"] for s in run.result.stages) == 2
    head, worker, driver = (_stage_files(run.mirrors[n]) for n in ("head", "worker", "driver"))
    assert driver == set()  # the driver writes and reads no stage file: every one is a task's
    # files one node's tasks wrote and the other's read, through the bucket alone
    assert head & worker
    expected, got = run_outputs(run.local), _outputs(_bucket_files(client, run.prefix))
    assert sorted(got) == sorted(expected)
    assert [k for k in expected if expected[k] != got[k]] == []

    # another machine: nothing of the run on its disk
    verified = _cli(["manifest", "verify", run.url], s3, tmp_path / "cache-fresh")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    reported = _cli(["report", run.url], s3, tmp_path / "cache-report")
    assert reported.returncode == 0, reported.stdout + reported.stderr

    local_tables = {
        f"report/{p.name}": p.read_bytes()
        for p in (run.local / "report").iterdir()
        if p.suffix in (".csv", ".parquet")
    }
    s3_tables = _report_tables(_bucket_files(client, run.prefix))
    assert len(local_tables) > 10
    assert sorted(s3_tables) == sorted(local_tables)
    assert [k for k in local_tables if local_tables[k] != s3_tables[k]] == []


def test_cluster_without_shared_fs_gives_the_local_bytes(cluster_runs, s3_server, tmp_path):
    _assert_the_bucket_holds_the_local_run(cluster_runs["pretrain"], s3_server, tmp_path)


def test_repo_tasks_without_shared_fs_give_the_local_bytes(cluster_runs, s3_server, tmp_path):
    run = cluster_runs["repo-tasks"]
    stats = {s.name: s.stats for s in run.result.stages}
    # each repository's pair of shared commits sits in a slice of its own
    assert stats["commit_dedup"]["dropped"] == {"duplicate_exact": 2}
    # the calculator and its fix, each with its test; every commit dedup kept is an edit example
    assert (stats["task_candidates"]["rows_out"], stats["sft_render"]["rows_out"]) == (2, 4)
    # the plan's walk files, one per repository, written by a planning task on a node (a slice on
    # the other node fetches them from the bucket); the driver never held one
    walks = {n: {p.name for p in run.mirrors[n].rglob("*.walk")} for n in ("driver", "head", "worker")}
    assert walks["driver"] == set() and len(walks["head"] | walks["worker"]) == 2
    _assert_the_bucket_holds_the_local_run(run, s3_server, tmp_path)


def _envs_recipe(repos: Path) -> Recipe:
    """The shipped environments example, its Python repository alone, tests run once."""
    return load_recipe_data({
        "name": "nofs-envs", "seed": 1234,
        "sources": [{"type": "local", "name": "examples", "path": str(repos), "layout": "repos"}],
        "stages": {"env_discover": {}, "env_verify": {"runs": 1},
                   "task_validate": {"tasks": str(EXAMPLES / "env-tasks.jsonl")}},
    })  # fmt: skip


@pytest.mark.skipif(NO_SANDBOX is not None, reason=f"no sandbox: {NO_SANDBOX}")
def test_envs_stages_share_only_the_bucket(bucket, s3_server, tmp_path, monkeypatch):
    """env_discover snapshots the calc example on node a; env_verify verifies it on node b, which
    clones the snapshot from its bundle and publishes the spec; task_validate validates the shipped
    task on node c and writes the RL manifest, which ``manifest verify`` accepts from a fresh mirror."""
    shutil.copytree(EXAMPLES / "repos" / "calc", tmp_path / "repos" / "calc")
    recipe, url = _envs_recipe(tmp_path / "repos"), f"s3://{BUCKET}/nofs/envs"
    for key, value in _aws_env(s3_server).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / "cache-driver"))
    driver = schema.RunPaths(Path(store.activate(url).local_root))
    mirror = store.mirror_root(url).name

    def on(node: str, stage: str) -> bodies.JobContext:
        """A task's context as Ray hands it to a worker on ``node``, whose mirror is its own."""
        monkeypatch.setenv(store.CACHE_ENV, str(tmp_path / f"cache-{node}"))
        store._active.cache_clear()
        return pickle.loads(pickle.dumps(bodies.JobContext(driver, stage, "hash")))

    try:
        (ref,), _ = repos.plan_repositories(recipe)
        envs.discover_job(on("a", "env_discover"), 0, ref, recipe.stages.env_discover)
        shutil.rmtree(tmp_path / "cache-a")  # node a's disk is no other node's
        verify = functools.partial(
            envs.verify_table, cfg=recipe.stages.env_verify, root=str(driver.root)
        )
        assert bodies.map_job(on("b", "env_verify"), 0, "env_discover", verify)["rows_out"] == 1
        snapshot = tmp_path / "cache-b" / mirror / "env_discover" / "repos" / "calc"
        assert repos.snapshot_bundle(snapshot).is_file()  # node b cloned it from the bucket
        shutil.rmtree(tmp_path / "cache-b")
        ctx, cfg = on("c", "task_validate"), recipe.stages.task_validate
        validated = envs.validate_task_job(
            ctx, 0, "env_verify", ref, [ref.name], cfg, recipe.stages.env_verify
        )
        assert validated["rows_out"] == 1, validated
        envs.unmatched_job(ctx, 1, [ref.name], cfg)
        assert envs.write_task_outputs(ctx, 2, str(driver.root)) == {"tasks": 1, "environments": 1}
    finally:
        store.deactivate()
    assert _stage_files(tmp_path / "cache-driver" / mirror) == set()

    verified = _cli(["manifest", "verify", url], s3_server, tmp_path / "cache-fresh")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    task = bucket.get_object(Bucket=BUCKET, Key=f"nofs/envs/{VERIFIED_TASKS}")["Body"].read()
    assert json.loads(json.loads(task)["FAIL_TO_PASS"]) == ["test_calc.CalcTest.test_clamp"]

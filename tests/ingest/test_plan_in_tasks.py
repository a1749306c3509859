"""Planning in tasks gives today's plan: the same shards, units, fingerprints and plan hash.

``shardplan.plan_ingest`` lists repositories in planning tasks and keeps shards as
ranges of batch files; ``plan.plan_shards`` holds every unit in one process. On a
corpus with every kind of source (local folders with skipped, vendored, too-large
and symlinked entries, docs, git folders with a duplicate object store and
unreadable repositories, one git repository, an archive, a JSONL file, a python-env
distribution) they must agree unit for unit, whatever the batch size and shard size.
The pipeline run on Ray must write the same bytes with planning in tasks as inline.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from collections import Counter
from pathlib import Path

import pytest
import zstandard

from codecorpus import schema
from codecorpus.config import IngestConfig, RecipeError, config_hash, load_recipe_data
from codecorpus.ingest import plan, shardplan
from codecorpus.ingest.refs import FileRef, S3Conn
from codecorpus.ingest.shardplan import PLAN_SIZES_SUFFIX, PLAN_UNITS_SUFFIX, plan_batch_file
from codecorpus.pipeline.spec import PLAN_INLINE_ENV
from codecorpus.runtime.executor import Executor
from codecorpus.storage import mirror
from conftest import (
    LIB_RS,
    MAIN_PY,
    UTIL_JS,
    fixture_recipe,
    git_repo,
    make_bucket,
    run_git,
    run_outputs,
    s3_client,
    tar_gz,
    write_repos,
)


class InProcessTasks:
    """``PlanTasks`` without Ray: each call's function and argument are pickled, as Ray ships them."""

    def __init__(self, root: Path):
        self.run = schema.RunPaths(root)
        self.calls: dict[str, int] = {}

    def map(self, label, fn, items, describe=None):
        self.calls[label] = self.calls.get(label, 0) + len(items)
        if describe is not None:
            assert all(isinstance(describe(item), str) for item in items)
        return [pickle.loads(pickle.dumps(fn))(pickle.loads(pickle.dumps(item))) for item in items]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plan_corpus")
    local = write_repos(root / "local")
    for i in range(7):  # more repositories than the batch sizes below, with planted entries
        repo = local / f"repo-{i:02d}"
        (repo / "pkg" / "node_modules").mkdir(parents=True)
        (repo / "pkg" / "node_modules" / "dep.js").write_text("module.exports = 1;\n")
        (repo / "pkg" / f"mod{i}.py").write_text(MAIN_PY * (i + 1))
        (repo / "big.txt").write_text("x" * (3000 + i))  # too_large at max_file_bytes=2500
        (repo / "package-lock.json").write_text("{}\n")
        (repo / "link.py").symlink_to(f"pkg/mod{i}.py")
        (repo / "__pycache__").mkdir()
        (repo / "__pycache__" / "m.pyc").write_bytes(b"\0" * 10)
        (repo / "LICENSE").write_text("MIT License\n\nPermission is hereby granted, free of charge\n")
    (local / "empty-repo").mkdir()
    exact = local / "exact"  # shards that end exactly at shard_bytes, then empty files
    exact.mkdir()
    for name, size in [("a", 100), ("b", 100), ("c", 0), ("d", 0), ("e", 100), ("f", 200), ("g", 0)]:
        (exact / f"{name}.txt").write_text("y" * size)
    docs = root / "docs" / "guide"
    docs.mkdir(parents=True)
    (docs / "index.md").write_text("# Guide\n\nRead me.\n")
    (docs / "code.py").write_text("x = 1\n")
    clones = root / "clones"
    alpha = git_repo(clones / "alpha", {"main.py": MAIN_PY, "src/util.js": UTIL_JS})
    run_git(alpha, "worktree", "add", "-q", str(clones / "alpha-wt"))  # same object store: a duplicate
    git_repo(clones / "beta", {"lib.rs": LIB_RS, "README.md": "# beta\n"})
    (clones / "broken" / ".git").mkdir(parents=True)
    (clones / "broken" / ".git" / "HEAD").write_text("not a ref\n")
    git_repo(root / "one", {"a.py": "a = 1\n", "b.py": "b = 2\n"})
    (root / "arch").mkdir()
    (root / "arch" / "r.tar.gz").write_bytes(tar_gz({"a.py": b"x = 1\n", "b/c.py": b"y = 2\n"}))
    lines = [json.dumps({"content": f"print({i})\n", "path": f"f{i}.py", "repo": "rec"}) for i in range(4)]
    (root / "records.jsonl").write_text("\n".join(lines) + "\n")
    return root


def _sources(corpus: Path) -> list:
    recipe = load_recipe_data({"sources": [
        {"type": "local", "name": "local", "path": str(corpus / "local")},
        {"type": "docs", "name": "docs", "path": str(corpus / "docs")},
        {"type": "git", "name": "clones", "path": str(corpus / "clones")},
        {"type": "archive", "name": "arch", "path": str(corpus / "arch")},
        {"type": "git", "name": "one", "path": str(corpus / "one")},
        {"type": "jsonl", "name": "rec", "path": str(corpus / "records.jsonl")},
        {"type": "python-env", "name": "env", "stdlib": False, "distributions": ["pyyaml"]},
    ], "stages": {"ingest": {}, "langid": {}}})
    return list(recipe.sources)


@pytest.mark.parametrize("shard_bytes", [1, 100, 200, 700, 5000, 10**12])
@pytest.mark.parametrize("batch", [1, 3])
def test_plan_in_tasks_equals_the_plan_in_memory(corpus: Path, tmp_path: Path, shard_bytes: int, batch: int):
    cfg = IngestConfig(shard_bytes=shard_bytes, max_file_bytes=2500)
    sources = _sources(corpus)
    old = plan.plan_shards(sources, cfg)
    tasks = InProcessTasks(tmp_path / "run")
    new = shardplan.plan_ingest(sources, cfg, tasks, inline_listings=0, batch_repositories=batch)
    assert new.listed_in_tasks and tasks.calls["plan"] == -(-new.repositories // batch)
    plan_dir = tasks.run.plan_dir("ingest")
    assert [shardplan.load_units(s.pieces, plan_dir) for s in new.shards] == old
    assert [s.fingerprint for s in new.shards] == [plan.plan_fingerprint(s) for s in old]
    assert [(s.units, s.document_bytes) for s in new.shards] == [(len(s), plan.document_bytes(s)) for s in old]
    assert new.hash == config_hash([plan.plan_fingerprint(s) for s in old])
    # the inline planner (few repositories) is the same plan too
    inline = shardplan.plan_ingest(sources, cfg, tasks)
    assert not inline.listed_in_tasks and inline.hash == new.hash
    assert [shardplan.load_units(s.pieces, plan_dir) for s in inline.shards] == old


def test_many_repositories_of_few_files_are_listed_on_the_driver_until_they_hold_too_many(
    corpus: Path, tmp_path: Path, monkeypatch
):
    cfg = IngestConfig(shard_bytes=200, max_file_bytes=2500)
    sources = _sources(corpus)
    expected = config_hash([plan.plan_fingerprint(s) for s in plan.plan_shards(sources, cfg)])
    tasks = InProcessTasks(tmp_path / "run")
    few = shardplan.plan_ingest(sources, cfg, tasks, inline_listings=1)  # over the count, under the units
    assert few.repositories > 1 and not few.listed_in_tasks and "plan" not in tasks.calls
    monkeypatch.setattr(shardplan, "INLINE_UNITS", 3)
    many = shardplan.plan_ingest(sources, cfg, tasks, inline_listings=1)
    assert many.listed_in_tasks and tasks.calls["plan"] > 0
    assert few.hash == many.hash == expected


def test_the_corpus_covers_what_it_claims(corpus: Path):
    units = [u for s in plan.plan_shards(_sources(corpus), IngestConfig(max_file_bytes=2500)) for u in s]
    reasons = {getattr(u, "skip", None) for u in units}
    assert {"too_large", "symlink", "skipped_dir", "vendored_dir", "duplicate_repository", "bad_repository",
            "not_docs", "package_metadata", None} <= reasons
    assert {type(u).__name__ for u in units} == {"FileRef", "ArchiveRef", "RecordRef"}
    assert {getattr(u, "store", None) for u in units} >= {"fs", "git"}


def test_driver_keeps_ranges_not_units(corpus: Path, tmp_path: Path):
    cfg = IngestConfig(shard_bytes=700, max_file_bytes=2500)
    new = shardplan.plan_ingest(_sources(corpus), cfg, InProcessTasks(tmp_path / "run"), inline_listings=0)
    kept = [p for s in new.shards for p in s.pieces]
    assert any(isinstance(p, shardplan.Rows) for p in kept)
    # units held on the driver are only those planned there: archive, records, the duplicate's drop
    inline = [u for p in kept if isinstance(p, shardplan.Units) for u in p.units]
    kinds = Counter(type(u).__name__ for u in inline)
    assert kinds["ArchiveRef"] == 1 and kinds["RecordRef"] >= 1 and kinds["FileRef"] == 1
    assert [u.skip for u in inline if type(u).__name__ == "FileRef"] == ["duplicate_repository"]


def test_a_bad_one_repository_source_is_the_recipe_error(tmp_path: Path):
    repo = git_repo(tmp_path / "one", {"a.py": "a = 1\n"})
    recipe = load_recipe_data({"sources": [{"type": "git", "name": "g", "path": str(repo), "revision": "nope"}],
                               "stages": {"ingest": {}}})
    with pytest.raises(RecipeError, match="revision"):
        shardplan.plan_ingest(recipe.sources, IngestConfig(), InProcessTasks(tmp_path / "run"), inline_listings=0)


def _run(recipe: dict, run_dir: Path, inline: str, monkeypatch) -> Executor:
    monkeypatch.setenv(PLAN_INLINE_ENV, inline)
    executor = Executor(load_recipe_data(recipe), run_dir, quiet=True)
    executor.run_pipeline()
    return executor


def test_pipeline_writes_the_same_bytes_with_planning_in_tasks(tmp_path: Path, ray_local, monkeypatch):
    src = write_repos(tmp_path / "corpus")
    for i in range(5):
        (src / f"more-{i}").mkdir()
        (src / f"more-{i}" / "m.py").write_text(f"def f{i}(x):\n    return x * {i}\n" * (i + 1))
    recipe = fixture_recipe(src)
    inline = _run(recipe, tmp_path / "inline", str(shardplan.INLINE_LISTINGS), monkeypatch)
    in_tasks = _run(recipe, tmp_path / "tasks", "0", monkeypatch)
    assert not (tmp_path / "inline" / "_plan").exists() and any((tmp_path / "tasks" / "_plan" / "ingest").iterdir())
    assert inline.hashes == in_tasks.hashes
    outputs = run_outputs(tmp_path / "tasks")
    assert {k: v for k, v in outputs.items() if not k.startswith("_plan/")} == run_outputs(tmp_path / "inline")
    stats = [json.loads((tmp_path / d / "ingest" / "_stats.json").read_text()) for d in ("inline", "tasks")]
    for s in stats:
        for key in ("task_seconds", "memory", "nodes", "seconds"):
            s.pop(key, None)
        assert s["shards"] > 1 and s["skipped_entries"]
    assert stats[0] == stats[1]
    # a rerun resumes: every ingest task's marker holds the plan's hash
    again = Executor(load_recipe_data(recipe), tmp_path / "tasks", quiet=True).run_pipeline(until="ingest")
    assert again.stages[0].ran_jobs == 0 and again.stages[0].skipped_jobs == stats[1]["shards"]


def test_a_file_line_is_json_dumps_text():
    odd = FileRef("s", "o/r", 'dir/caf\u00e9 "q"\n\udcff.py', "/x/\u4e2d.py", 12, "", "MIT", None, detail="d\\e")
    for ref in (odd, FileRef("s", "r", "p", "/p", 0, "abc", "unknown", "too_large", store="git", key="k")):
        assert plan.unit_line(ref) == json.dumps(plan._fingerprint_fields(ref), sort_keys=True, default=str)


def test_the_fingerprint_is_the_sha256_of_json_dumps_of_the_shard(corpus: Path):
    """The bytes every run's plan hash has been made of: ``json.dumps`` of the list of the units'
    fields (S3 settings left out), keys sorted. A unit whose value is not of its field's type
    (a bool size, a None revision) takes ``json.dumps``'s path and spells the same."""

    def spelled(shard: list) -> str:
        fields = [
            {**{k: v for k, v in vars(u).items() if k != "s3"}, "_unit": type(u).__name__}
            for u in shard
        ]
        return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()

    units = [
        u for s in plan.plan_shards(_sources(corpus), IngestConfig(max_file_bytes=2500)) for u in s
    ]
    conn = S3Conn("http://e", "r", "k", "s")
    odd = [
        FileRef("s", "r", 'caf\u00e9 "q"\udcff', "/p", True, None, "MIT"),
        FileRef("s", "r", "p", "", 3, "", "MIT", store="s3", key="p", s3=conn),
    ]
    for shard in ([], units, units[:1], odd):
        assert plan.plan_fingerprint(shard) == spelled(shard)
    assert {type(u).__name__ for u in units} == {"FileRef", "ArchiveRef", "RecordRef"}


def test_plan_files_go_through_an_s3_run_store(corpus: Path, tmp_path: Path, s3_server, monkeypatch):
    """With the run directory on S3, a node with an empty mirror reads the plan files from the bucket."""
    make_bucket(s3_server, "plan-runs")
    for key, value in {"AWS_ACCESS_KEY_ID": s3_server["access_key_id"], "AWS_ENDPOINT_URL": s3_server["endpoint_url"],
                       "AWS_SECRET_ACCESS_KEY": s3_server["secret_access_key"], "AWS_DEFAULT_REGION": "us-east-1",
                       mirror.CACHE_ENV: str(tmp_path / "cache")}.items():
        monkeypatch.setenv(key, value)
    mirror._client.cache_clear()
    store = mirror.activate("s3://plan-runs/r1")
    try:
        cfg = IngestConfig(shard_bytes=700, max_file_bytes=2500)
        tasks = InProcessTasks(Path(store.local_root))
        new = shardplan.plan_ingest(_sources(corpus), cfg, tasks, inline_listings=0, batch_repositories=3)
        keys = [o["Key"] for o in s3_client(s3_server).list_objects_v2(Bucket="plan-runs")["Contents"]]
        assert sorted(keys) == sorted(f"r1/_plan/ingest/{b}{suffix}" for b in new.batches
                                      for suffix in (PLAN_UNITS_SUFFIX, PLAN_SIZES_SUFFIX))
        shutil.rmtree(Path(store.local_root))  # another node: nothing in its mirror
        plan_dir = tasks.run.plan_dir("ingest")
        assert [shardplan.load_units(s.pieces, plan_dir) for s in new.shards] == plan.plan_shards(_sources(corpus), cfg)
    finally:
        mirror.deactivate()
        mirror._client.cache_clear()


def _rows(shards) -> list[shardplan.Rows]:
    return [p for s in shards for p in s.pieces if isinstance(p, shardplan.Rows)]


@pytest.mark.parametrize(("shard_bytes", "batch"), [(1, 100), (200, 3), (10**12, 100)])
def test_a_task_decompresses_each_batch_file_once(
    corpus: Path, tmp_path: Path, monkeypatch, shard_bytes: int, batch: int
):
    """A describing task's shards and an ingest task's pieces come in plan order: each batch
    file they touch is decompressed once, however many pieces of it they read (a shard per
    file at ``shard_bytes=1``; a file's rows split by a duplicate's drop and by units planned
    on the driver in one large shard)."""
    opened: list[str] = []
    open_batch = shardplan._open_batch
    monkeypatch.setattr(shardplan, "_open_batch", lambda d, f: opened.append(f) or open_batch(d, f))
    cfg = IngestConfig(shard_bytes=shard_bytes, max_file_bytes=2500)
    tasks = InProcessTasks(tmp_path / "run")
    new = shardplan.plan_ingest(
        _sources(corpus), cfg, tasks, inline_listings=0, batch_repositories=batch
    )
    groups = [
        new.shards[i : i + shardplan.SHARDS_PER_TASK]
        for i in range(0, len(new.shards), shardplan.SHARDS_PER_TASK)
    ]
    assert len(opened) == sum(len({p.file for p in _rows(g)}) for g in groups)
    # reading each piece from row 0 would open the files once per piece: more often
    assert len(_rows(new.shards)) > len(opened)
    plan_dir = tasks.run.plan_dir("ingest")
    for shard, expected in zip(new.shards, plan.plan_shards(_sources(corpus), cfg), strict=True):
        opened.clear()
        assert shardplan.load_units(shard.pieces, plan_dir) == expected
        assert len(opened) == len({p.file for p in _rows([shard])})


def test_the_batch_reader_reads_forward_and_rereads_a_range_behind_it(
    corpus: Path, tmp_path: Path, monkeypatch
):
    tasks = InProcessTasks(tmp_path / "run")
    new = shardplan.plan_ingest(
        _sources(corpus),
        IngestConfig(max_file_bytes=2500),
        tasks,
        inline_listings=0,
        batch_repositories=100,
    )
    plan_dir = tasks.run.plan_dir("ingest")
    file = new.batches[0]
    with open(plan_batch_file(plan_dir, file, PLAN_UNITS_SUFFIX), "rb") as f:
        every = zstandard.ZstdDecompressor().stream_reader(f).read().decode("ascii").splitlines()
    assert len(every) > 6
    opened: list[str] = []
    open_batch = shardplan._open_batch
    monkeypatch.setattr(shardplan, "_open_batch", lambda d, f: opened.append(f) or open_batch(d, f))
    with shardplan.BatchReader(plan_dir) as reader:
        forward = [
            reader.lines(shardplan.Rows(file, a, b))
            for a, b in [(0, 2), (2, 2), (4, 5), (5, len(every))]
        ]
        assert forward == [every[0:2], [], every[4:5], every[5:]] and len(opened) == 1
        behind = reader.lines(shardplan.Rows(file, 1, 3))  # read again from row 0
        assert behind == every[1:3] and len(opened) == 2
        with pytest.raises(RecipeError, match="ends before row"):
            reader.lines(shardplan.Rows(file, len(every) - 1, len(every) + 1))

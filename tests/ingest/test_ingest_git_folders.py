"""git source at corpus scale: one source names a folder of repositories or a list file of
paths and URLs; each repository keeps its own name, revision and license, and a repository
git cannot read is one counted drop while the others are read."""

from __future__ import annotations

import json
import random
import subprocess
import tarfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codecorpus import schema
from codecorpus.config import GitSource, IngestConfig, RecipeError, load_recipe_data
from codecorpus.ingest import git
from codecorpus.ingest.plan import plan_shards
from codecorpus.ingest.read import read_shard
from conftest import LIB_RS, MAIN_PY, UTIL_JS, git_repo, run_git

MIT = 'MIT License\n\nPermission is hereby granted, free of charge, to any person\nTHE SOFTWARE IS PROVIDED "AS IS"\n'
APACHE = "                                 Apache License\n                           Version 2.0, January 2004\n"
def _repo(path: Path, files: dict[str, str], tag: str | None = "v1") -> Path:
    """A work tree with one commit of ``files`` (tagged ``tag``)."""
    return git_repo(path, files, tag)


def _rev(repo: Path, rev: str = "v1") -> str:
    return run_git(repo, "rev-parse", f"{rev}^{{commit}}").strip()


def _corrupt(gitdir: Path, obj: str) -> None:
    """Pack every object without deltas, then flip bytes inside ``obj``'s compressed data."""
    run_git(gitdir, "repack", "-a", "-d", "-q", "--window=0")
    idx = next((gitdir / "objects" / "pack").glob("*.idx"))
    rows = [line.split() for line in run_git(gitdir, "verify-pack", "-v", str(idx)).splitlines()]
    size_in_pack, offset = next((int(r[3]), int(r[4])) for r in rows if r and r[0] == obj)
    pack = idx.with_suffix(".pack")
    pack.chmod(0o644)
    data = bytearray(pack.read_bytes())
    middle = offset + size_in_pack // 2
    for i in range(middle - 4, middle + 4):
        data[i] ^= 0xFF
    pack.write_bytes(bytes(data))


def _noise(seed: int, n: int = 3000) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefgh \n") for _ in range(n))


@pytest.fixture(scope="module")
def clones(tmp_path_factory) -> Path:
    """A folder of repositories, one of each kind a data team's clone folder holds.

    alpha        work tree, MIT; an untracked nested repository and a submodule checkout inside
    alpha-wt     a linked worktree of alpha (same object store)
    owner/beta.git  bare, Apache-2.0
    gamma        work tree, no license; one blob corrupt in its pack
    delta        no tag v1 (the source's revision)
    empty.git    bare, no commit
    epsilon      its commit's tree corrupt in its pack
    broken       a .git folder that is not a git directory
    plain/       a folder without any repository
    """
    tmp = tmp_path_factory.mktemp("git_folders")
    root = tmp / "clones"
    sub = _repo(tmp / "src" / "sub", {"s.py": "s = 1\n"})
    alpha = _repo(root / "alpha", {"main.py": MAIN_PY, "LICENSE": MIT}, tag=None)
    run_git(alpha, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "ext/sub")
    run_git(alpha, "commit", "-q", "-m", "sub")
    run_git(alpha, "tag", "v1")
    _repo(alpha / "nested" / "inner", {"inner.py": "inner = 1\n"})  # untracked: alpha's own
    run_git(alpha, "worktree", "add", "-q", str(root / "alpha-wt"))
    beta = _repo(tmp / "src" / "beta", {"lib.rs": LIB_RS, "LICENSE": APACHE})
    (root / "owner").mkdir()
    run_git(tmp, "clone", "-q", "--bare", str(beta), str(root / "owner" / "beta.git"))
    gamma = _repo(root / "gamma", {"ok.js": UTIL_JS, "noise.txt": _noise(1), "more.txt": _noise(2)})
    _corrupt(gamma / ".git", run_git(gamma, "rev-parse", "v1:noise.txt").strip())
    _repo(root / "delta", {"d.py": "d = 1\n"}, tag=None)
    (root / "empty.git").mkdir()
    run_git(root / "empty.git", "init", "-q", "--bare")
    epsilon = _repo(root / "epsilon", {"e.py": "e = 1\n"})
    _corrupt(epsilon / ".git", run_git(epsilon, "rev-parse", "v1^{tree}").strip())
    (root / "broken" / ".git").mkdir(parents=True)
    (root / "broken" / ".git" / "HEAD").write_text("not a ref\n")
    (root / "plain").mkdir()
    (root / "plain" / "notes.txt").write_text("not a repository\n")
    return root


def _plan(path: Path | str, **kw) -> list:
    src = GitSource(type="git", name="clones", path=str(path), revision="v1", **kw)
    return [r for s in plan_shards([src], IngestConfig()) for r in s]


def _repository_drops(refs: list) -> dict[str, tuple[str, str]]:
    return {r.repo: (r.skip, r.detail) for r in refs if r.path == "."}


def test_a_folder_plans_each_repository_once_with_its_own_name_revision_and_license(clones: Path):
    refs = _plan(clones)
    assert sorted({r.repo for r in refs}) == [
        "alpha", "alpha-wt", "broken", "delta", "empty", "epsilon", "gamma", "owner/beta"]
    assert [(r.repo, r.path) for r in refs] == sorted((r.repo, r.path) for r in refs)  # sorted plan
    files = {(r.repo, r.path) for r in refs if r.path != "."}
    assert {p for repo, p in files if repo == "alpha"} == {".gitmodules", "LICENSE", "main.py", "ext/sub"}
    assert not any("inner" in p or p.startswith(".git/") for _, p in files)  # nested repo: not double counted
    by_repo = {r.repo: r for r in refs if r.path != "."}
    assert by_repo["alpha"].revision == _rev(clones / "alpha")
    assert by_repo["owner/beta"].revision == _rev(clones / "owner" / "beta.git")
    assert by_repo["gamma"].revision == _rev(clones / "gamma")
    assert {repo: (r.license, r.license_method) for repo, r in by_repo.items()} == {
        "alpha": ("MIT", "license_file"), "owner/beta": ("Apache-2.0", "license_file"), "gamma": ("unknown", "unknown")}
    drops = _repository_drops(refs)
    assert {repo: reason for repo, (reason, _) in drops.items()} == {
        "alpha-wt": "duplicate_repository", "broken": "bad_repository", "delta": "missing_revision",
        "empty": "empty_repository", "epsilon": "bad_repository"}
    assert drops["alpha-wt"][1] == "same object store as alpha"
    assert "v1" in drops["delta"][1]
    assert "corrupt" in drops["epsilon"][1] or "inflate" in drops["epsilon"][1]
    assert "not a git repository" in drops["broken"][1]


def test_plan_is_deterministic_and_reads_only_license_and_gitmodules_blobs(clones: Path, monkeypatch):
    requested: list[str] = []
    real = git.cat_blobs

    def recording(gitdir: str, shas: list[str]) -> dict:
        requested.extend(shas)
        return real(gitdir, shas)

    monkeypatch.setattr(git, "cat_blobs", recording)
    refs = _plan(clones)
    assert refs == _plan(clones)
    by_blob = {r.key: r.path for r in refs if r.path != "."}
    assert requested and {by_blob[s] for s in requested} == {"LICENSE", ".gitmodules"}


def test_reading_a_folder_keeps_counts_and_a_corrupt_blob_is_one_drop(clones: Path):
    src = GitSource(type="git", name="clones", path=str(clones), revision="v1")
    shards = plan_shards([src], IngestConfig(shard_bytes=2000))
    assert len(shards) > 1
    results = [read_shard(s) for s in shards]
    for s, r in zip(shards, results, strict=True):  # a submodule is an entry, not a document
        assert r.table.num_rows + r.dropped.num_rows + r.skipped.num_rows == len(s)
    rows = pa.concat_tables([r.table for r in results]).to_pylist()
    drops = [d for r in results for d in r.dropped.to_pylist()]
    skipped = {(d["repo"], d["path"]): d["reason"] for r in results for d in r.skipped.to_pylist()}
    got = {(r["repo"], r["path"]): r for r in rows}
    assert set(got) == {("alpha", ".gitmodules"), ("alpha", "LICENSE"), ("alpha", "main.py"),
                        ("owner/beta", "LICENSE"), ("owner/beta", "lib.rs"),
                        ("gamma", "ok.js"), ("gamma", "more.txt")}
    assert got[("owner/beta", "lib.rs")]["text"] == LIB_RS
    reasons = {(d["repo"], d["path"]): d["reason"] for d in drops}
    assert reasons[("gamma", "noise.txt")] == "corrupt_object"
    assert skipped == {("alpha", "ext/sub"): "submodule"}
    assert reasons[("delta", ".")] == "missing_revision"
    # in one batch, git stops at the corrupt blob: the blobs after it are still read
    gamma = [r for r in _plan(clones) if r.repo == "gamma"]
    assert [r.path for r in gamma] == ["more.txt", "noise.txt", "ok.js"]
    one = read_shard(gamma)
    assert {r["path"]: r["text"] for r in one.table.to_pylist()} == {"more.txt": _noise(2), "ok.js": UTIL_JS}
    assert [(d["path"], d["reason"]) for d in one.dropped.to_pylist()] == [("noise.txt", "corrupt_object")]


def test_a_list_file_names_paths_and_file_urls(clones: Path, tmp_path: Path):
    beta = clones / "owner" / "beta.git"
    run_git(tmp_path, "clone", "-q", "--bare", str(beta), str(tmp_path / "mirror" / "owner" / "beta.git"))
    listing = tmp_path / "repos.txt"
    listing.write_text(
        "# the team's clones\n\n"
        f"{clones}/alpha\n"
        f"file://{beta}\n"
        "  mirror/owner/beta.git  \n"  # relative to the list file: a second copy of beta
        f"file://{clones.parent}/src/sub\n"
        f"file://{clones}/gamma\n"  # its corrupt blob fails the clone
        f"{tmp_path}/gone\n"
    )
    cache = tmp_path / "cache"
    refs = _plan(listing, cache_dir=str(cache))
    renamed = sorted({r.repo for r in refs if r.repo.startswith("owner/beta~")})
    assert len(renamed) == 1  # two repositories named owner/beta: the later location gets a suffix
    gone = f"{tmp_path.name}/gone"
    assert {r.repo for r in refs} == {"clones/alpha", "owner/beta", *renamed, "src/sub", "clones/gamma", gone}
    by_repo = {r.repo: r for r in refs if r.path != "."}
    assert by_repo["owner/beta"].container == str(tmp_path / "mirror" / "owner" / "beta.git")
    assert by_repo[renamed[0]].container.startswith(str(cache))  # a URL is read from its bare clone
    assert by_repo["owner/beta"].revision == by_repo[renamed[0]].revision == _rev(beta)
    assert by_repo["owner/beta"].license == "Apache-2.0"
    assert by_repo["src/sub"].revision == _rev(clones.parent / "src" / "sub")
    assert by_repo["clones/alpha"].container == str(clones / "alpha" / ".git")
    drops = _repository_drops(refs)
    assert {repo: reason for repo, (reason, _) in drops.items()} == {
        gone: "bad_repository", "clones/gamma": "bad_repository"}
    assert "cannot clone" in drops["clones/gamma"][1] and "no such file" in drops[gone][1]
    # the clone cache is reused: the same plan, and no second clone
    made = sorted(p.name for p in cache.iterdir())
    assert len(made) == 2 and _plan(listing, cache_dir=str(cache)) == refs
    assert sorted(p.name for p in cache.iterdir()) == made


def test_a_list_naming_one_repository_twice_reads_it_once(clones: Path, tmp_path: Path):
    listing = tmp_path / "twice.txt"
    listing.write_text(f"{clones}/alpha\n{clones}/alpha/\n")
    drops = _repository_drops(_plan(listing))
    assert [reason for reason, _ in drops.values()] == ["duplicate_repository"]


def _recipe(path: str) -> dict:
    return {"sources": [{"type": "git", "name": "g", "path": path}], "stages": {"ingest": {}}}


def test_a_missing_path_or_an_empty_list_is_a_recipe_error_naming_the_key(tmp_path: Path):
    with pytest.raises(RecipeError, match=r"sources\.0\.path.*does not exist: point path at"):
        load_recipe_data(_recipe(str(tmp_path / "nope")))
    empty = tmp_path / "list.txt"
    empty.write_text("# nothing yet\n\n")
    with pytest.raises(RecipeError, match=r"sources\.0\.path.*names no repository"):
        load_recipe_data(_recipe(str(empty)))
    bundle = tmp_path / "r.bundle"
    bundle.write_bytes(b"# v2 git bundle\n\0\x01")
    with pytest.raises(RecipeError, match=r"sources\.0\.path.*binary file, not a list"):
        load_recipe_data(_recipe(str(bundle)))
    (tmp_path / "nothing").mkdir()
    with pytest.raises(RecipeError, match=r"sources\[g\]\.path: no git repository under"):
        plan_shards(load_recipe_data(_recipe(str(tmp_path / "nothing"))).sources, IngestConfig())
    assert load_recipe_data(_recipe("https://example.com/r.git")).sources[0].path == "https://example.com/r.git"


def test_repo_names_only_a_one_repository_source(clones: Path):
    with pytest.raises(RecipeError, match=r"sources\[clones\]\.repo: .*remove repo"):
        _plan(clones, repo="all")


def test_one_source_covers_the_folder_in_a_pipeline_run(clones: Path, tmp_path: Path, ray_local):
    from codecorpus.runtime.executor import Executor

    recipe = load_recipe_data({
        "sources": [{"type": "git", "name": "clones", "path": str(clones), "revision": "v1"}],
        "stages": {"ingest": {"shard_bytes": 2000}, "langid": {}},
    })
    run = tmp_path / "run"
    Executor(recipe, run, quiet=True).run_pipeline(until="ingest")
    paths = schema.RunPaths(run)
    stats = json.loads(paths.stats("ingest").read_text())
    assert stats["rows_in"] == stats["rows_out"] + sum(stats["dropped"].values())
    assert stats["rows_out"] == 7
    assert {k: v for k, v in stats["dropped"].items() if k in (
        "bad_repository", "missing_revision", "empty_repository", "duplicate_repository", "corrupt_object")} == {
        "bad_repository": 2, "missing_revision": 1, "empty_repository": 1, "duplicate_repository": 1,
        "corrupt_object": 1}
    dropped = pa.concat_tables([pq.read_table(p) for p in sorted(paths.dropped_dir("ingest").glob("*.parquet"))])
    logged = Counter((r["repo"], r["reason"]) for r in dropped.to_pylist() if r["path"] == ".")
    assert logged == Counter({("alpha-wt", "duplicate_repository"): 1, ("broken", "bad_repository"): 1,
                              ("delta", "missing_revision"): 1, ("empty", "empty_repository"): 1,
                              ("epsilon", "bad_repository"): 1})
    docs = pa.concat_tables([pq.read_table(p) for p in sorted(paths.stage_dir("ingest").glob("part-*.parquet"))])
    assert Counter(docs.column("repo").to_pylist()) == {"alpha": 3, "owner/beta": 2, "gamma": 2}


def test_the_projects_own_history_as_a_folder_of_one_bare_clone(tmp_path: Path):
    here = Path(__file__).resolve().parent
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=here, capture_output=True, text=True)
    if top.returncode != 0:
        pytest.skip("the tests are not inside a git clone of the project")
    folder = tmp_path / "self"
    clone = folder / "codecorpus.git"
    folder.mkdir()
    run_git(tmp_path, "clone", "-q", "--bare", top.stdout.strip(), str(clone))
    cfg = IngestConfig()
    shards = plan_shards([GitSource(type="git", name="self", path=str(folder))], cfg)
    results = [read_shard(s, cfg) for s in shards]
    rows = pa.concat_tables([r.table for r in results]).to_pylist()
    drops = [d for r in results for d in r.dropped.to_pylist()]
    head = run_git(clone, "rev-parse", "HEAD").strip()
    tree = {line.split("\t", 1)[1] for line in run_git(clone, "ls-tree", "-r", "--full-tree", "HEAD").splitlines()}
    assert {r["repo"] for r in rows} == {"codecorpus"} and {r["revision"] for r in rows} == {head}
    assert {r["path"] for r in rows} | {d["path"] for d in drops} == tree
    assert len(rows) + len(drops) == len(tree) and len(rows) > len(tree) // 2
    # every document is its blob as `git archive` writes it
    archive = tmp_path / "head.tar"
    run_git(clone, "archive", "--format=tar", "-o", str(archive), "HEAD")
    with tarfile.open(archive) as tar:
        blobs = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    plain = [r for r in rows if not r["path"].endswith(".ipynb") and r["encoding"] in ("utf-8", "ascii")]
    assert plain and all(r["text"].encode() == blobs[r["path"]] for r in plain)
    assert {r["path"] for r in rows} >= {"README.md", "pyproject.toml", "src/codecorpus/ingest/git.py"}

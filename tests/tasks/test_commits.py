"""The commits source on repositories made with git: rows, every drop reason, slices, streaming."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tasks_repos import (
    CALC,
    CALC_FIXED,
    CP1251_MESSAGE,
    EXPECTED_DROPS,
    LATIN1_MESSAGE,
    TESTS,
    bare_clone,
    copy_repo,
    fork,
    fork_repo,
    init,
    project,
    project_repo,
)

from codecorpus.tasks import columns as C
from codecorpus.tasks import gitlog
from codecorpus.tasks.commits import (
    _ROW_TAIL,
    FileEntry,
    GitError,
    Repository,
    plan_slices,
    read_slice,
    read_slice_table,
    slice_shas,
)
from codecorpus.tasks.config import CommitsConfig

__all__ = ["fork", "fork_repo", "project", "project_repo"]  # fixtures


def read_all(repo: Repository, cfg: CommitsConfig):
    with tempfile.TemporaryDirectory() as plan_dir:  # a walk of every parent is listed there
        results = [read_slice_table(sl, cfg) for sl in plan_slices([repo], cfg, plan_dir=plan_dir)]
    table = pa.concat_tables([r.table for r in results])
    dropped = pa.concat_tables([r.dropped for r in results])
    commits = sum(r.counters["commits"] for r in results)
    return table, dropped, commits


def by_subject(table: pa.Table) -> dict[str, dict]:
    return {r[C.SUBJECT]: r for r in table.to_pylist()}


def test_every_commit_is_a_row_or_a_drop_with_its_reason(project, project_repo):
    table, dropped, commits = read_all(project_repo, CommitsConfig())
    first_parent = project.git("rev-list", "--first-parent", "--count", "HEAD")
    assert commits == int(first_parent) == table.num_rows + dropped.num_rows
    assert Counter(dropped.column("reason").to_pylist()) == EXPECTED_DROPS
    assert set(dropped.column("path").to_pylist()).isdisjoint(table.column(C.SHA).to_pylist())
    assert "Add a feature" not in by_subject(table)  # the merged branch is not on the first-parent chain


def test_a_commit_row_matches_git(project, project_repo):
    rows = by_subject(read_all(project_repo, CommitsConfig())[0])
    fix = rows["Fix division by zero in divide"]
    sha = fix[C.SHA]
    assert fix[C.PARENTS] == [project.git("rev-parse", f"{sha}~1")]
    assert fix[C.BODY] == "Raise a clear error instead of a bare ZeroDivisionError."
    assert fix[C.AUTHOR_DATE] == dt.datetime(2024, 1, 2, 10, 0, tzinfo=dt.timezone.utc)  # +02:00 -> UTC
    assert fix[C.DIFF] == project.git("show", "--format=", "--no-color", sha) + "\n"
    numstat = project.git("show", "--format=", "--numstat", sha).splitlines()
    assert sorted(f"{f['added']}\t{f['deleted']}\t{f['path']}" for f in fix[C.FILES]) == sorted(numstat)
    assert {f["status"] for f in fix[C.FILES]} == {"modify"}
    assert {b["path"]: b["text"] for b in fix[C.BEFORE]} == {"src/calc.py": CALC, "tests/test_calc.py": TESTS}
    assert (fix["license"], fix["lang"]) == ("MIT", "Python")


def test_status_rename_and_license_at_each_commit(project_repo):
    rows = by_subject(read_all(project_repo, CommitsConfig())[0])
    (renamed,) = rows["Rename calc to calculator"][C.FILES]
    assert (renamed["status"], renamed["old_path"], renamed["path"]) == ("rename", "src/calc.py", "src/calculator.py")
    assert rows["Rename calc to calculator"][C.BEFORE] == [{"path": "src/calc.py", "text": CALC_FIXED}]
    assert rows["Add a calculator with tests"][C.FILES][0]["status"] == "add"
    licenses = {s: r["license"] for s, r in rows.items()}
    assert licenses["Relicense under Apache-2.0"] == licenses["Reject negative numbers in root"] == "Apache-2.0"
    assert licenses["Rename calc to calculator"] == licenses["Add lib as a submodule"] == "MIT"
    submodule = {f["path"]: f["excluded"] for f in rows["Add lib as a submodule"][C.FILES]}
    assert submodule == {".gitmodules": None, "lib": "submodule"}


def test_non_utf8_messages_transcoded_with_evidence_else_dropped(project_repo):
    table, dropped, _ = read_all(project_repo, CommitsConfig())
    rows = by_subject(table)
    assert rows[LATIN1_MESSAGE][C.MESSAGE_ENCODING] == "iso-8859-1"  # git re-encoded it from its header
    assert rows[CP1251_MESSAGE][C.MESSAGE_ENCODING] == "cp1251"  # no header: detected from its bytes
    reasons = dict(zip(dropped.column("reason").to_pylist(), dropped.column("detail").to_pylist(), strict=True))
    assert "undecodable_message" in reasons and "undecodable_path" in reasons


def test_slices_and_batches_give_the_same_rows_as_one_walk(project_repo):
    whole, whole_drops, _ = read_all(project_repo, CommitsConfig())
    cfg = CommitsConfig(commits_per_slice=4, batch_rows=3)
    slices = plan_slices([project_repo], cfg)
    assert [s.count for s in slices] == [4, 4, 4, 4, 3]
    batches = [b for sl in slices for b in read_slice(sl, cfg)]
    assert max(b.table.num_rows + b.dropped.num_rows for b in batches) <= 3
    assert pa.concat_tables([b.table for b in batches]).equals(whole)
    assert pa.concat_tables([b.dropped for b in batches]).equals(whole_drops)


@pytest.mark.parametrize("bounds", [{}, {"max_commits_per_repo": 11}, {"since": dt.datetime(2024, 1, 15)},
                                    {"until": dt.datetime(2024, 2, 1), "max_commits_per_repo": 9}])  # fmt: skip
def test_first_parent_slices_start_at_their_own_commit(project_repo, bounds):
    """No slice of a first-parent walk makes git skip commits; the rows are the one walk's."""
    one = CommitsConfig(**bounds)
    whole_table, whole_drops, whole_commits = read_all(project_repo, one)
    (whole,) = plan_slices([project_repo], one)
    cfg = CommitsConfig(commits_per_slice=3, **bounds)
    slices = plan_slices([project_repo], cfg)
    walk = slice_shas(whole, one)
    assert len(slices) > 1 and len(walk) == whole_commits
    assert [sl.start for sl in slices] == walk[::3]
    assert [sha for sl in slices for sha in slice_shas(sl, cfg)] == walk
    assert not any(arg.startswith("--skip") for sl in slices for arg in sl.revisions(cfg))
    table, drops, commits = read_all(project_repo, cfg)
    assert commits == whole_commits and table.equals(whole_table) and drops.equals(whole_drops)


def _git_commands(monkeypatch) -> list[list[str]]:
    """Every command the code under test starts from now on (``subprocess.run`` goes through Popen)."""
    seen: list[list[str]] = []
    real = subprocess.Popen

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, args, *rest, **kwargs):
            seen.append([str(a) for a in args])
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Recording)
    return seen


@pytest.mark.parametrize("bounds", [{}, {"max_commits_per_repo": 11}, {"since": dt.datetime(2024, 1, 15)},
                                    {"until": dt.datetime(2024, 2, 1), "max_commits_per_repo": 9}])  # fmt: skip
def test_slices_of_a_walk_of_every_parent_read_their_commits_from_the_plans_walk_file(
    project, project_repo, tmp_path, monkeypatch, bounds
):
    """The plan writes the walk as git rev-list prints it; each slice hands its own lines to git,
    which never walks (or skips) the commits before the slice; the rows are the one walk's."""
    one = CommitsConfig(first_parent=False, **bounds)
    whole_table, whole_drops, whole_commits = read_all(project_repo, one)
    cfg = CommitsConfig(first_parent=False, commits_per_slice=3, batch_rows=2, **bounds)
    commands = _git_commands(monkeypatch)
    slices = plan_slices([project_repo], cfg, plan_dir=tmp_path)
    (listing,) = {sl.listing for sl in slices}
    assert Path(listing).parent == tmp_path and Path(listing).suffix == ".walk"
    walk_args = [f"--max-count={cfg.max_commits_per_repo}"] if cfg.max_commits_per_repo else []
    for flag, when in (("--since", cfg.since), ("--until", cfg.until)):
        walk_args += [f"{flag}={int(when.replace(tzinfo=dt.timezone.utc).timestamp())}"] if when else []
    # the bounds select mainline changes; the walk is the commits they landed
    mainline = project.git("rev-list", "--first-parent", *walk_args, "HEAD").split()
    stop = project.git("rev-list", "--parents", "-n", "1", mainline[-1]).split()[1:2]
    walk = project.git("rev-list", mainline[0], *[f"^{s}" for s in stop]).split()
    assert Path(listing).read_text() == "".join(f"{sha}\n" for sha in walk)
    assert {sl.walk_sha256 for sl in slices} == {hashlib.sha256(Path(listing).read_bytes()).hexdigest()}
    assert len(slices) > 1 and [sl.skip for sl in slices] == list(range(0, len(walk), 3))
    assert [sha for sl in slices for sha in slice_shas(sl, cfg)] == walk and len(walk) == whole_commits
    given = []
    real = gitlog.stream_log

    def recorded(gitdir, max_record_bytes, *, shas=None, walk=None):
        given.append((shas, walk))
        return real(gitdir, max_record_bytes, shas=shas, walk=walk)

    monkeypatch.setattr(gitlog, "stream_log", recorded)
    results = [read_slice_table(sl, cfg) for sl in slices]
    assert [shas for shas, _ in given] == [slice_shas(sl, cfg) for sl in slices]
    assert all(walk is None for _, walk in given)  # git is given the commits, it walks nothing
    assert [c for c in commands if any(a.startswith("--skip") for a in c)] == []
    assert pa.concat_tables([r.table for r in results]).equals(whole_table)
    assert pa.concat_tables([r.dropped for r in results]).equals(whole_drops)
    assert sum(r.counters["commits"] for r in results) == whole_commits
    # each slice reads its own lines, at its offset, of whatever the file holds
    Path(listing).write_text("".join(f"{sha}\n" for sha in reversed(walk)))
    assert [sha for sl in slices for sha in slice_shas(sl, cfg)] == walk[::-1]


def test_a_walk_of_every_parent_that_fits_in_a_slice_is_walked_from_the_tip(project, project_repo, tmp_path):
    """No walk file: git walks the one slice itself, and the rows are those of the listed walk."""
    listed = read_all(project_repo, CommitsConfig(first_parent=False, commits_per_slice=3))
    cfg = CommitsConfig(first_parent=False)
    (whole,) = plan_slices([project_repo], cfg, plan_dir=tmp_path)
    assert whole.listing is None and whole.start == whole.tip == project.git("rev-parse", "HEAD")
    assert list(tmp_path.iterdir()) == []
    assert slice_shas(whole, cfg) == project.git("rev-list", "HEAD").split()
    table, drops, commits = read_all(project_repo, cfg)
    assert table.equals(listed[0]) and drops.equals(listed[1]) and commits == listed[2]


def test_a_walk_of_every_parent_needs_a_plan_folder(project_repo):
    with pytest.raises(ValueError, match="plan_dir"):
        plan_slices([project_repo], CommitsConfig(first_parent=False))


def test_a_sha256_repository_is_refused_at_the_plan(tmp_path):
    path = tmp_path / "sha256"
    subprocess.run(["git", "init", "-q", "--object-format=sha256", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "-c", "user.name=A", "-c", "user.email=a@x", "commit", "-q",
                    "--allow-empty", "-m", "Start"], check=True)  # fmt: skip
    with pytest.raises(GitError, match="sha256"):
        plan_slices([Repository("t", "o/sha256", str(path / ".git"))], CommitsConfig())


@pytest.mark.skipif(not gitlog.batch_command(), reason="this git is older than 2.36: it has only --batch")
def test_cat_file_batch_of_an_older_git_gives_the_same_rows(project_repo, monkeypatch):
    """git before 2.36 has no ``cat-file --batch-command``: the reader falls back to ``--batch``."""
    cfg = CommitsConfig(first_parent=False, max_before_file_bytes=200, batch_rows=3)
    buffered = read_all(project_repo, cfg)
    monkeypatch.setattr(gitlog, "batch_command", lambda: False)
    per_object = read_all(project_repo, cfg)
    assert per_object[0].equals(buffered[0]) and per_object[1].equals(buffered[1])
    assert per_object[0].column(C.BEFORE_SKIPPED).to_pylist() != [[]] * per_object[0].num_rows  # caps were hit


def test_row_tuples_follow_the_schema():
    """The source builds its rows and file entries as tuples, which Arrow converts by position."""
    assert FileEntry._fields == tuple(f.name for f in C.FILE_TYPE)
    assert C.COMMIT_SCHEMA.names[-len(_ROW_TAIL) :] == list(_ROW_TAIL)


def test_bounds_since_until_and_max_commits(project_repo):
    table, dropped, commits = read_all(project_repo, CommitsConfig(max_commits_per_repo=5))
    assert commits == 5 and table.num_rows + dropped.num_rows == 5
    assert table.column(C.SUBJECT)[0].as_py() == "Reject negative numbers in root"
    since = dt.datetime(2024, 1, 15, tzinfo=dt.timezone.utc)
    table, dropped, commits = read_all(project_repo, CommitsConfig(since=since))
    assert all(d >= since for d in table.column(C.COMMITTER_DATE).to_pylist())
    assert 0 < commits < 19
    until = dt.datetime(2024, 1, 3, tzinfo=dt.timezone.utc)
    table, _, commits = read_all(project_repo, CommitsConfig(until=until))
    assert commits == 2 and table.column(C.SUBJECT).to_pylist() == ["Fix division by zero in divide",
                                                                       "Add a calculator with tests"]


def test_shallow_clone_boundary_is_missing_parent(project, tmp_path):
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "3", f"file://{project.path}", str(shallow)], check=True)
    repo = Repository("fixture", "acme/proj", str(shallow / ".git"))
    table, dropped, commits = read_all(repo, CommitsConfig())
    assert commits == 3 and table.num_rows == 2
    assert dropped.column("reason").to_pylist() == ["missing_parent"]
    assert dropped.column("path")[0].as_py() == (shallow / ".git" / "shallow").read_text().split()[0]


@pytest.mark.parametrize("cfg", [CommitsConfig(), CommitsConfig(batch_rows=3),
                                 CommitsConfig(first_parent=False, commits_per_slice=5, batch_rows=3)])  # fmt: skip
def test_a_corrupt_object_drops_its_commit_and_the_walk_goes_on(project, tmp_path, cfg):
    """Also when batches went out before git failed: the commits are counted once."""
    broken = copy_repo(project.path / ".git", tmp_path / "broken.git")
    sha = project.git("log", "--format=%H", "-1", "--grep=Fix division")
    blob = project.git("rev-parse", f"{sha}:src/calc.py")
    (broken / "objects" / blob[:2] / blob[2:]).unlink()  # the fixture's objects are loose
    repo = Repository("fixture", "acme/proj", str(broken))
    table, dropped, commits = read_all(repo, cfg)
    listed = project.git("rev-list", "--count", *(["--first-parent"] if cfg.first_parent else []), "HEAD")
    assert commits == table.num_rows + dropped.num_rows == int(listed)
    reasons = dict(zip(dropped.column("path").to_pylist(), dropped.column("reason").to_pylist(), strict=True))
    assert reasons.get(sha) == "corrupt_object"
    assert "Add a calculator with tests" in by_subject(table)  # commits after the failure are read


def test_a_huge_commit_is_never_buffered(project_repo):
    cfg = CommitsConfig(max_record_bytes=600)
    table, dropped, commits = read_all(project_repo, cfg)
    assert commits == table.num_rows + dropped.num_rows
    big = [d for d in dropped.to_pylist() if d["reason"] == "diff_too_large"]
    assert big and all("record of" in d["detail"] for d in big)
    assert table.num_rows > 0


def test_split_records_across_chunk_boundaries():
    records = [b"%040x" % i + b"\x00body " + bytes([i]) * (i * 1000) for i in range(1, 40)]
    stream = b"".join(gitlog.MARKER + r for r in records)

    class Trickle(io.BytesIO):
        def read(self, n: int = -1) -> bytes:
            return super().read(min(n, 300))

    assert list(gitlog.split_records(Trickle(stream), 1 << 20)) == records
    out = list(gitlog.split_records(Trickle(stream), 20_500))  # records are 1046, 2046, ... bytes
    assert [isinstance(r, gitlog.Oversized) for r in out] == [len(r) > 20_500 for r in records]
    assert [r.sha for r in out if isinstance(r, gitlog.Oversized)] == [
        r[:40].decode() for r in records if len(r) > 20_500
    ]
    assert [r for r in out if not isinstance(r, gitlog.Oversized)] == [r for r in records if len(r) <= 20_500]


def test_paths_that_look_like_raw_entries_or_patch_headers(tmp_path):
    """A path may start with ":" (as each ``--raw`` entry does) or hold "diff --git " (as each
    file's patch does): the files are still found, one per path, with their statuses."""
    r = init(tmp_path / "odd")
    r.write(":100644 100644 x M", "a = 1\n")
    r.write("diff --git a/b b/b", "b = 1\n")
    r.write("plain.py", "c = 1\n")
    r.commit("Add odd names")
    r.git("mv", "diff --git a/b b/b", ":R100 renamed")
    r.write(":100644 100644 x M", "a = 2\n")
    r.git("rm", "-q", "plain.py")
    r.commit("Rename, edit and delete")
    rows = by_subject(read_all(Repository("t", "o/odd", str(r.path / ".git")), CommitsConfig())[0])
    assert sorted((f["path"], f["old_path"], f["status"]) for f in rows["Rename, edit and delete"][C.FILES]) == [
        (":100644 100644 x M", ":100644 100644 x M", "modify"),
        (":R100 renamed", "diff --git a/b b/b", "rename"),
        ("plain.py", "plain.py", "delete"),
    ]
    assert [f["added"] for f in rows["Add odd names"][C.FILES]] == [1, 1, 1]


def test_bot_authors_and_caps(project_repo):
    _, dropped, _ = read_all(project_repo, CommitsConfig(bot_authors=(), max_files_changed=1, max_diff_bytes=400))
    reasons = Counter(dropped.column("reason").to_pylist())
    assert "bot_author" not in reasons
    assert reasons["too_many_files"] >= 2 and reasons["diff_too_large"] >= 1


def test_the_same_bytes_twice(project_repo, tmp_path):
    def write(path: Path) -> bytes:
        table, dropped, _ = read_all(project_repo, CommitsConfig(commits_per_slice=5))
        pq.write_table(table, path / "rows.parquet")
        pq.write_table(dropped, path / "drops.parquet")
        return (path / "rows.parquet").read_bytes() + (path / "drops.parquet").read_bytes()

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert write(tmp_path / "a") == write(tmp_path / "b")


def own_repository(tmp_path: Path) -> Repository:
    """The repository holding these tests, cloned bare (its own history as a real repository)."""
    top = subprocess.run(["git", "-C", os.path.dirname(__file__), "rev-parse", "--show-toplevel"],
                         capture_output=True, check=False)  # fmt: skip
    if top.returncode != 0:
        pytest.skip("the tests are not inside a git repository")
    bare = bare_clone(Path(top.stdout.decode().strip()), tmp_path / "own.git")
    return Repository("self", "codecorpus/codecorpus", str(bare))


def test_own_history_read_as_a_real_repository(tmp_path):
    repo = own_repository(tmp_path)
    table, dropped, commits = read_all(repo, CommitsConfig(commits_per_slice=50))
    total = subprocess.run(["git", f"--git-dir={repo.gitdir}", "rev-list", "--first-parent", "--count", "HEAD"],
                           capture_output=True, check=True).stdout  # fmt: skip
    assert commits == int(total) == table.num_rows + dropped.num_rows
    assert table.num_rows > 0
    for row in table.slice(0, 10).to_pylist():
        numstat = subprocess.run(["git", f"--git-dir={repo.gitdir}", "show", "--format=", "--numstat", "-M", row[C.SHA]],
                                 capture_output=True, check=True).stdout.decode().splitlines()  # fmt: skip
        added = sum(int(line.split("\t")[0]) for line in numstat if not line.startswith("-"))
        assert row[C.LINES_ADDED] == added
        assert len(row[C.FILES]) == len(numstat)


def test_a_grafted_history_is_walked_as_its_commits_record_it(project, project_repo, tmp_path):
    """``git replace --graft`` cuts a history short for git's own commands; the walk ignores it."""
    table, dropped, _ = read_all(project_repo, CommitsConfig())
    clone = copy_repo(project.path, tmp_path / "grafted")
    subprocess.run(["git", "replace", "--graft", "HEAD~1"], cwd=clone, check=True, capture_output=True)
    assert subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=clone, capture_output=True,
                          text=True, check=True).stdout.strip() == "2"  # what git shows by default
    grafted, grafted_dropped, _ = read_all(Repository("fixture", "acme/proj", str(clone / ".git")), CommitsConfig())
    assert grafted.column(C.SHA).to_pylist() == table.column(C.SHA).to_pylist()
    assert grafted_dropped.num_rows == dropped.num_rows
    # the older graft file, which git still reads (with a deprecation hint) unless told not to
    subprocess.run(["git", "replace", "-d", project.git("rev-parse", "HEAD~1")], cwd=clone, check=True,
                   capture_output=True)
    (clone / ".git" / "info").mkdir(exist_ok=True)
    (clone / ".git" / "info" / "grafts").write_text(project.git("rev-parse", "HEAD~1") + "\n")
    assert subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=clone, capture_output=True,
                          text=True, check=True).stdout.strip() == "2"
    grafted, _, _ = read_all(Repository("fixture", "acme/proj", str(clone / ".git")), CommitsConfig())
    assert grafted.column(C.SHA).to_pylist() == table.column(C.SHA).to_pylist()


def test_a_slice_read_where_the_planners_clone_is_missing_clones_its_url(project, tmp_path):
    """On a cluster whose nodes share no file system, the driver's clone of a URL is on the driver:
    a slice read on another node clones the URL there, at the path the plan named."""
    from codecorpus.ingest.git import clone_at

    url, clone = f"file://{project.path}", tmp_path / "cache" / "proj.git"
    clone.parent.mkdir()
    repo = Repository("fixture", "acme/proj", clone_at(url, clone), url)
    cfg = CommitsConfig()
    slices = plan_slices([repo], cfg, plan_dir=str(tmp_path / "plan"))
    here = [read_slice_table(sl, cfg).table for sl in slices]
    shutil.rmtree(tmp_path / "cache")  # another node
    elsewhere = [read_slice_table(sl, cfg).table for sl in slices]
    assert [t.to_pylist() for t in elsewhere] == [t.to_pylist() for t in here]
    assert sum(t.num_rows for t in here) > 0

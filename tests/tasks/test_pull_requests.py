"""Tasks as pull requests landed (issue 38), on a repository made by git the way GitHub merges:

- pull request #1 merged with a merge commit: two commits that split code and tests, and a
  merge of main into the branch between them;
- #2 squash-merged ("(#2)"), #3 rebase-merged (two commits on the mainline, no number);
- #4 squash-merged and reverted by #5;
- #6 a binary file with code and tests;

and a GitHub REST metadata fixture written the way ``gh api --paginate`` writes it (pages back
to back): linked, unlinked and cross-repository issues, comments before and after the pull
request's first commit, a malformed record, a file that is not JSON, and a merged pull request
whose merge commit the repository does not have.
"""

from __future__ import annotations

import json
import subprocess
import typing
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from tasks_repos import Repo, init

from codecorpus.tasks import candidates, filters, github, swebench
from codecorpus.tasks import columns as C
from codecorpus.tasks.commits import METADATA_RECORDS, Repository, plan_slices, read_slice_table
from codecorpus.tasks.config import (
    CommitFiltersConfig,
    CommitsConfig,
    TaskCandidatesConfig,
    TaskSetConfig,
)

LIB = "def parse(s):\n    return s.split(',')\n\n\ndef helper(x):\n    return round(x)\n"
TESTS = "from lib import parse\n\n\ndef test_parse():\n    assert parse('a,b') == ['a', 'b']\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 3


def _merge(r: Repo, branch: str, message: str) -> str:
    r.day += 1
    date = f"2024-01-{r.day:02d}T12:00:00+00:00"
    r.git("merge", "-q", "--no-ff", "-m", message, branch, env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
    return r.git("rev-parse", "HEAD")


def build_app(root: Path) -> tuple[Repo, dict[str, str]]:
    r = init(root / "app")
    sha: dict[str, str] = {}
    r.write("src/lib.py", LIB)
    r.write("tests/test_lib.py", TESTS)
    r.write("README.md", "# app\n")
    sha["initial"] = r.commit("Add the library")
    # pull request #1 starts: its first commit changes code only
    r.git("checkout", "-q", "-b", "parse")
    r.write("src/lib.py", LIB.replace("return s.split(',')", "return [p.strip() for p in s.split(',')]"))
    sha["pr1_code"] = r.commit("Strip the parts parse returns")
    # meanwhile #2 is squash-merged on main
    r.git("checkout", "-q", "main")
    r.write("src/lib.py", LIB + "\n\ndef count(s):\n    return len(parse(s)) if s else 0\n")
    r.write("tests/test_lib.py", TESTS + "\n\ndef test_empty():\n    from lib import count\n    assert count('') == 0\n")
    sha["pr2"] = r.commit("Handle empty input (#2)\n\n* Return no parts for an empty string\n* Test it\n")
    # #1 merges main in, then adds its tests; merged with a merge commit
    r.git("checkout", "-q", "parse")
    sha["pr1_sync"] = _merge(r, "main", "Merge branch 'main' into parse")
    r.write("tests/test_lib.py", r.git("show", "HEAD:tests/test_lib.py") + "\n\ndef test_strip():\n"
            "    assert parse('a, b') == ['a', 'b']\n")  # fmt: skip
    sha["pr1_tests"] = r.commit("Test that parse strips the parts")
    r.git("checkout", "-q", "main")
    sha["pr1"] = _merge(r, "parse", "Merge pull request #1 from ann/parse\n\nStrip whitespace around parsed parts")
    # #3 rebase-merged: two commits on the mainline, the second with its test
    lib = r.git("show", "HEAD:src/lib.py") + "\n"
    r.write("src/lib.py", lib.replace("return round(x)", "return int(round(x))"))
    sha["pr3_refactor"] = r.commit("Return an int from helper")
    r.write("src/lib.py", lib.replace("return round(x)", "return int(x + 0.5)"))
    r.write("tests/test_helper.py", "from lib import helper\n\n\ndef test_half():\n    assert helper(2.5) == 3\n")
    sha["pr3"] = r.commit("Round halves up in helper")
    # #4 squash-merged, then reverted by #5
    before = r.git("show", "HEAD:src/lib.py") + "\n"
    r.write("src/lib.py", before + "\n\ndef shout(s):\n    return s.upper()\n")
    r.write("tests/test_shout.py", "from lib import shout\n\n\ndef test_shout():\n    assert shout('a') == 'A'\n")
    sha["pr4"] = r.commit("Add shout (#4)")
    r.git("rm", "-q", "tests/test_shout.py")
    r.write("src/lib.py", before)
    sha["pr5"] = r.commit('Revert "Add shout (#4)" (#5)\n\nThis reverts commit ' + sha["pr4"] + ".\n")
    # #6: a binary file changes with code and tests
    r.write("assets/icon.png", PNG)
    r.write("src/icon.py", "ICON = 'assets/icon.png'\n")
    r.write("tests/test_icon.py", "from icon import ICON\n\n\ndef test_icon():\n    assert ICON.endswith('.png')\n")
    sha["pr6"] = r.commit("Ship an icon (#6)")
    return r, sha


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> tuple[Repo, dict[str, str], Repository]:
    r, sha = build_app(tmp_path_factory.mktemp("prs"))
    return r, sha, Repository("gh", "acme/app", str(r.path / ".git"))


def read(repo: Repository, cfg: CommitsConfig, plan_dir: Path) -> tuple[pa.Table, pa.Table, Counter]:
    results = [read_slice_table(sl, cfg) for sl in plan_slices([repo], cfg, plan_dir=plan_dir)]
    counters = Counter()
    for res in results:
        counters.update(res.counters)
    return pa.concat_tables([r.table for r in results]), pa.concat_tables([r.dropped for r in results]), counters


def repos_of(repo: Repository) -> dict[tuple[str, str], tuple[str, str]]:
    return {(repo.source, repo.repo): (repo.gitdir, "")}


def by_sha(table: pa.Table) -> dict[str, dict]:
    return {r[C.SHA]: r for r in table.to_pylist()}


def test_a_merge_is_one_change_holding_its_pull_requests_commits(app, tmp_path):
    r, sha, repo = app
    table, dropped, _ = read(repo, CommitsConfig(), tmp_path)
    assert dropped.num_rows == 0
    rows = by_sha(table)
    assert set(rows) == {sha[k] for k in ("initial", "pr2", "pr1", "pr3_refactor", "pr3", "pr4", "pr5", "pr6")}
    merge = rows[sha["pr1"]]
    assert merge[C.MAINLINE] and merge[C.PR_NUMBER] == 1 and merge[C.PARENTS][0] == sha["pr2"]
    # the diff against the first parent: the whole pull request, code and tests, not #2's change
    def body(diff: str) -> list[str]:  # git diff abbreviates a text file's index line, git log --binary does not
        return [line for line in diff.splitlines() if not line.startswith("index ")]

    assert body(merge[C.DIFF]) == body(r.git("diff", "--binary", "-M", sha["pr2"], sha["pr1"]))
    # the commits it landed (the candidates list them for a change that may be a task)
    assert [c["subject"] for c in candidates.landed_commits(repo.gitdir, merge[C.PARENTS])] == [
        "Strip the parts parse returns", "Merge branch 'main' into parse", "Test that parse strips the parts"]
    assert [rows[sha[k]][C.PR_NUMBER] for k in ("pr2", "pr3", "pr4", "pr5", "pr6")] == [2, None, 4, 5, 6]


def test_pull_requests_become_tasks_with_their_statements(app, tmp_path):
    _, sha, repo = app
    table, _, _ = read(repo, CommitsConfig(), tmp_path)
    result = candidates.run(table, TaskCandidatesConfig(), repos_of(repo))
    tasks = by_sha(result.table)
    assert set(tasks) == {sha[k] for k in ("pr1", "pr2", "pr3", "pr4", "pr5", "pr6")}
    reasons = dict(zip(result.dropped.column("path").to_pylist(), result.dropped.column("reason").to_pylist(), strict=True))
    assert reasons == {sha["initial"]: "root_commit", sha["pr3_refactor"]: "no_test_change"}
    pr1 = tasks[sha["pr1"]]
    assert pr1[C.INSTANCE_ID] == "acme__app-1" and pr1[C.STATEMENT_SOURCE] == "pull_request"
    assert pr1[C.PROBLEM_STATEMENT] == ("Strip whitespace around parsed parts\n\nCommits:\n- Strip the parts parse returns"
                                        "\n- Merge branch 'main' into parse\n- Test that parse strips the parts\n")
    # the split pull request: its code commit and its test commit make one task, tests apart
    assert "src/lib.py" in pr1[C.PATCH] and "tests/" not in pr1[C.PATCH] and "test_strip" in pr1[C.TEST_PATCH]
    pr2 = tasks[sha["pr2"]]
    assert (pr2[C.INSTANCE_ID], pr2[C.STATEMENT_SOURCE]) == ("acme__app-2", "pull_request")
    assert pr2[C.PROBLEM_STATEMENT] == "Handle empty input\n\n* Return no parts for an empty string\n* Test it\n"
    pr3 = tasks[sha["pr3"]]  # a rebase merge names no pull request: its commit message, its sha
    assert pr3[C.INSTANCE_ID] == f"acme__app-{sha['pr3'][:12]}" and pr3[C.STATEMENT_SOURCE] == "commits"
    assert tasks[sha["pr5"]][C.INSTANCE_ID] == "acme__app-5" and "-def shout" in tasks[sha["pr5"]][C.PATCH]
    pr6 = tasks[sha["pr6"]]
    assert "GIT binary patch" in pr6[C.PATCH] and "index 0000000000000000000000000000000000000000" in pr6[C.PATCH]
    dropped = candidates.run(table, TaskCandidatesConfig(binary="drop"), repos_of(repo)).dropped
    assert dict(zip(dropped.column("path").to_pylist(), dropped.column("reason").to_pylist(), strict=True))[
        sha["pr6"]] == "binary_patch"  # fmt: skip


def test_every_task_applies_at_its_base_with_git_and_a_broken_one_is_dropped(app, tmp_path):
    r, sha, repo = app
    table, _, _ = read(repo, CommitsConfig(), tmp_path)
    tasks = candidates.run(table, TaskCandidatesConfig(), repos_of(repo)).table
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(r.path), str(work)], check=True)
    for task in tasks.to_pylist():  # SWE-bench's order: the tests, then the gold patch, at the base commit
        subprocess.run(["git", "-C", str(work), "checkout", "-q", "-f", task[C.PARENTS][0]], check=True)
        subprocess.run(["git", "-C", str(work), "clean", "-qfdx"], check=True)
        for patch in (task[C.TEST_PATCH], task[C.PATCH]):
            subprocess.run(["git", "-C", str(work), "apply", "-"], input=patch.encode(), check=True)
    broken = table.to_pylist()
    row = next(x for x in broken if x[C.SHA] == sha["pr2"])
    assert "\n def helper(x):\n" in row[C.DIFF]
    row[C.DIFF] = row[C.DIFF].replace("\n def helper(x):\n", "\n def helper(y):\n")
    result = candidates.run(pa.Table.from_pylist([row], schema=table.schema), TaskCandidatesConfig(), repos_of(repo))
    assert result.table.num_rows == 0 and result.dropped.column("reason").to_pylist() == ["patch_does_not_apply"]
    assert "patch does not apply" in result.dropped.column("detail")[0].as_py()


def test_a_walk_of_every_parent_gives_the_edit_set_the_small_commits(app, tmp_path):
    _, sha, repo = app
    table, dropped, _ = read(repo, CommitsConfig(first_parent=False), tmp_path)
    # the branch's merge of main is off the mainline: its changes land with the mainline's merge
    assert dropped.column("path").to_pylist() == [sha["pr1_sync"]] and dropped.column("reason").to_pylist() == ["merge"]
    rows = by_sha(table)
    assert not rows[sha["pr1_code"]][C.MAINLINE] and rows[sha["pr1"]][C.MAINLINE]
    tasks = candidates.run(table, TaskCandidatesConfig(), repos_of(repo))
    reasons = Counter(tasks.dropped.column("reason").to_pylist())
    assert reasons["not_a_change"] == 2 and tasks.table.num_rows == 6
    edits = filters.run(table, CommitFiltersConfig(max_files_changed=10, require_imperative=False,
                                                   permissive_only=False, min_message_words=1))  # fmt: skip
    assert sha["pr1"] not in set(edits.table.column(C.SHA).to_pylist())
    assert {sha["pr1_code"], sha["pr1_tests"]} <= set(edits.table.column(C.SHA).to_pylist())
    assert dict(zip(edits.dropped.column("path").to_pylist(), edits.dropped.column("reason").to_pylist(),
                    strict=True))[sha["pr1"]] == "merge"  # fmt: skip


def test_a_bound_counts_the_changes_it_leaves_out(app, tmp_path):
    _, _, repo = app
    table, _, counters = read(repo, CommitsConfig(max_commits_per_repo=3), tmp_path)
    assert table.num_rows == 3 and counters["changes_left_out/acme/app"] == 5
    table, _, counters = read(repo, CommitsConfig(first_parent=False, max_commits_per_repo=3), tmp_path)
    assert counters["changes_left_out/acme/app"] == 5 and all(table.column(C.MAINLINE).to_pylist())
    _, _, counters = read(repo, CommitsConfig(), tmp_path)
    assert not [k for k in counters if k.startswith("changes_left_out/")]
    # a bound that names repositories bounds those alone (the shipped recipe's, for its own history)
    table, _, counters = read(repo, CommitsConfig(max_commits_per_repo={"acme/app": 3}), tmp_path)
    assert table.num_rows == 3 and counters["changes_left_out/acme/app"] == 5
    table, _, counters = read(repo, CommitsConfig(max_commits_per_repo={"codecorpus/codecorpus": 3}), tmp_path)
    assert table.num_rows == 8 and not [k for k in counters if k.startswith("changes_left_out/")]


# --- GitHub metadata ----------------------------------------------------------------------


def _pull(number, sha, title, body, created, merged, commits=None):
    record = {"number": number, "title": title, "body": body, "merge_commit_sha": sha, "created_at": created,
              "merged_at": merged, "state": "closed"}  # fmt: skip
    if commits is not None:
        record["commits"] = [{"sha": "0" * 40, "commit": {"author": {"date": d}}} for d in commits]
    return record


def write_metadata(root: Path, sha: dict[str, str]) -> Path:
    """``gh api --paginate`` output: pulls in two pages, issues (with a pull request's issue side),
    comments from the repository's comments endpoint, and a file that is not JSON."""
    folder = root / "gh" / "acme__app"
    folder.mkdir(parents=True)
    page1 = [
        _pull(1, sha["pr1"], "Strip parsed parts", "Parsing keeps spaces.\n\nFixes #10", "2024-01-02T09:00:00Z",
              "2024-01-05T12:00:00Z", commits=["2024-01-02T12:00:00Z", "2024-01-04T12:00:00Z"]),
        _pull(2, sha["pr2"], "Handle empty input", "closes acme/other#3", "2024-01-03T08:00:00Z",
              "2024-01-03T12:00:00Z"),
    ]  # fmt: skip
    page2 = [
        _pull(3, sha["pr3"], "Round halves up", "A better helper.", "2024-01-05T08:00:00Z", "2024-01-07T12:00:00Z"),
        _pull(7, None, "Closed unmerged", "Fixes #10", "2024-01-05T08:00:00Z", None),
        _pull(99, "f" * 40, "Lost", "Resolves #11", "2023-12-01T00:00:00Z", "2023-12-02T00:00:00Z"),
        {"number": "x", "title": 5, "merged_at": "yesterday", "merge_commit_sha": None},
    ]  # fmt: skip
    (folder / "pulls.json").write_text(json.dumps(page1) + "\n" + json.dumps(page2))
    issues = [
        {"number": 10, "title": "parse keeps spaces", "body": "parse('a, b') gives ['a', ' b'].", "comments": 2},
        {"number": 11, "title": "lost", "body": "", "comments": []},
        {"number": 1, "title": "Strip parsed parts", "body": "", "pull_request": {"url": "x"}, "comments": 0},
    ]  # fmt: skip
    (folder / "issues.json").write_text(json.dumps(issues))
    comments = [
        {"issue_url": "https://api.github.com/repos/acme/app/issues/10", "created_at": "2024-01-02T10:00:00Z",
         "body": "Strip them in parse itself."},
        {"issue_url": "https://api.github.com/repos/acme/app/issues/10", "created_at": "2024-01-06T10:00:00Z",
         "body": "Fixed by #1, thanks."},
    ]  # fmt: skip
    (folder / "comments.json").write_text(json.dumps(comments))
    (folder / "broken.json").write_text("[{")
    return root / "gh"


def test_metadata_gives_issue_statements_hints_and_pull_request_ids(app, tmp_path):
    _, sha, repo = app
    meta_dir = write_metadata(tmp_path, sha)
    github.load.cache_clear()
    cfg = CommitsConfig(github_metadata=str(meta_dir))
    table, dropped, counters = read(repo, cfg, tmp_path)
    drops = sorted(zip(dropped.column("reason").to_pylist(), dropped.column("path").to_pylist(), strict=True))
    assert drops == [("metadata_malformed", "broken.json"), ("metadata_malformed", "pulls.json#5"),
                     ("metadata_missing_commit", "pull/99")]  # fmt: skip
    assert counters[METADATA_RECORDS] == 3 and counters["commits"] == table.num_rows
    tasks = by_sha(candidates.run(table, TaskCandidatesConfig(), repos_of(repo)).table)
    pr1 = tasks[sha["pr1"]]
    assert pr1[C.STATEMENT_SOURCE] == "issue" and pr1[C.INSTANCE_ID] == "acme__app-1"
    assert pr1[C.PROBLEM_STATEMENT] == "parse keeps spaces\nparse('a, b') gives ['a', ' b'].\n"
    assert pr1[C.HINTS_TEXT] == "Strip them in parse itself."  # the comment after the first commit is not a hint
    assert pr1[C.LINKED_ISSUES] == ["acme/app#10"]
    # a cross-repository issue's text is not in this repository's metadata: the pull request's
    pr2 = tasks[sha["pr2"]]
    assert (pr2[C.STATEMENT_SOURCE], pr2[C.PROBLEM_STATEMENT]) == ("pull_request", "Handle empty input\n\ncloses acme/other#3\n")
    pr3 = tasks[sha["pr3"]]  # the rebase merge's last commit is the pull request's merge commit
    assert (pr3[C.INSTANCE_ID], pr3[C.STATEMENT_SOURCE]) == ("acme__app-3", "pull_request")
    assert pr3[C.CREATED_AT].isoformat().startswith("2024-01-05T08:00:00")
    assert pr3[C.MERGED_AT].isoformat().startswith("2024-01-07T12:00:00")
    linked = candidates.run(table, TaskCandidatesConfig(require_linked_issue=True), repos_of(repo))
    assert linked.table.column(C.INSTANCE_ID).to_pylist() == ["acme__app-1"]
    assert Counter(linked.dropped.column("reason").to_pylist())["no_linked_issue"] == 5


def test_task_files_carry_the_pull_request_and_swebench_reads_them(app, tmp_path):
    _, sha, repo = app
    github.load.cache_clear()
    table, _, _ = read(repo, CommitsConfig(github_metadata=str(write_metadata(tmp_path, sha))), tmp_path)
    tasks = candidates.run(table, TaskCandidatesConfig(), repos_of(repo)).table
    import datetime as dt

    cut = dt.datetime(2024, 1, 6, tzinfo=dt.timezone.utc)  # #3 was created before, merged after it
    files = swebench.write_task_files(tasks, TaskSetConfig(eval_after=cut), tmp_path / "out")
    train = [json.loads(x) for x in files["train"].read_text().splitlines()]
    held = [json.loads(x) for x in files["eval"].read_text().splitlines()]
    assert "acme__app-3" in {r["instance_id"] for r in held}  # split by merge time, not creation time
    for rec in train + held:
        assert swebench.check_instance(rec) == [] and rec["statement_source"] in C.STATEMENT_SOURCES
    pr1 = next(r for r in train if r["instance_id"] == "acme__app-1")
    assert pr1["created_at"] == "2024-01-02T09:00:00Z" and pr1["hints_text"] == "Strip them in parse itself."
    assert pr1["pull_number"] == 1 and pr1["linked_issues"] == ["acme/app#10"]
    utils = pytest.importorskip("swebench.harness.utils")
    instance_type = pytest.importorskip("swebench.types").SWEbenchInstance
    ids = [r["instance_id"] for r in train]
    instances = utils.load_swebench_dataset(str(files["train"]), instance_ids=ids)
    assert [i["instance_id"] for i in instances] == ids
    fields = typing.get_type_hints(instance_type)
    for inst in instances:
        assert {k: type(inst[k]) for k in fields} == fields


def test_closing_keywords_and_malformed_records():
    assert github.linked_issues("FIXED: #4. Closed #5, resolve o/r#6", "a/b") == [("a/b", 4), ("a/b", 5), ("o/r", 6)]
    assert github.linked_issues("fixing #4, closes#5, #6 fixes nothing", "a/b") == []
    meta = github.build([("f#0", {"number": 3, "title": "t", "body": None, "comments": "many"}),
                         ("f#1", ["not", "an", "object"]),
                         ("f#2", {"number": 4, "merged_at": "2024-01-01T00:00:00Z", "merge_commit_sha": "xyz",
                                  "created_at": "2024-01-01T00:00:00Z"})])  # fmt: skip
    assert [b[:2] for b in meta.bad] == [("f#0", "metadata_malformed"), ("f#1", "metadata_malformed"),
                                         ("f#2", "metadata_malformed")]  # fmt: skip


def test_a_pull_request_merged_into_a_development_branch_is_a_change(tmp_path):
    """GitHub merged it into ``develop``, which a release merge brought to the mainline later: the
    first-parent walk sees the release only; a walk of every parent sees the pull request's merge."""
    r = init(tmp_path / "dev")
    r.write("src/a.py", "X = 1\n")
    r.write("tests/test_a.py", "from a import X\n\n\ndef test_x():\n    assert X\n")
    r.commit("Start the project")
    r.git("checkout", "-q", "-b", "develop")
    r.git("checkout", "-q", "-b", "fix")
    r.write("src/a.py", "X = 2\n")
    r.commit("Set X to two")
    r.write("tests/test_a.py", "from a import X\n\n\ndef test_x():\n    assert X == 2\n")
    r.commit("Test that X is two")
    r.git("checkout", "-q", "develop")
    pr = _merge(r, "fix", "Merge pull request #8 from ann/fix\n\nMake X two")
    r.git("checkout", "-q", "main")
    r.write("README.md", "# dev\n")
    r.commit("Add a readme")
    release = _merge(r, "develop", "Merge branch 'develop'")
    repo = Repository("gh", "acme/dev", str(r.path / ".git"))
    table, _, _ = read(repo, CommitsConfig(), tmp_path / "fp")
    assert pr not in set(table.column(C.SHA).to_pylist())
    tasks = by_sha(candidates.run(table, TaskCandidatesConfig(), repos_of(repo)).table)
    assert tasks[release][C.STATEMENT_SOURCE] == "commits" and tasks[release][C.PR_NUMBER] is None
    table, dropped, _ = read(repo, CommitsConfig(first_parent=False), tmp_path / "all")
    assert dropped.num_rows == 0
    row = by_sha(table)[pr]
    assert not row[C.MAINLINE] and row[C.PR_NUMBER] == 8
    tasks = by_sha(candidates.run(table, TaskCandidatesConfig(), repos_of(repo)).table)
    assert [c["subject"] for c in tasks[pr][C.PR_COMMITS]] == ["Set X to two", "Test that X is two"]
    assert tasks[pr][C.INSTANCE_ID] == "acme__dev-8" and tasks[pr][C.STATEMENT_SOURCE] == "pull_request"
    assert tasks[pr][C.PROBLEM_STATEMENT].startswith("Make X two\n\nCommits:\n- Set X to two\n")
    assert release in tasks and len(tasks) == 2  # the pull request's own commits are the edit set's


def _stage_stats(rows_in: int, rows_out: int, counters: dict | None = None) -> dict:
    return {"rows_in": rows_in, "rows_out": rows_out, "dropped": {"x": rows_in - rows_out}, "shards": 1,
            "bytes_in": 0, "bytes_out": 0, "tokens_in": 0, "tokens_out": 0, "langs_out": {},
            "counters": counters or {}}  # fmt: skip


def test_the_report_and_the_summary_show_both_paths_and_what_a_bound_left_out(tmp_path, capsys):
    from types import SimpleNamespace

    from codecorpus import cli, schema
    from codecorpus.reports import tasks as tasks_report
    from codecorpus.reports.tables import RunData

    stats = {
        "commits": _stage_stats(12, 9, {"commits": 10, "metadata_records": 2, "changes_left_out/acme/app": 5}),
        "commit_filters": _stage_stats(9, 4), "commit_dedup": _stage_stats(4, 3),
        "task_candidates": _stage_stats(9, 2), "edit_set": _stage_stats(3, 3),
        "task_outputs": _stage_stats(2, 2, {"tasks_train": 2, "tasks_eval": 0}),
    }  # fmt: skip
    data = RunData(schema.RunPaths(tmp_path), "r", {}, list(stats), stats)
    funnel = tasks_report.tasks_funnel(data).to_pylist()
    steps = {(r["path"], r["what"]): r["count"] for r in funnel}
    assert steps[("source", "commits listed")] == 10 and steps[("source", "metadata records dropped")] == 2
    assert steps[("tasks", "task candidates")] == 2 and steps[("edit set", "filtered (CommitPackFT rules)")] == 4
    assert [r["path"] for r in funnel] == sorted([r["path"] for r in funnel], key=["source", "tasks", "edit set"].index)
    assert tasks_report.left_out(data).to_pylist() == [{"repo": "acme/app", "changes_left_out": 5}]
    result = SimpleNamespace(run_dir=tmp_path, seconds=1.0, stages=[
        SimpleNamespace(name=name, stats=s, seconds=0.1) for name, s in stats.items()])  # fmt: skip
    cli.print_summary(result)
    assert "changes left out by a bound (since / until / max_commits_per_repo): acme/app 5" in capsys.readouterr().out


def test_a_pull_requests_commits_land_with_its_merge_so_the_edit_set_holds_them_out(app, tmp_path):
    """The branch's commits were made before the cut, the merge after it: an evaluation task's
    commits are no training examples."""
    import datetime as dt

    from codecorpus.tasks import edits
    from codecorpus.tasks.config import EditSetConfig

    _, sha, repo = app
    table, _, _ = read(repo, CommitsConfig(first_parent=False), tmp_path)
    rows = by_sha(table)
    merged = rows[sha["pr1"]][C.COMMITTER_DATE]
    assert rows[sha["pr1_code"]][C.COMMITTER_DATE] < merged
    assert rows[sha["pr1_code"]][C.LANDED_AT] == rows[sha["pr1_tests"]][C.LANDED_AT] == merged
    assert rows[sha["pr2"]][C.LANDED_AT] == rows[sha["pr2"]][C.COMMITTER_DATE]  # on the mainline: its own
    cut = merged - dt.timedelta(seconds=1)
    result = edits.run_training(table, EditSetConfig(), cut)
    held = set(result.dropped.filter(pa.compute.equal(result.dropped.column("reason"), "eval_holdout"))
               .column("path").to_pylist())  # fmt: skip
    assert {sha["pr1_code"], sha["pr1_tests"], sha["pr1"]} <= held and sha["pr2"] not in held


def test_a_pull_request_number_named_twice_keeps_its_ids_unique():
    from codecorpus.tasks import bodies

    lines = [swebench.task_line({"instance_id": iid, "commit": sha}) for iid, sha in
             (("acme__app-1", "a" * 40), ("acme__app-2", "b" * 40), ("acme__app-2", "c" * 40))]  # fmt: skip
    ids = [json.loads(x)["instance_id"] for x in bodies.unique_ids(iter(lines))]
    assert ids == ["acme__app-1", "acme__app-2", f"acme__app-2-{'c' * 12}"]


def test_new_metadata_changes_the_plans_hash(app, tmp_path):
    """Without it, a rerun after fetching new metadata would skip every stage (same commits)."""
    from codecorpus.config import load_recipe_data
    from codecorpus.runtime.executor import Executor

    r, sha, _ = app
    meta = write_metadata(tmp_path, sha)

    def commits_hash() -> str:
        data = {"name": "m", "sources": [{"type": "git", "name": "gh", "path": str(r.path), "repo": "acme/app"}],
                "stages": {"commits": {"github_metadata": str(meta)}, "task_candidates": {},
                           "task_outputs": {}}}  # fmt: skip
        return Executor(load_recipe_data(data), tmp_path / "run", quiet=True).stage_run("commits").hashes["commits"]

    before = commits_hash()
    assert commits_hash() == before
    (meta / "acme__app" / "issues.json").write_text("[]")
    assert commits_hash() != before


def test_closing_keywords_in_the_pull_requests_commit_messages_link_too(app, tmp_path):
    """SWE-bench reads the commits' messages beside the title and body: the metadata's commit list,
    and the landed commit's own message."""
    _, sha, repo = app
    folder = tmp_path / "gh" / "acme__app"
    folder.mkdir(parents=True)
    pull3 = _pull(3, sha["pr3"], "Round halves up", "", "2024-01-05T08:00:00Z", "2024-01-07T12:00:00Z",
                  commits=["2024-01-05T09:00:00Z"])  # fmt: skip
    pull3["commits"][0]["commit"]["message"] = "Round halves up\n\nfixes #10"
    pull2 = _pull(2, sha["pr2"], "Handle empty input", "", "2024-01-03T08:00:00Z", "2024-01-03T12:00:00Z")
    issue = {"number": 10, "title": "helper rounds halves down", "body": "helper(2.5) == 2", "comments": []}
    (folder / "all.json").write_text(json.dumps({"pulls": [pull3, pull2], "issues": [issue]}))
    github.load.cache_clear()
    table, dropped, _ = read(repo, CommitsConfig(github_metadata=str(tmp_path / "gh")), tmp_path)
    assert dropped.num_rows == 0
    tasks = by_sha(candidates.run(table, TaskCandidatesConfig(), repos_of(repo)).table)
    assert tasks[sha["pr3"]][C.STATEMENT_SOURCE] == "issue" and tasks[sha["pr3"]][C.LINKED_ISSUES] == ["acme/app#10"]
    assert tasks[sha["pr2"]][C.STATEMENT_SOURCE] == "pull_request"  # its squash message closes nothing


def test_exact_duplicate_tasks_keep_the_one_merged_first(app, tmp_path):
    """A fork that shares the repository's history gives the same tasks: one of each is kept, by merge
    time, then repository name (the shared commits have the same times)."""
    from codecorpus.tasks import unique

    r, _, repo = app
    fork_path = tmp_path / "fork"
    subprocess.run(["git", "clone", "-q", "--bare", str(r.path), str(fork_path)], check=True)
    fork = Repository("gh", "zed/app", str(fork_path))
    shards = []
    for rep in (fork, repo):  # the fork's shard first: the keeper does not depend on shard order
        table, _, _ = read(rep, CommitsConfig(), tmp_path / rep.repo.replace("/", "_"))
        shards.append(candidates.run(table, TaskCandidatesConfig(), repos_of(rep)).table)
    keys = pa.concat_tables([unique.task_keys(t, i)[0] for i, t in enumerate(shards)])
    decided = unique.decide(keys, 2)
    kept_fork, dropped_fork = unique.split_duplicates(shards[0], decided[0])
    kept_app, dropped_app = unique.split_duplicates(shards[1], decided[1])
    assert kept_fork.num_rows == 0 and dropped_fork.num_rows == shards[0].num_rows == kept_app.num_rows == 6
    assert dropped_app.num_rows == 0 and set(dropped_fork.column("reason").to_pylist()) == {"duplicate_task"}
    assert sorted(dropped_fork.column("dup_of").to_pylist()) == sorted(kept_app.column(C.INSTANCE_ID).to_pylist())


def test_metadata_read_from_s3(app, tmp_path, s3_server, monkeypatch):
    """The same metadata folder on S3 (boto3's usual credentials: here the environment's) reads the same."""
    from codecorpus.ingest import s3
    from conftest import make_bucket

    _, sha, repo = app
    local = write_metadata(tmp_path, sha)
    client = make_bucket(s3_server, "meta")
    for f in sorted((local / "acme__app").iterdir()):
        client.put_object(Bucket="meta", Key=f"gh/acme__app/{f.name}", Body=f.read_bytes())
    for key, value in (("AWS_ENDPOINT_URL", s3_server["endpoint_url"]), ("AWS_ACCESS_KEY_ID", s3_server["access_key_id"]),
                       ("AWS_SECRET_ACCESS_KEY", s3_server["secret_access_key"]), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(key, value)
    s3.client.cache_clear()
    github.load.cache_clear()
    try:
        from_s3 = read(repo, CommitsConfig(github_metadata="s3://meta/gh"), tmp_path / "s3")
        github.load.cache_clear()
        from_disk = read(repo, CommitsConfig(github_metadata=str(local)), tmp_path / "disk")
    finally:
        s3.client.cache_clear()
        github.load.cache_clear()
    assert from_s3[0].equals(from_disk[0]) and from_s3[1].num_rows == from_disk[1].num_rows == 3
    assert github.fingerprint("s3://meta/gh", "acme/app")  # the plan's hash sees the files


def test_the_tasks_own_rules_drop_docs_only_generated_large_and_terse_changes(tmp_path):
    r = init(tmp_path / "rules")
    r.write("src/a.py", "".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(30)))
    r.write("tests/test_a.py", "def test_a():\n    assert True\n")
    r.commit("Start the project")
    sha = {}
    r.write("docs/guide.md", "# Guide\n\nUse f1.\n")
    r.write("tests/test_a.py", "def test_a():\n    assert 1\n")
    sha["docs"] = r.commit("Document f1 and tighten its test (#1)")
    r.write("src/a_pb2.py", "# protoc output\nX = 1\n")
    r.write("src/a.py", r.git("show", "HEAD:src/a.py") + "\n\ndef g():\n    return 0\n")
    r.write("tests/test_a.py", "def test_a():\n    assert 2\n")
    sha["generated"] = r.commit("Add g and its generated messages (#2)")
    text = r.git("show", "HEAD:src/a.py").replace("return 1\n", "return -1\n").replace("return 28\n", "return -28\n")
    r.write("src/a.py", text + "\n")
    r.write("tests/test_a.py", "def test_a():\n    assert 3\n")
    sha["hunks"] = r.commit("Negate f1 and f28 so that the two ends agree (#3)")
    r.write("src/a.py", r.git("show", "HEAD:src/a.py") + "\n\ndef h():\n    return 1\n")
    r.write("tests/test_a.py", "def test_a():\n    assert 4\n")
    sha["terse"] = r.commit("h (#4)")
    repo = Repository("gh", "acme/rules", str(r.path / ".git"))
    table, _, _ = read(repo, CommitsConfig(), tmp_path / "plan")
    result = candidates.run(table, TaskCandidatesConfig(max_patch_hunks=1), repos_of(repo))
    reasons = dict(zip(result.dropped.column("path").to_pylist(), result.dropped.column("reason").to_pylist(), strict=True))
    assert {k: reasons.get(v) for k, v in sha.items()} == {
        "docs": "docs_only", "generated": "generated_files", "hunks": "too_many_hunks", "terse": "statement_too_short"}
    assert result.table.num_rows == 0
    loose = candidates.run(table, TaskCandidatesConfig(drop_generated=False, min_statement_chars=1), repos_of(repo))
    assert set(loose.table.column(C.SHA).to_pylist()) == {sha["generated"], sha["hunks"], sha["terse"]}

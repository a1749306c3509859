"""commit_filters, commit_dedup, task_candidates, the edit set and tasks.jsonl, on git-made repositories."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import typing
from collections import Counter

import pyarrow as pa
import pytest
from tasks_repos import SQRT_FIXED, bare_clone, fork, fork_repo, init, project, project_repo

from codecorpus import schema
from codecorpus.config import SftRenderConfig, TokenizerConfig
from codecorpus.sft import examples as sft_render
from codecorpus.tasks import candidates, dedup, edits, filters, swebench
from codecorpus.tasks import columns as C
from codecorpus.tasks.commits import Repository, plan_slices, read_slice_table
from codecorpus.tasks.config import (
    CommitDedupConfig,
    CommitFiltersConfig,
    CommitsConfig,
    EditSetConfig,
    TaskCandidatesConfig,
    TaskSetConfig,
)
from codecorpus.tokenize.tokenizer import load_tokenizer

__all__ = ["fork", "fork_repo", "project", "project_repo"]  # fixtures


def commits_of(*repos: Repository) -> pa.Table:
    cfg = CommitsConfig()
    return pa.concat_tables([read_slice_table(sl, cfg).table for sl in plan_slices(list(repos), cfg)])


@pytest.fixture(scope="module")
def project_commits(project_repo) -> pa.Table:
    return commits_of(project_repo)


def subjects(table: pa.Table) -> list[str]:
    return table.column(C.SUBJECT).to_pylist()


# --- commit_filters -------------------------------------------------------------------


def test_imperative_boilerplate_urls_and_issue_refs():
    assert filters.first_word("feat(api)!: Add pagination") == "add"
    assert filters.first_word("Added pagination") == "added"
    s = filters.message_scores("Fix #12: see https://example.com/x", "Closes GH-3 and JIRA-44")
    assert (s[C.IMPERATIVE], s[C.HAS_URL], s[C.ISSUE_REFS]) == (True, True, 3)
    assert filters.boilerplate_kind("v1.2.3") == "bump_version"
    assert filters.boilerplate_kind("Merge pull request #5 from a/b") == "merge"
    assert filters.boilerplate_kind("Fix the README parser") is None


def test_commit_filters_annotate_keeps_all_filter_drops_with_reasons(project_commits):
    annotated = filters.run(project_commits, CommitFiltersConfig(mode="annotate"))
    assert annotated.table.num_rows == project_commits.num_rows and annotated.dropped.num_rows == 0
    scores = {r[C.SUBJECT]: r for r in annotated.table.to_pylist()}
    assert scores["Fix division by zero in divide"][C.FILES_CHANGED] == 2
    assert scores["Relicense under Apache-2.0"][C.LICENSE_PERMISSIVE] is True
    out = filters.run(project_commits, CommitFiltersConfig(max_files_changed=2))
    assert out.table.num_rows + out.dropped.num_rows == project_commits.num_rows
    reasons = dict(zip(out.dropped.column("path").to_pylist(), out.dropped.column("reason").to_pylist(), strict=True))
    by_sha = dict(zip(project_commits.column(C.SHA).to_pylist(), subjects(project_commits), strict=True))
    named = {by_sha[sha]: r for sha, r in reasons.items()}
    assert named["Corrige la détection des paramètres réglés à la main: éviter les valeurs répétées déjà vues"] \
        == "not_imperative"
    assert "Fix division by zero in divide" in subjects(out.table)
    strict = filters.run(project_commits, CommitFiltersConfig(max_files_changed=1))
    assert "Fix division by zero in divide" not in subjects(strict.table)
    only_go = filters.run(project_commits, CommitFiltersConfig(max_files_changed=5, langs=("Go",)))
    assert only_go.table.num_rows == 0
    assert set(only_go.dropped.column("reason").to_pylist()) >= {"lang_not_allowed"}


# --- commit_dedup ---------------------------------------------------------------------


def test_cherry_pick_and_identical_shas_across_forks_count_once(project_repo, fork_repo, project):
    table = commits_of(project_repo, fork_repo)
    result = dedup.run(table, CommitDedupConfig(near=False))
    assert result.table.num_rows + result.dropped.num_rows == table.num_rows
    kept_shas = result.table.column(C.SHA).to_pylist()
    assert len(kept_shas) == len(set(kept_shas)) == commits_of(project_repo).num_rows
    original = project.git("rev-parse", "HEAD")
    picks = [d for d in result.dropped.to_pylist() if d["repo"] == "acme-fork/proj" and d["path"] != original]
    assert len(picks) == 1 and picks[0]["reason"] == "duplicate_exact"
    keeper = result.table.filter(pa.compute.equal(result.table.column(C.SHA), original))
    assert picks[0]["dup_of"] == keeper.column(schema.ID)[0].as_py()  # the original, not the later cherry-pick
    assert keeper.column(C.DUP_CLUSTER_SIZE)[0].as_py() == 2  # the original and the cherry-pick


def test_patch_id_is_gits(project_commits, project):
    row = project_commits.slice(0, 1).to_pylist()[0]
    show = subprocess.run(["git", "-C", str(project.path), "show", row[C.SHA]], capture_output=True, check=True).stdout
    git_pid = subprocess.run(["git", "patch-id", "--stable"], input=show, capture_output=True, check=True).stdout
    assert dedup.patch_ids([row[C.SHA]], [row[C.DIFF]]) == [git_pid.split()[0].decode()]


def test_near_duplicate_diffs_cluster(project_commits):
    row = project_commits.filter(pa.compute.equal(project_commits.column(C.SUBJECT), "Add a calculator with tests"))
    copy = row.to_pylist()[0]
    copy.update({C.SHA: "f" * 40, schema.ID: "copy", schema.REPO: "other/proj",
                 C.DIFF: copy[C.DIFF].replace("return a + b", "return a + b  # sum")})  # fmt: skip
    table = pa.concat_tables([row, pa.Table.from_pylist([copy], schema=row.schema)])
    result = dedup.run(table, CommitDedupConfig(threshold=0.7))
    assert result.dropped.column("reason").to_pylist() == ["duplicate_near"]
    assert dedup.run(table, CommitDedupConfig(near=False)).dropped.num_rows == 0


# --- task_candidates ------------------------------------------------------------------


@pytest.mark.parametrize(("path", "is_test"), [
    ("tests/test_x.py", True), ("pkg/x_test.py", True), ("conftest.py", True), ("svc/handler_test.go", True),
    ("web/app.spec.ts", True), ("web/app.test.jsx", True), ("src/test/java/a/FooTest.java", True),
    ("spec/models/user_spec.rb", True), ("src/__tests__/a.js", True), ("lib/foo_unittest.cc", True),
    ("src/main/java/a/Foo.java", False), ("src/contest.py", False), ("web/app.ts", False), ("testing.md", False),
])  # fmt: skip
def test_test_files_per_language(path, is_test):
    assert candidates.is_test_path(path, frozenset(TaskCandidatesConfig().test_dirs)) is is_test


def test_candidates_split_patch_and_test_patch_that_git_applies(project_commits, project, tmp_path):
    result = candidates.run(project_commits, TaskCandidatesConfig())
    assert result.table.num_rows + result.dropped.num_rows == project_commits.num_rows
    assert sorted(subjects(result.table)) == ["Add a square root", "Fix division by zero in divide",
                                              "Reject negative numbers in root"]
    # the first commit changes tests and code too, but has no base commit to apply at
    assert "root_commit" in result.dropped.column(schema.REASON).to_pylist()
    row = next(r for r in result.table.to_pylist() if r[C.SUBJECT] == "Reject negative numbers in root")
    assert row[C.TEST_FILES] == ["tests/test_sqrt.py"] and row[C.LANGS] == ["Python"]
    assert (row[C.PATCH_FILES], row[C.PATCH_HUNKS], row[C.PATCH_LINES]) == (1, 1, 2)
    # SWE-bench's harness applies test_patch and patch with git apply on the base commit
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(project.path), str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "checkout", "-q", row[C.PARENTS][0]], check=True)
    for patch in (row[C.TEST_PATCH], row[C.PATCH]):
        subprocess.run(["git", "-C", str(work), "apply", "-"], input=patch.encode(), check=True)
    assert (work / "src/sqrt.py").read_text() == SQRT_FIXED
    diff = subprocess.run(["git", "-C", str(work), "diff", row[C.SHA], "--stat"], capture_output=True, check=True)
    assert diff.stdout == b""
    assert Counter(result.dropped.column("reason").to_pylist())["no_test_change"] >= 3


# --- edit set -------------------------------------------------------------------------


def test_after_images_rebuilt_from_before_and_diff_equal_gits_blobs(project_commits, project):
    checked = 0
    for row in project_commits.to_pylist():
        for path, text in edits.after_files(row).items():
            blob = next(f["new_oid"] for f in row[C.FILES] if f["path"] == path)
            if text is not None:
                git_text = subprocess.run(["git", "-C", str(project.path), "cat-file", "blob", blob],
                                          capture_output=True, check=True).stdout.decode()  # fmt: skip
                assert text == git_text, (row[C.SUBJECT], path)
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("target", ["diff", "files"])
def test_edit_examples_render_with_loss_on_the_target_only(project_commits, target):
    out = edits.run(project_commits, EditSetConfig(target=target))
    assert out.table.num_rows + out.dropped.num_rows == project_commits.num_rows
    assert out.table.schema.equals(schema.TRACE_SCHEMA)
    row = next(r for r in out.table.to_pylist() if "Fix division" in r[schema.TRACE_MESSAGES][1]["content"])
    user, answer = row[schema.TRACE_MESSAGES][1]["content"], row[schema.TRACE_MESSAGES][2]["content"]
    assert "### src/calc.py" in user and "### tests/test_calc.py" in user and "def divide(a, b):" in user
    assert ("@@ " in answer) is (target == "diff")
    assert row[schema.TRACE_TASK_ID] == "acme__proj-" + row[schema.PATH][:12]
    tok_cfg = TokenizerConfig(builtin="qwen2.5")
    rendered = sft_render.run(out.table, SftRenderConfig(), tok_cfg, 32768)
    assert rendered.dropped.num_rows == 0 and rendered.table.num_rows == out.table.num_rows
    tok = load_tokenizer(tok_cfg)
    first = rendered.table.slice(0, 1).to_pylist()[0]
    trained = [t for t, m in zip(first["tokens"], first["loss_mask"], strict=True) if m]
    msgs = out.table.slice(0, 1).to_pylist()[0][schema.TRACE_MESSAGES]
    assert tok.decode(trained).startswith(msgs[-1]["content"])  # the target, then the end-of-turn marker


def test_edit_examples_of_code_that_spells_special_tokens_are_escaped_not_dropped(tmp_path):
    repo = init(tmp_path / "chat")
    repo.write("chat.py", 'START, END = "<|im_start|>", "<|im_end|>"\n\n\ndef turn(role, text):\n    return START + role\n')
    repo.commit("Add a chat turn renderer")
    repo.write("chat.py", 'START, END = "<|im_start|>", "<|im_end|>"\n\n\ndef turn(role, text):\n'
               '    return START + role + "\\n" + text + END  # was missing <|im_end|>\n')
    repo.commit("Close each turn with its end marker")
    table = commits_of(Repository("fixture", "acme/chat", str(repo.path / ".git")))
    out = edits.run(table, EditSetConfig(target="diff"))
    assert out.table.num_rows == 2
    tok_cfg = TokenizerConfig(builtin="qwen2.5")
    rendered = sft_render.run(out.table, SftRenderConfig(), tok_cfg, 32768)  # edit examples escape by default
    assert rendered.dropped.num_rows == 0 and rendered.table.num_rows == 2
    texts = [m["content"] for r in out.table.to_pylist() for m in r[schema.TRACE_MESSAGES]]
    in_data = sum(t.count("<|im_start|>") + t.count("<|im_end|>") for t in texts)
    assert rendered.counters["special_tokens_escaped"] == in_data >= 6
    tok = load_tokenizer(tok_cfg)
    specials = set(tok.special_tokens.values())
    for row, trace in zip(rendered.table.to_pylist(), out.table.to_pylist(), strict=True):
        trained = [t for t, m in zip(row["tokens"], row["loss_mask"], strict=True) if m]
        assert [t for t in trained if t in specials] == [tok.special_tokens["<|im_end|>"]]  # the turn's own end
        assert tok.decode(trained) == trace[schema.TRACE_MESSAGES][-1]["content"] + "<|im_end|>\n"
        assert sum(t in specials for t in row["tokens"]) == 2 * len(trace[schema.TRACE_MESSAGES])  # template's only
    dropping = sft_render.run(out.table, SftRenderConfig(special_tokens="drop"), tok_cfg, 32768)
    assert dropping.dropped.column(schema.REASON).to_pylist() == ["special_token_text"] * 2


# --- tasks.jsonl ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def task_table(project_commits) -> pa.Table:
    return candidates.run(project_commits, TaskCandidatesConfig()).table


def test_tasks_jsonl_is_swebench_instances_and_the_time_split_holds_out(task_table, tmp_path):
    cut = dt.datetime(2024, 1, 19, tzinfo=dt.timezone.utc)
    files = swebench.write_task_files(task_table, TaskSetConfig(eval_after=cut), tmp_path)
    train = [json.loads(line) for line in files["train"].read_text().splitlines()]
    held = [json.loads(line) for line in files["eval"].read_text().splitlines()]
    assert len(train) == 1 and len(held) == 2
    for rec in train + held:
        assert swebench.check_instance(rec) == []
        assert list(rec)[:12] == list(swebench.SWEBENCH_FIELDS)
        assert rec["FAIL_TO_PASS"] == "[]" and rec["PASS_TO_PASS"] == "[]"
    assert all(r["created_at"] <= "2024-01-19T00:00:00Z" < h["created_at"] for r in train for h in held)
    assert {h["instance_id"] for h in held}.isdisjoint(r["instance_id"] for r in train)
    edit_train, edit_eval = swebench.time_split(task_table, cut)
    assert set(edit_eval.column(C.SHA).to_pylist()) == {h["commit"] for h in held}
    assert set(edit_train.column(C.SHA).to_pylist()).isdisjoint(h["commit"] for h in held)
    again = swebench.write_task_files(task_table, TaskSetConfig(eval_after=cut), tmp_path / "again")
    assert again["train"].read_bytes() == files["train"].read_bytes()


def test_check_instance_finds_schema_problems():
    bad = {k: "" for k in swebench.SWEBENCH_FIELDS} | {"FAIL_TO_PASS": ["a"], "instance_id": "x-1", "repo": "o/r"}
    problems = swebench.check_instance(bad)
    assert any("FAIL_TO_PASS is list" in p for p in problems) and any("instance_id" in p for p in problems)


def test_swebench_own_loader_reads_the_file(task_table, tmp_path):
    """SWE-bench's harness reads tasks.jsonl: its dataset loader, its gold-predictions reader, and every
    record has the fields and types of its ``SWEbenchInstance``."""
    utils = pytest.importorskip("swebench.harness.utils")  # the dev extra installs it
    instance_type = pytest.importorskip("swebench.types").SWEbenchInstance
    path = swebench.write_task_files(task_table, TaskSetConfig(), tmp_path)["train"]
    ids = [json.loads(x)["instance_id"] for x in path.read_text().splitlines()]
    instances = utils.load_swebench_dataset(str(path), instance_ids=ids)
    assert [i["instance_id"] for i in instances] == ids and len(ids) == 3
    fields = typing.get_type_hints(instance_type)
    for inst in instances:
        assert {k: type(inst[k]) for k in fields} == fields, inst["instance_id"]
        assert json.loads(inst["FAIL_TO_PASS"]) == [] == json.loads(inst["PASS_TO_PASS"])
    gold = utils.get_predictions_from_file("gold", str(path), "test")
    assert [(g["instance_id"], g["model_patch"]) for g in gold] == [(i["instance_id"], i["patch"]) for i in instances]


def test_own_history_funnel(tmp_path):
    """The project's own history: its merges of branches are changes holding the branch's commits;
    both products' paths conserve rows; every task applies at its base (git apply --check)."""
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, check=False,
                         cwd=__file__.rsplit("/", 1)[0])  # fmt: skip
    if top.returncode != 0:
        pytest.skip("the tests are not inside a git repository")
    bare = bare_clone(top.stdout.decode().strip(), tmp_path / "own.git")
    if (bare / "shallow").exists():
        pytest.skip("a shallow clone: its boundary commits have no parents to diff against")
    own = Repository("self", "codecorpus/codecorpus", str(bare))
    table = commits_of(own)
    git = ["git", f"--git-dir={bare}"]
    merges = subprocess.run([*git, "rev-list", "--first-parent", "--merges", "HEAD"], capture_output=True,
                            check=True).stdout.decode().split()  # fmt: skip
    rows = {r[C.SHA]: r for r in table.select([C.SHA, C.PARENTS, C.MAINLINE]).to_pylist()}
    assert all(rows[m][C.MAINLINE] and len(rows[m][C.PARENTS]) == 2 for m in merges if m in rows)
    edits = filters.run(table, CommitFiltersConfig(max_files_changed=60, max_code_before_bytes=150_000,
                                                   require_imperative=False, permissive_only=False))  # fmt: skip
    assert not set(merges) & set(edits.table.column(C.SHA).to_pylist())  # the edit set's rules drop merges
    deduped = dedup.run(edits.table, CommitDedupConfig())
    assert deduped.table.num_rows + deduped.dropped.num_rows == edits.table.num_rows
    cands = candidates.run(table, TaskCandidatesConfig(), {(own.source, own.repo): (own.gitdir, "")})
    assert cands.table.num_rows + cands.dropped.num_rows == table.num_rows
    assert "patch_does_not_apply" not in cands.dropped.column(schema.REASON).to_pylist()
    records = swebench.task_records(cands.table, TaskSetConfig())[0]
    assert records and len({r["instance_id"] for r in records}) == len(records)
    for rec in records:
        assert swebench.check_instance(rec) == []
        assert not any(candidates.is_test_path(p, frozenset(TaskCandidatesConfig().test_dirs))
                       for p in re.findall(r"^diff --git a/(\S+)", rec["patch"], re.M))  # fmt: skip
    landed = [r for r in records if r["commit"] in set(merges)]
    assert all(r["pr_commits"] >= 1 and "Commits:\n- " in r["problem_statement"] for r in landed)


def test_evaluation_patches_decontaminate_a_pretraining_shard(task_table, tmp_path):
    from codecorpus.config import BenchmarkFile, DecontamConfig, FiltersConfig
    from codecorpus.filters import decontam
    from codecorpus.filters import stage as pretraining_filters

    cut = dt.datetime(2024, 1, 19, tzinfo=dt.timezone.utc)
    eval_file = swebench.write_task_files(task_table, TaskSetConfig(eval_after=cut), tmp_path)["eval"]
    bench = BenchmarkFile(name="repo-tasks-eval", path=str(eval_file), text_fields=(swebench.ADDED_TEXT,),
                          id_field="instance_id")  # fmt: skip
    cfg = FiltersConfig(decontam=DecontamConfig(humaneval=False, files=(bench,)), redact=None)
    pasted = "import math\n\n\ndef safe_root(x):\n    if x < 0:\n        raise ValueError(x)\n    return math.sqrt(x)\n"
    clean = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    texts = [pasted, clean]
    docs = pa.table({
        schema.ID: ["pasted", "clean"], schema.SOURCE: ["s"] * 2, schema.REPO: ["r"] * 2,
        schema.PATH: ["a.py", "b.py"], schema.REVISION: ["v"] * 2, schema.LICENSE: ["MIT"] * 2,
        schema.LANG: ["Python"] * 2, schema.KIND: ["code"] * 2, schema.TEXT: texts,
        schema.BYTES: [len(t) for t in texts], schema.CONTENT_HASH: [schema.content_hash(t.encode()) for t in texts],
        schema.ENCODING: ["utf-8"] * 2,
    }, schema=schema.DOC_SCHEMA)  # fmt: skip
    result = pretraining_filters.run(docs, cfg=cfg, index=decontam.build_index(cfg.decontam))
    assert result.table.column(schema.ID).to_pylist() == ["clean"]
    assert result.dropped.column("reason").to_pylist() == ["decontaminated"]
    assert result.dropped.column("detail")[0].as_py().startswith("repo-tasks-eval:acme__proj-")

"""The task_candidates stage: changes as they landed that change tests and code, split SWE-bench's way.

Its input is the commits source's rows; a task is made of a change as it landed only
(:func:`is_change`: a mainline row, i.e. a merge's whole pull request against its first parent
or a squash or rebase commit, or a merge of a pull request into another branch), never of a
pull request's own commits (``not_a_change``: those are the edit set's). A changed file is a
test file by its path (:func:`is_test_path`): a test directory anywhere in it (``tests/``,
``test/``, ``__tests__/``, ``spec/``, Maven's ``src/test/java`` ...) or a test file name of its
language (``test_*.py``, ``*_test.go``, ``*.spec.ts``, ``FooTest.java``, ``foo_spec.rb`` ...).
The diff is split per file into ``patch`` (every non-test file, as SWE-bench's gold patch) and
``test_patch`` (the tests).

The problem statement (:func:`statement`), as SWE-bench gets it: the text of the issues the
pull request closes (``statement_source: issue``, with ``hints_text``: the issues' comments
before the pull request's first commit), from the GitHub metadata; else the pull request's
title and body (``pull_request``: from the metadata, or from the merge or squash message, with
the subjects of the commits it landed); else the commit message (``commits``).

These rules are the tasks' own (the edit set's CommitPackFT rules never see them). Drop
reasons, in order: ``not_a_change``, ``root_commit`` (no base to apply at), ``no_test_change``,
``tests_only`` (no other file changes), ``docs_only`` / ``no_code_change`` (the other files are
documentation / not code),
``generated_files``, ``binary_patch`` (``binary: drop``), ``patch_too_small`` /
``patch_too_large`` (changed code lines), ``too_many_files``, ``too_many_hunks``,
``statement_too_short`` / ``statement_too_long``, ``no_linked_issue`` (``require_linked_issue``),
and ``patch_does_not_apply``: ``git apply --check`` of the whole diff at its base commit, in a
scratch index of the files it touches (one per repository of a shard, each change under its own
directory), failed.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import tempfile
from typing import Any

import pyarrow as pa

from codecorpus import schema
from codecorpus.ingest.git import GIT_ENV, clone_here
from codecorpus.langid import languages
from codecorpus.stage import MapResult
from codecorpus.tasks import columns as C
from codecorpus.tasks import gitlog
from codecorpus.tasks.config import TaskCandidatesConfig

STAGE = "task_candidates"
GENERATED = frozenset({"generated", "minified", "protobuf_generated"})
Repos = dict[tuple[str, str], tuple[str, str]]
"""(source, repository) -> (git directory, the URL it is a clone of, or ''): where the candidates read git."""
TEST_FILE_NAMES = re.compile(
    r"^(?:"
    r"test_.+\.py|.+_tests?\.py|conftest\.py|tests?\.py"  # pytest / unittest
    r"|.+_test\.go"  # go test
    r"|.+\.(?:test|spec)\.(?:[cm]?[jt]sx?)"  # jest, vitest, mocha, jasmine
    r"|.+(?:Tests?|IT|Spec)\.(?:java|kt|kts|scala|groovy|cs|fs|vb|swift|php|m|mm)"  # JUnit, xUnit, XCTest, PHPUnit
    r"|(?:test_.+|.+_(?:test|spec))\.rb"  # minitest, rspec
    r"|.+_(?:test|unittest|tests)\.(?:c|cc|cpp|cxx|h|hpp|rs|dart|exs|ex|erl|hs|ml|nim|zig|lua|jl|r|R)"
    r"|test_.+\.(?:c|cc|cpp|rs|sh|lua|jl|r|R)"
    r"|.+\.t"  # perl
    r")$"
)


def is_test_path(path: str, test_dirs: frozenset[str]) -> bool:
    """A test file by its directory or its language's naming convention.

    >>> dirs = frozenset({"tests", "test", "__tests__", "spec"})
    >>> [is_test_path(p, dirs) for p in ("tests/x.py", "pkg/test_a.py", "a_test.go", "ui/b.spec.ts",
    ...                                   "src/test/java/FooTest.java", "src/main/java/Foo.java", "lib/b.py")]
    [True, True, True, True, True, False, False]
    """
    parts = path.split("/")
    return any(p in test_dirs for p in parts[:-1]) or bool(TEST_FILE_NAMES.match(parts[-1]))


def hunk_count(diff: str) -> int:
    return sum(1 for line in diff.splitlines() if line.startswith("@@ "))


def split_commit(files: list[dict[str, Any]], diff: str, test_dirs: frozenset[str]) -> dict[str, Any]:
    """patch / test_patch and their sizes for one change's files and diff."""
    sections = gitlog.patch_sections(diff)
    if len(sections) != len(files):
        raise ValueError(f"{len(sections)} diff sections for {len(files)} files")
    code, tests = [], []
    for f, section in zip(files, sections, strict=True):
        (tests if is_test_path(f["path"], test_dirs) or is_test_path(f["old_path"], test_dirs) else code).append(
            (f, section)
        )
    patch = "".join(s for _, s in code)
    return {
        C.PATCH: patch,
        C.TEST_PATCH: "".join(s for _, s in tests),
        C.TEST_FILES: [f["path"] for f, _ in tests],
        C.PATCH_LINES: sum(f["added"] + f["deleted"] for f, _ in code),
        C.PATCH_FILES: len(code),
        C.PATCH_HUNKS: hunk_count(patch),
        C.TEST_LINES: sum(f["added"] + f["deleted"] for f, _ in tests),
        C.LANGS: sorted({f["lang"] for f, _ in code if _is_code(f)}),
        "_code_files": sum(1 for f, _ in code if _is_code(f)),
        "_doc_files": sum(1 for f, _ in code if f["excluded"] is None and languages.kind_of(f["lang"]) == "docs"),
        "_generated": sorted(f["path"] for f, _ in [*code, *tests] if f["excluded"] in GENERATED),
        "_binary": any(f["binary"] for f, _ in [*code, *tests]),
    }


def _is_code(f: dict[str, Any]) -> bool:
    return f["excluded"] is None and languages.kind_of(f["lang"], "data") == "code"


# --- the problem statement -------------------------------------------------------------------

_SQUASH_SUFFIX = re.compile(r"\s*\(#\d+\)\s*$")


def problem_statement(subject: str, body: str) -> str:
    """The commit message as a task's description: subject, blank line, body."""
    return f"{subject}\n\n{body}".strip() + "\n"


def statement(row: dict[str, Any]) -> tuple[str, str, str, list[str]]:
    """(problem_statement, hints_text, statement_source, linked issues as ``owner/repo#N``) of a change.

    >>> row = {"issues": [], "pull": None, "pr_number": 7, "parents": ["a", "b"], "pr_commits":
    ...        [{"subject": "Add x"}, {"subject": "Test x"}], "subject": "Merge pull request #7 from ann/x",
    ...        "body": "Support x in y", "repo": "acme/app"}
    >>> statement(row)[0], statement(row)[2]
    ('Support x in y\\n\\nCommits:\\n- Add x\\n- Test x\\n', 'pull_request')
    """
    if row[C.ISSUES]:
        issues = row[C.ISSUES]
        text = "\n".join(f"{i['title']}\n{i['body']}".strip() + "\n" for i in issues)
        first = first_commit_at(row)
        hints = "\n\n".join(c["body"].strip() for i in issues for c in i["comments"]
                            if first is not None and c["created_at"] < first and c["body"].strip())  # fmt: skip
        return text, hints, "issue", [f"{i['repo']}#{i['number']}" for i in issues]
    subjects = [c["subject"] for c in row[C.PR_COMMITS]]
    pull = row[C.PULL]
    if pull is not None:
        return _text(pull["title"], pull["body"] or "", subjects), "", "pull_request", []
    merge = len(row[C.PARENTS]) > 1
    if row[C.PR_NUMBER] is not None:
        title, body = (row[C.BODY], "") if merge else (_SQUASH_SUFFIX.sub("", row[C.SUBJECT]), row[C.BODY])
        if f"{title}{body}".strip():
            return _text(title, body, subjects), "", "pull_request", []
    if merge and subjects:
        return _text(row[C.BODY], "", subjects), "", "commits", []
    return problem_statement(row[C.SUBJECT], row[C.BODY]), "", "commits", []


def first_commit_at(row: dict[str, Any]) -> dt.datetime | None:
    """When the pull request's first commit was made (SWE-bench's cut for hints): the metadata's
    commits, else the earliest author date of the commits the merge landed, else the pull
    request's creation."""
    pull = row[C.PULL] or {}
    dates = [c["author_date"] for c in row.get(C.PR_COMMITS) or []]
    return pull.get("first_commit_at") or (min(dates) if dates else None) or pull.get("created_at")


def landed_commits(gitdir: str, parents: list[str]) -> list[dict[str, Any]]:
    """The commits a merge landed, oldest first: reachable from its other parents and not from its
    first (``git log``, at most ``PR_COMMITS_CAP``), with subjects and author dates."""
    proc = subprocess.run(["git", f"--git-dir={gitdir}", "log", "--format=%H%x00%at%x00%s",
                           f"--max-count={PR_COMMITS_CAP}", *parents[1:], f"^{parents[0]}", "--"],
                          capture_output=True, env=GIT_ENV, check=False)  # fmt: skip
    out = []
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        sha, at, subject = [*line.split("\0", 2), "", ""][:3]
        out.append({"sha": sha, "subject": subject.strip(),
                    "author_date": dt.datetime.fromtimestamp(int(at or 0), dt.timezone.utc)})  # fmt: skip
    return sorted(out, key=lambda c: (c["author_date"], c["sha"]))


PR_COMMITS_CAP = 250
"""The most commits listed for one merge (GitHub lists at most 250 commits of a pull request)."""


def _text(title: str, body: str, subjects: list[str]) -> str:
    """Title, body and the list of commit subjects, blank lines between."""
    parts = [p.strip() for p in (title, body) if p.strip()]
    if subjects:
        parts.append("Commits:\n" + "\n".join(f"- {s}" for s in subjects))
    return "\n\n".join(parts) + "\n"


# --- the apply check -------------------------------------------------------------------------


def _gitdir(repos: Repos, source: str, repo: str) -> str | None:
    gitdir, url = repos.get((source, repo), ("", ""))
    if gitdir and url and not os.path.isdir(gitdir):
        clone_here(url, gitdir)
    return gitdir or None


def apply_checks(gitdir: str, changes: list[tuple[list[dict[str, Any]], str]]) -> list[str | None]:
    """For each (files, diff) of one repository: None when the diff applies at its base (the
    before-state its files record), else git's message.

    The bases are one scratch index holding only the files the diffs touch, at their old blob
    ids, change ``k``'s under ``k/`` (one ``git update-index --index-info``), and each diff is
    applied there by ``git apply --cached --check --directory=k``: the check git itself makes,
    without checking out a tree, one git process a change."""
    entries = "".join(f"{f['old_mode']} {f['old_oid']}\t{k}/{f['old_path']}\0" for k, (files, _) in enumerate(changes)
                      for f in files if f["old_oid"] != gitlog.ZERO_OID and f["status"] != "add")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="cc-apply-") as tmp:
        env = {**GIT_ENV, "GIT_INDEX_FILE": os.path.join(tmp, "index")}

        def git(args: list[str], data: bytes) -> subprocess.CompletedProcess:
            return subprocess.run(["git", f"--git-dir={gitdir}", *args], input=data, env=env, capture_output=True,
                                  check=False)  # fmt: skip

        made = git(["update-index", "-z", "--index-info"], entries.encode())
        if made.returncode != 0:
            return [_message(made, "update-index", "")] * len(changes)
        out = []
        for k, (_, diff) in enumerate(changes):
            proc = git(["apply", "--cached", "--check", f"--directory={k}", "-"], diff.encode())
            out.append(None if proc.returncode == 0 else _message(proc, "apply", f"{k}/"))
        return out


def _message(proc: subprocess.CompletedProcess, command: str, prefix: str) -> str:
    """git's error, without the scratch index's ``k/`` prefix of the change's paths."""
    text = proc.stderr.decode("utf-8", "replace")
    return (text.replace(prefix, "") if prefix else text).strip()[:300] or f"git {command} failed"


# --- the stage -------------------------------------------------------------------------------


Drop = tuple[str, float | None, float | None, str | None]


def _shape_reason(split: dict[str, Any], cfg: TaskCandidatesConfig) -> Drop | None:
    """The change's own shape: tests and code, no generated or (when asked) binary files, its size."""
    if not split[C.TEST_FILES]:
        return "no_test_change", None, None, None
    if not split[C.PATCH_FILES]:
        return "tests_only", None, None, None
    if not split["_code_files"]:
        return ("docs_only" if split["_doc_files"] else "no_code_change"), None, None, None
    if cfg.drop_generated and split["_generated"]:
        return "generated_files", None, None, ", ".join(split["_generated"])[:300]
    if cfg.binary == "drop" and split["_binary"]:
        return "binary_patch", None, None, None
    lines, nfiles, hunks = split[C.PATCH_LINES], split[C.PATCH_FILES], split[C.PATCH_HUNKS]
    checks = (
        ("patch_too_small", lines < cfg.min_patch_lines, lines, cfg.min_patch_lines),
        ("patch_too_large", cfg.max_patch_lines is not None and lines > cfg.max_patch_lines, lines, cfg.max_patch_lines),
        ("too_many_files", cfg.max_patch_files is not None and nfiles > cfg.max_patch_files, nfiles, cfg.max_patch_files),
        ("too_many_hunks", cfg.max_patch_hunks is not None and hunks > cfg.max_patch_hunks, hunks, cfg.max_patch_hunks),
    )  # fmt: skip
    return next(((name, score, limit, None) for name, failed, score, limit in checks if failed), None)


def _statement_reason(text: str, source: str, cfg: TaskCandidatesConfig) -> Drop | None:
    chars = len(text)
    checks = (
        ("statement_too_short", chars < cfg.min_statement_chars, chars, cfg.min_statement_chars),
        ("statement_too_long", chars > cfg.max_statement_chars, chars, cfg.max_statement_chars),
        ("no_linked_issue", cfg.require_linked_issue and source != "issue", None, None),
    )  # fmt: skip
    return next(((name, score, limit, None) for name, failed, score, limit in checks if failed), None)


def _candidate(
    row: dict[str, Any], cfg: TaskCandidatesConfig, test_dirs: frozenset[str], repos: Repos | None
) -> dict[str, Any] | Drop:
    """One change's task columns, or the reason it is no task."""
    if not is_change(row):
        return "not_a_change", None, None, "a pull request's own commit (the edit set's)"
    if not row[C.PARENTS]:
        return "root_commit", None, None, "no parent: no base commit to apply the change at"
    split = split_commit(row[C.FILES], row[C.DIFF], test_dirs)
    reason = _shape_reason(split, cfg)
    if reason is not None:
        return reason
    gitdir = _gitdir(repos, row[schema.SOURCE], row[schema.REPO]) if repos is not None else None
    row[C.PR_COMMITS] = landed_commits(gitdir, row[C.PARENTS]) if gitdir and len(row[C.PARENTS]) > 1 else []
    text, hints, source, linked = statement(row)
    reason = _statement_reason(text, source, cfg)
    if reason is not None:
        return reason
    pull = row[C.PULL] or {}
    split.update({
        C.DESCRIPTION_CHARS: len(text), C.PROBLEM_STATEMENT: text, C.HINTS_TEXT: hints, C.STATEMENT_SOURCE: source,
        C.LINKED_ISSUES: linked, C.INSTANCE_ID: instance_id(row[schema.REPO], row[C.PR_NUMBER], row[C.SHA]),
        C.CREATED_AT: pull.get("created_at") or row[C.COMMITTER_DATE],
        C.MERGED_AT: pull.get("merged_at") or row[C.COMMITTER_DATE], C.PR_COMMITS: row[C.PR_COMMITS],
    })  # fmt: skip
    return split


def _apply_failures(rows: list[dict[str, Any]], kept: list[int], repos: Repos) -> dict[int, str]:
    """Row -> git's message, for each kept candidate that does not apply at its base (one scratch
    index per repository of the shard)."""
    by_repo: dict[tuple[str, str], list[int]] = {}
    for i in kept:
        by_repo.setdefault((rows[i][schema.SOURCE], rows[i][schema.REPO]), []).append(i)
    failures: dict[int, str] = {}
    for (source, repo), members in by_repo.items():
        gitdir = _gitdir(repos, source, repo)
        results = (apply_checks(gitdir, [(rows[i][C.FILES], rows[i][C.DIFF]) for i in members]) if gitdir
                   else ["the repository is not found"] * len(members))  # fmt: skip
        failures.update({i: msg for i, msg in zip(members, results, strict=True) if msg is not None})
    return failures


def run(table: pa.Table, cfg: TaskCandidatesConfig, repos: Repos | None = None) -> MapResult:
    """Keep the mainline changes that change tests and code and apply at their base, with their
    split diff, sizes and problem statement. ``repos``: (source, repository) -> (git dir, the URL
    it is a clone of), for the apply check (skipped without it)."""
    test_dirs = frozenset(cfg.test_dirs)
    made: dict[int, dict[str, Any]] = {}
    drops = []
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        one = _candidate(row, cfg, test_dirs, repos)
        if isinstance(one, dict):
            made[i] = one
        else:
            drops.append((i, *one))
    if cfg.check_apply and repos is not None:
        for i, failed in _apply_failures(rows, sorted(made), repos).items():
            del made[i]
            drops.append((i, "patch_does_not_apply", None, None, failed))
    drops.sort(key=lambda d: d[0])
    keep = sorted(made)
    splits = [made[i] for i in keep]
    out = table.take(pa.array(keep, pa.int64()))
    for name in OUTPUT_COLUMNS:
        out = C.with_column(out, name, [s[name] for s in splits])
    dropped = schema.drops_from_rows(
        table.take(pa.array([d[0] for d in drops], pa.int64())), STAGE, [d[1] for d in drops],
        score=[None if d[2] is None else float(d[2]) for d in drops],
        threshold=[None if d[3] is None else float(d[3]) for d in drops],
        detail=[d[4] for d in drops],
    )
    return MapResult(out, dropped)


OUTPUT_COLUMNS = (
    C.PATCH, C.TEST_PATCH, C.TEST_FILES, C.DESCRIPTION_CHARS, C.PATCH_LINES, C.PATCH_FILES, C.PATCH_HUNKS,
    C.TEST_LINES, C.LANGS, C.PROBLEM_STATEMENT, C.HINTS_TEXT, C.STATEMENT_SOURCE, C.LINKED_ISSUES, C.INSTANCE_ID,
    C.CREATED_AT, C.MERGED_AT, C.PR_COMMITS,
)  # fmt: skip


def is_change(row: dict[str, Any]) -> bool:
    """A change as it landed: a row of the mainline, or a merge of a pull request into another
    branch (a development branch merged into the mainline later); not a pull request's own commit."""
    return bool(row[C.MAINLINE]) or (len(row[C.PARENTS]) > 1 and row[C.PR_NUMBER] is not None)


def instance_id(repo: str, pr: int | None, sha: str) -> str:
    """SWE-bench's id: ``owner__repo-<PR number>``; a change that names no pull request: 12 hex of its sha.

    >>> instance_id("psf/requests", 863, "a" * 40), instance_id("astropy/astropy", None, "a5917978be39d13cd90b")
    ('psf__requests-863', 'astropy__astropy-a5917978be39')
    """
    return f"{repo.replace('/', '__')}-{pr if pr is not None else sha[:12]}"

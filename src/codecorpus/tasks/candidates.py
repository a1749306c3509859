"""The task_candidates stage: commits that change tests and code, split SWE-bench's way.

A changed file is a test file by its path (:func:`is_test_path`): a test
directory anywhere in it (``tests/``, ``test/``, ``__tests__/``, ``spec/``,
Maven's ``src/test/java`` ...) or a test file name of its language
(``test_*.py``, ``*_test.go``, ``*.spec.ts``, ``FooTest.java``, ``foo_spec.rb``
...). A commit is a candidate when it changes at least one test file and at
least one non-test code file; its diff is split per file into ``patch`` (every
non-test file, as SWE-bench's gold patch) and ``test_patch`` (the tests). The
problem statement is the commit message. Diff size (lines, files, hunks) and
the description's length are recorded so a user can pick long diffs with short
descriptions.

Drop reasons: ``no_test_change``, ``tests_only`` (no code file changes),
``patch_too_small`` / ``patch_too_large`` (code lines outside the bounds).
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from codecorpus import schema
from codecorpus.langid import languages
from codecorpus.stage import MapResult
from codecorpus.tasks import columns as C
from codecorpus.tasks import gitlog
from codecorpus.tasks.config import TaskCandidatesConfig

STAGE = "task_candidates"

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
    """patch / test_patch and their sizes for one commit's files and diff."""
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
    }


def _is_code(f: dict[str, Any]) -> bool:
    return f["excluded"] is None and languages.kind_of(f["lang"], "data") == "code"


def _reason(split: dict[str, Any], cfg: TaskCandidatesConfig) -> tuple[str, float | None, float | None] | None:
    if not split[C.TEST_FILES]:
        return "no_test_change", None, None
    if not split["_code_files"]:
        return "tests_only", None, None
    lines = split[C.PATCH_LINES]
    if lines < cfg.min_patch_lines:
        return "patch_too_small", lines, cfg.min_patch_lines
    if cfg.max_patch_lines is not None and lines > cfg.max_patch_lines:
        return "patch_too_large", lines, cfg.max_patch_lines
    return None


def run(table: pa.Table, cfg: TaskCandidatesConfig) -> MapResult:
    """Keep the commits that change tests and code, with their split diff and sizes."""
    test_dirs = frozenset(cfg.test_dirs)
    files = table.column(C.FILES).to_pylist()
    diffs = table.column(C.DIFF).to_pylist()
    subjects, bodies = table.column(C.SUBJECT).to_pylist(), table.column(C.BODY).to_pylist()
    keep, splits, drops = [], [], []
    for i, (fs, diff) in enumerate(zip(files, diffs, strict=True)):
        split = split_commit(fs, diff, test_dirs)
        reason = _reason(split, cfg)
        if reason is None:
            keep.append(i)
            split[C.DESCRIPTION_CHARS] = len(problem_statement(subjects[i], bodies[i]))
            splits.append(split)
        else:
            drops.append((i, *reason))
    out = table.take(pa.array(keep, pa.int64()))
    for name in (C.PATCH, C.TEST_PATCH, C.TEST_FILES, C.DESCRIPTION_CHARS, C.PATCH_LINES, C.PATCH_FILES,
                 C.PATCH_HUNKS, C.TEST_LINES, C.LANGS):  # fmt: skip
        out = C.with_column(out, name, [s[name] for s in splits])
    dropped = schema.drops_from_rows(
        table.take(pa.array([d[0] for d in drops], pa.int64())), STAGE, [d[1] for d in drops],
        score=[None if d[2] is None else float(d[2]) for d in drops],
        threshold=[None if d[3] is None else float(d[3]) for d in drops],
    )
    return MapResult(out, dropped)


def problem_statement(subject: str, body: str) -> str:
    """The commit message as a task's description: subject, blank line, body."""
    return f"{subject}\n\n{body}".strip() + "\n"

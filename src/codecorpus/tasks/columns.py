"""The commit row and the task-candidate columns, defined once for the tasks part.

A commit row carries the drop-log columns (``id``, ``source``, ``repo``,
``path``, ``lang``, ``bytes``) so drops and stats work unchanged: ``path`` is
the commit sha, ``lang`` the language with the most changed lines, ``bytes``
the size of the unified diff.
"""

from __future__ import annotations

import pyarrow as pa

from codecorpus import schema, stage

SHA = "sha"
PARENTS = "parents"
AUTHOR_NAME = "author_name"
AUTHOR_EMAIL = "author_email"
AUTHOR_DATE = "author_date"
COMMITTER_DATE = "committer_date"
SUBJECT = "subject"
BODY = "body"
MESSAGE_ENCODING = "message_encoding"
FILES = "files"
DIFF = "diff"
BEFORE = "before_files"
BEFORE_SKIPPED = "before_skipped"
LINES_ADDED = "lines_added"
LINES_DELETED = "lines_deleted"
MAINLINE = "mainline"
LANDED_AT = "landed_at"
PR_NUMBER = "pr_number"
PR_COMMITS = "pr_commits"
PULL = "pull"
ISSUES = "issues"

# statuses of a changed file (git's A/M/D/R/C, and mode or type changes)
STATUSES = ("add", "modify", "delete", "rename", "copy", "mode")

FILE_TYPE = pa.struct(
    [
        pa.field("path", pa.string()),
        pa.field("old_path", pa.string()),
        pa.field("status", pa.string()),
        pa.field("old_mode", pa.string()),
        pa.field("new_mode", pa.string()),
        pa.field("old_oid", pa.string()),
        pa.field("new_oid", pa.string()),
        pa.field("added", pa.int32()),
        pa.field("deleted", pa.int32()),
        pa.field("binary", pa.bool_()),
        pa.field("lang", pa.string()),
        pa.field("excluded", pa.string()),
    ]
)
"""``excluded`` is ingest's reason for a file that is not code (vendored, lockfile, binary,
generated, submodule ...), null for a code file; ``added``/``deleted`` count its diff's lines as ``git --numstat`` does."""

BEFORE_TYPE = pa.struct([pa.field("path", pa.string()), pa.field("text", pa.large_string())])
SKIPPED_TYPE = pa.struct([pa.field("path", pa.string()), pa.field("reason", pa.string())])
_TIME = pa.timestamp("s", tz="UTC")
PR_COMMIT_TYPE = pa.struct([pa.field("sha", pa.string()), pa.field("subject", pa.string()),
                            pa.field("author_date", _TIME)])  # fmt: skip
"""A commit a merge landed (reachable from its other parents, not from its first): the candidates list them."""
PULL_TYPE = pa.struct([
    pa.field("number", pa.int64()), pa.field("title", pa.string()), pa.field("body", pa.large_string()),
    pa.field("created_at", _TIME), pa.field("merged_at", _TIME), pa.field("first_commit_at", _TIME),
])  # fmt: skip
"""The pull request a change landed, from the GitHub metadata (``tasks/github.py``)."""
COMMENT_TYPE = pa.struct([pa.field("created_at", _TIME), pa.field("body", pa.large_string())])
ISSUE_TYPE = pa.struct([
    pa.field("repo", pa.string()), pa.field("number", pa.int64()), pa.field("title", pa.string()),
    pa.field("body", pa.large_string()), pa.field("comments", pa.list_(COMMENT_TYPE)),
])  # fmt: skip
"""An issue the pull request closes, with its comments (SWE-bench's hints are those before the first commit)."""

COMMIT_SCHEMA = pa.schema(
    [
        pa.field(schema.ID, pa.string(), nullable=False),
        pa.field(schema.SOURCE, pa.string(), nullable=False),
        pa.field(schema.REPO, pa.string(), nullable=False),
        pa.field(schema.PATH, pa.string(), nullable=False),
        pa.field(schema.LANG, pa.string(), nullable=False),
        pa.field(schema.BYTES, pa.int64(), nullable=False),
        pa.field(SHA, pa.string(), nullable=False),
        pa.field(PARENTS, pa.list_(pa.string()), nullable=False),
        pa.field(AUTHOR_NAME, pa.string(), nullable=False),
        pa.field(AUTHOR_EMAIL, pa.string(), nullable=False),
        pa.field(AUTHOR_DATE, pa.timestamp("s", tz="UTC"), nullable=False),
        pa.field(COMMITTER_DATE, pa.timestamp("s", tz="UTC"), nullable=False),
        pa.field(SUBJECT, pa.string(), nullable=False),
        pa.field(BODY, pa.large_string(), nullable=False),
        pa.field(MESSAGE_ENCODING, pa.string(), nullable=False),
        pa.field(FILES, pa.list_(FILE_TYPE), nullable=False),
        pa.field(LINES_ADDED, pa.int64(), nullable=False),
        pa.field(LINES_DELETED, pa.int64(), nullable=False),
        pa.field(DIFF, pa.large_string(), nullable=False),
        pa.field(MAINLINE, pa.bool_(), nullable=False),
        pa.field(LANDED_AT, pa.timestamp("s", tz="UTC"), nullable=False),
        pa.field(BEFORE, pa.list_(BEFORE_TYPE), nullable=False),
        pa.field(BEFORE_SKIPPED, pa.list_(SKIPPED_TYPE), nullable=False),
        pa.field(schema.LICENSE, pa.string(), nullable=False),
        pa.field(schema.LICENSE_METHOD, pa.string(), nullable=False),
        pa.field(PR_NUMBER, pa.int64()),
        pa.field(PULL, PULL_TYPE),
        pa.field(ISSUES, pa.list_(ISSUE_TYPE), nullable=False),
    ]
)
"""One row per kept commit. ``before_files`` holds the before-images of the changed text
files (up to the caps); ``before_skipped`` names the changed text files left out and why
(``too_large``, ``commit_cap``, ``undecodable``, ``missing``).

A row is a commit as git shows it, and on the mainline (``mainline``: the first-parent chain
from the tip) also a change as it landed: a merge's ``diff`` is against its first parent (the
whole pull request; task_candidates lists the commits it landed, ``pr_commits``); ``landed_at`` is
when a commit reached the mainline (a pull request's commit: its merge's time), the edit set's
time split. ``pr_number`` comes
from the subject ("Merge pull request #N", "(#N)"); ``pull`` and ``issues`` from the GitHub
metadata when the recipe gives it (null and empty without)."""

# --- commit_filters score columns -----------------------------------------------------
MESSAGE_CHARS = "message_chars"
MESSAGE_WORDS = "message_words"
IMPERATIVE = "imperative"
BOILERPLATE = "boilerplate"
HAS_URL = "has_url"
ISSUE_REFS = "issue_refs"
FILES_CHANGED = "files_changed"
CODE_BEFORE_BYTES = "code_before_bytes"
LICENSE_PERMISSIVE = "license_permissive"

# --- commit_dedup columns -------------------------------------------------------------
PATCH_ID = "patch_id"
DUP_CLUSTER = schema.DUP_CLUSTER
DUP_CLUSTER_SIZE = schema.DUP_CLUSTER_SIZE

# --- task_candidates columns ----------------------------------------------------------
PATCH = "patch"
TEST_PATCH = "test_patch"
TEST_FILES = "test_files"
DESCRIPTION_CHARS = "description_chars"
PATCH_LINES = "patch_lines"
PATCH_FILES = "patch_files"
PATCH_HUNKS = "patch_hunks"
TEST_LINES = "test_lines"
LANGS = "langs"
PROBLEM_STATEMENT = "problem_statement"
HINTS_TEXT = "hints_text"
STATEMENT_SOURCE = "statement_source"
INSTANCE_ID = "instance_id"
CREATED_AT = "created_at"
MERGED_AT = "merged_at"
LINKED_ISSUES = "linked_issues"
STATEMENT_SOURCES = ("issue", "pull_request", "commits")

STAGE_COLUMNS: dict[str, pa.DataType] = {
    MESSAGE_CHARS: pa.int32(),
    MESSAGE_WORDS: pa.int32(),
    IMPERATIVE: pa.bool_(),
    BOILERPLATE: pa.string(),
    HAS_URL: pa.bool_(),
    ISSUE_REFS: pa.int32(),
    FILES_CHANGED: pa.int32(),
    CODE_BEFORE_BYTES: pa.int64(),
    LICENSE_PERMISSIVE: pa.bool_(),
    PATCH_ID: pa.string(),
    DUP_CLUSTER: pa.string(),
    DUP_CLUSTER_SIZE: pa.int32(),
    PATCH: pa.large_string(),
    TEST_PATCH: pa.large_string(),
    TEST_FILES: pa.list_(pa.string()),
    DESCRIPTION_CHARS: pa.int32(),
    PATCH_LINES: pa.int32(),
    PATCH_FILES: pa.int32(),
    PATCH_HUNKS: pa.int32(),
    TEST_LINES: pa.int32(),
    LANGS: pa.list_(pa.string()),
    PROBLEM_STATEMENT: pa.large_string(),
    HINTS_TEXT: pa.large_string(),
    STATEMENT_SOURCE: pa.string(),
    INSTANCE_ID: pa.string(),
    CREATED_AT: pa.timestamp("s", tz="UTC"),
    MERGED_AT: pa.timestamp("s", tz="UTC"),
    LINKED_ISSUES: pa.list_(pa.string()),
    PR_COMMITS: pa.list_(PR_COMMIT_TYPE),
}
"""Types of the columns the tasks stages add (``boilerplate`` is the matched kind or null)."""


def with_column(table: pa.Table, name: str, values: pa.Array | list) -> pa.Table:
    """Add (or replace) a tasks stage column with its type from ``STAGE_COLUMNS``."""
    return stage.with_column(table, name, values, types=STAGE_COLUMNS)

"""Task candidates -> ``tasks.jsonl`` in SWE-bench's instance format, split by time.

SWE-bench's harness reads a local ``.jsonl`` with one JSON object a line
(``swebench.harness.utils.load_swebench_dataset``) and types an instance as
``swebench.types.SWEbenchInstance``: ``repo``, ``instance_id``, ``base_commit``,
``patch``, ``test_patch``, ``problem_statement``, ``hints_text``, ``created_at``,
``version``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``, ``environment_setup_commit``,
all strings. ``FAIL_TO_PASS`` / ``PASS_TO_PASS`` are JSON-encoded lists of test
names, as in the Hugging Face datasets (the harness ``json.loads`` them when
they are strings); they stay ``"[]"`` until an environment verifies the task.
``instance_id`` is ``owner__repo-<PR number>`` (``owner__repo-<12 hex of the sha>`` for a
change that names no pull request); ``base_commit`` the change's first parent;
``problem_statement`` / ``hints_text`` the candidates stage's (an issue's text and comments
when the metadata links one); ``created_at`` the pull request's creation time (the change's
commit time without metadata; UTC, ISO 8601); ``environment_setup_commit`` the base commit
until an environment names one. codecorpus adds its own fields after those (the merge commit,
``pull_number``, ``merged_at``, ``statement_source``, ``linked_issues``, diff sizes,
languages, license, description length, and the added lines of the patch as plain text, the
field a decontamination benchmark reads).

The time split: with ``eval_after``, a task merged after it (``merged_at``: the pull
request's merge time, else the change's commit time) goes to the evaluation file and never
to training outputs (:func:`time_split` applies the rule to the edit set's commits by their
commit time).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.tasks import columns as C
from codecorpus.tasks.candidates import instance_id as task_instance_id
from codecorpus.tasks.config import TaskSetConfig

SWEBENCH_FIELDS = (
    "repo", "instance_id", "base_commit", "patch", "test_patch", "problem_statement", "hints_text",
    "created_at", "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit",
)  # fmt: skip
"""The keys of ``swebench.types.SWEbenchInstance`` (every value a string)."""

TRAIN_FILE, EVAL_FILE = schema.TASK_FILES["train"], schema.TASK_FILES["eval"]
ADDED_TEXT = "patch_added_text"


def instance_id(repo: str, sha: str) -> str:
    """The id of a commit that names no pull request (an edit example's task id):
    the repository with ``/`` as ``__``, a dash, 12 hex of the sha.

    >>> instance_id("astropy/astropy", "a5917978be39d13cd90b517e1de4e7a539ffaa48")
    'astropy__astropy-a5917978be39'
    """
    return task_instance_id(repo, None, sha)


def iso_utc(when: dt.datetime) -> str:
    """``2024-05-01T12:00:00Z`` (SWE-bench's created_at style)."""
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def added_text(patch: str) -> str:
    """The lines a patch adds, without their ``+`` (what a model could have memorised)."""
    return "".join(
        line[1:] + "\n" for line in patch.split("\n") if line.startswith("+") and not line.startswith("+++ ")
    )


def task_record(row: dict[str, Any], cfg: TaskSetConfig) -> dict[str, Any]:
    """One SWE-bench instance (its twelve fields first, in its order) plus codecorpus's fields."""
    base = row[C.PARENTS][0] if row[C.PARENTS] else ""
    record = {
        "repo": row[schema.REPO],
        "instance_id": row[C.INSTANCE_ID],
        "base_commit": base,
        "patch": row[C.PATCH],
        "test_patch": row[C.TEST_PATCH],
        "problem_statement": row[C.PROBLEM_STATEMENT],
        "hints_text": row[C.HINTS_TEXT],
        "created_at": iso_utc(row[C.CREATED_AT]),
        "version": cfg.version,
        "FAIL_TO_PASS": json.dumps([]),
        "PASS_TO_PASS": json.dumps([]),
        "environment_setup_commit": base,
    }
    record.update({
        "commit": row[C.SHA], "pull_number": row[C.PR_NUMBER], "merged_at": iso_utc(row[C.MERGED_AT]),
        "statement_source": row[C.STATEMENT_SOURCE], "linked_issues": row[C.LINKED_ISSUES],
        "pr_commits": len(row[C.PR_COMMITS]), "source": row[schema.SOURCE], "license": row[schema.LICENSE],
        "langs": row[C.LANGS], "lang": row[schema.LANG], "test_files": row[C.TEST_FILES],
        "description_chars": row[C.DESCRIPTION_CHARS], "patch_lines": row[C.PATCH_LINES],
        "patch_files": row[C.PATCH_FILES], "patch_hunks": row[C.PATCH_HUNKS], "test_lines": row[C.TEST_LINES],
        ADDED_TEXT: added_text(row[C.PATCH]),
    })  # fmt: skip
    return record


def time_split(
    table: pa.Table, eval_after: dt.datetime | None, key: str = C.COMMITTER_DATE
) -> tuple[pa.Table, pa.Table]:
    """(train, eval) rows: ``key`` (a task's merge time, a commit's commit time) after ``eval_after``
    is evaluation (none without a date)."""
    if eval_after is None:
        return table, table.slice(0, 0)
    cut = pa.scalar(eval_after.astimezone(dt.timezone.utc), pa.timestamp("s", tz="UTC"))
    late = pc.greater(table.column(key), cut)
    return table.filter(pc.invert(late)), table.filter(late)


def task_records(table: pa.Table, cfg: TaskSetConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, eval) SWE-bench records, each sorted by instance id (the same bytes on any run)."""
    train, held = time_split(table, cfg.eval_after, C.MERGED_AT)

    def records(t: pa.Table) -> list[dict[str, Any]]:
        return sorted((task_record(r, cfg) for r in t.to_pylist()), key=lambda r: (r["instance_id"], r["commit"]))

    return records(train), records(held)


def task_line(record: dict[str, Any]) -> str:
    """One record as a line of a task file (UTF-8 JSON, not ASCII-escaped)."""
    return json.dumps(record, ensure_ascii=False) + "\n"


def write_task_files(table: pa.Table, cfg: TaskSetConfig, out_dir: str | Path) -> dict[str, Path]:
    """``tasks.jsonl`` (train) and, with ``eval_after``, ``tasks-eval.jsonl`` in ``out_dir``, from
    one table of candidates: the lines the pipeline's sharded writer and merge give."""
    records = dict(zip(schema.TASK_FILES, task_records(table, cfg), strict=True))
    splits = list(schema.TASK_FILES) if cfg.eval_after is not None else ["train"]
    paths = {split: Path(out_dir) / schema.TASK_FILES[split] for split in splits}
    for split, path in paths.items():
        atomic_write_bytes(path, "".join(map(task_line, records[split])).encode())
    return paths


def check_instance(record: dict[str, Any]) -> list[str]:
    """Problems of a record against SWE-bench's documented instance schema (empty when none)."""
    problems = [f"missing {k}" for k in SWEBENCH_FIELDS if k not in record]
    problems += [f"{k} is {type(record[k]).__name__}, not str" for k in SWEBENCH_FIELDS
                 if k in record and not isinstance(record[k], str)]  # fmt: skip
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        try:
            tests = json.loads(record.get(key, "null"))
        except (TypeError, json.JSONDecodeError):
            tests = None
        if not (isinstance(tests, list) and all(isinstance(t, str) for t in tests)):
            problems.append(f"{key} is not a JSON-encoded list of strings")
    iid, repo = record.get("instance_id", ""), record.get("repo", "")
    if isinstance(iid, str) and isinstance(repo, str) and not iid.startswith(repo.replace("/", "__") + "-"):
        problems.append(f"instance_id {iid!r} does not start with {repo.replace('/', '__')}-")
    return problems

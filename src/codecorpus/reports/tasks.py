"""The repository-tasks part of the report: the commits funnel and what the tasks look like.

    tasks_funnel          commits listed -> rows read, then each product's path: task candidates ->
                          eval / train tasks; filtered -> deduplicated -> edit examples (``_stats.json``)
    tasks_left_out        per repository, the mainline changes a bound of the walk left out
    tasks_statement_sources  per split, tasks by statement source (issue, pull_request, commits)
    tasks_distributions   per split: tasks by diff size (changed code lines), files changed and
                          description length (log2 bins), and by language (from ``RUN/tasks/*.jsonl``)

The section also sums the drops table (every stage's drop log) by stage and reason.
Nothing is computed twice: the counts are the stages' own, the distributions the task
files' fields.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.reports.html import Page, note, rows_of, table_html
from codecorpus.reports.run import RunData
from codecorpus.storage import mirror as store

FUNNEL_SCHEMA = pa.schema([
    ("step", pa.int32()), ("path", pa.string()), ("what", pa.string()), ("stage", pa.string()), ("count", pa.int64()),
])  # fmt: skip
LEFT_OUT_SCHEMA = pa.schema([("repo", pa.string()), ("changes_left_out", pa.int64())])
SOURCES_SCHEMA = pa.schema([("split", pa.string()), ("statement_source", pa.string()), ("tasks", pa.int64())])
LEFT_OUT = "changes_left_out/"  # the commits source's counter prefix (tasks/commits.py LEFT_OUT)
DIST_SCHEMA = pa.schema([
    ("metric", pa.string()), ("split", pa.string()), ("bin_lo", pa.int64()), ("bin_hi", pa.int64()),
    ("lang", pa.string()), ("tasks", pa.int64()),
])  # fmt: skip

METRICS = {"patch_lines": "diff size (changed code lines)", "patch_files": "files changed",
           "description_chars": "description length (chars)"}  # fmt: skip


def _funnel_steps(data: RunData) -> list[tuple[str, str, str, int | None]]:
    """(path, what, stage, count): the commits source, then each product's own path."""
    s = data.stats

    def out(stage: str) -> int | None:
        return s[stage]["rows_out"] if stage in s else None

    commits = s.get("commits", {})
    counters = s.get("task_outputs", {}).get("counters", {})
    tasks_out = "task_outputs" in s
    return [
        ("source", "commits listed", "commits", commits["rows_in"] - _metadata(commits) if commits else None),
        ("source", "metadata records dropped", "commits", _metadata(commits) or None),
        ("source", "rows read (changes and commits)", "commits", out("commits")),
        ("tasks", "task candidates", "task_candidates", out("task_candidates")),
        ("tasks", "unique tasks (duplicates across repositories dropped)", "task_outputs", out("task_outputs")),
        ("tasks", "evaluation tasks", "task_outputs", counters.get("tasks_eval") if tasks_out else None),
        ("tasks", "training tasks", "task_outputs", counters.get("tasks_train") if tasks_out else None),
        ("edit set", "filtered (CommitPackFT rules)", "commit_filters", out("commit_filters")),
        ("edit set", "deduplicated", "commit_dedup", out("commit_dedup")),
        ("edit set", "edit examples", "edit_set", out("edit_set")),
        ("edit set", "edit examples rendered", "sft_render", out("sft_render") if "edit_set" in s else None),
    ]


def _metadata(commits: dict[str, Any]) -> int:
    return commits.get("counters", {}).get("metadata_records", 0)


def tasks_funnel(data: RunData) -> pa.Table:
    """Commits through the stages to tasks and to edit examples, each product's path apart
    (the steps of the stages that ran)."""
    rows = [{"step": i, "path": path, "what": what, "stage": stage, "count": n}
            for i, (path, what, stage, n) in enumerate(_funnel_steps(data)) if n is not None]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=FUNNEL_SCHEMA)


def left_out(data: RunData) -> pa.Table:
    """Per repository, the mainline changes the commits bounds (since, until, a cap) left out."""
    counters = data.stats.get("commits", {}).get("counters", {})
    rows = [{"repo": k.removeprefix(LEFT_OUT), "changes_left_out": v}
            for k, v in sorted(counters.items()) if k.startswith(LEFT_OUT)]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=LEFT_OUT_SCHEMA)


def _task_records(data: RunData, split: str) -> list[dict[str, Any]]:
    path = store.ensure_local(data.run.task_file(split))
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _log2_rows(metric: str, split: str, values: list[int]) -> list[dict[str, Any]]:
    if not values:
        return []
    counts = np.bincount(np.floor(np.log2(np.maximum(values, 1))).astype(np.int64))
    return [{"metric": metric, "split": split, "bin_lo": 2**k, "bin_hi": 2 ** (k + 1), "lang": None, "tasks": int(n)}
            for k, n in enumerate(counts) if n]  # fmt: skip


def tasks_distributions(data: RunData) -> pa.Table:
    rows: list[dict[str, Any]] = []
    for split in schema.TASK_FILES:
        records = _task_records(data, split)
        for metric in METRICS:
            rows += _log2_rows(metric, split, [int(r[metric]) for r in records])
        langs = Counter(r["lang"] for r in records)
        rows += [{"metric": "lang", "split": split, "bin_lo": None, "bin_hi": None, "lang": lang, "tasks": n}
                 for lang, n in sorted(langs.items(), key=lambda kv: (-kv[1], kv[0]))]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=DIST_SCHEMA)


def statement_sources(data: RunData) -> pa.Table:
    """Per split, the tasks whose problem statement is an issue's, a pull request's or commit messages."""
    rows = []
    for split in schema.TASK_FILES:
        counts = Counter(r.get("statement_source", "commits") for r in _task_records(data, split))
        rows += [{"split": split, "statement_source": k, "tasks": v} for k, v in sorted(counts.items())]
    return pa.Table.from_pylist(rows, schema=SOURCES_SCHEMA)


def build_tables(data: RunData) -> dict[str, pa.Table]:
    """The tasks tables, for a run that mined commits (none otherwise)."""
    if "commits" not in data.stats:
        return {}
    return {"tasks_funnel": tasks_funnel(data), "tasks_distributions": tasks_distributions(data),
            "tasks_left_out": left_out(data), "tasks_statement_sources": statement_sources(data)}  # fmt: skip


def section(page: Page, tables: dict[str, pa.Table]) -> None:
    """The report's "Tasks from repository history" section (absent for other runs)."""
    if "tasks_funnel" not in tables:
        return
    funnel = rows_of(tables["tasks_funnel"])
    chart = page.chart({"kind": "hbar", "categories": [r["what"] for r in funnel],
                        "metrics": {"commits": {"series": [{"name": "count", "values": [r["count"] for r in funnel]}],
                                                "format": "int"}}})  # fmt: skip
    dist = rows_of(tables["tasks_distributions"])
    parts = [
        note("Commits through the stages: the tasks' path (mainline changes under the candidates' own rules, "
             "to SWE-bench tasks, train / evaluation by merge time) and the edit set's (single commits under "
             "CommitPackFT's rules); every drop and its reason is in the drops section."),
        chart, table_html(funnel, ["path", "what", "stage", "count"], csv_name="tasks_funnel"),
    ]
    cut = rows_of(tables["tasks_left_out"])
    parts += [note("Changes left out by a bound (since, until, max_commits_per_repo), per repository: "
                   + ("none, the whole history was read." if not cut else f"{sum(r['changes_left_out'] for r in cut):,}.")),
              *([table_html(cut, ["repo", "changes_left_out"], csv_name="tasks_left_out")] if cut else [])]  # fmt: skip
    parts += [note("Tasks by the source of their problem statement: an issue the pull request closes (GitHub "
                   "metadata), the pull request's title and body, or commit messages."),
              table_html(rows_of(tables["tasks_statement_sources"]), ["split", "statement_source", "tasks"],
                         csv_name="tasks_statement_sources")]  # fmt: skip
    drops: dict[tuple[str, str], int] = {}
    for r in rows_of(tables["drops"]):
        drops[r["stage"], r["reason"]] = drops.get((r["stage"], r["reason"]), 0) + r["docs"]
    parts += [note("Commits dropped, by stage and reason."),
              table_html([{"stage": k[0], "reason": k[1], "commits": n} for k, n in drops.items()],
                         ["stage", "reason", "commits"], csv_name="drops")]
    for metric, title in (*METRICS.items(), ("lang", "language")):
        rows = [r for r in dist if r["metric"] == metric]
        cols = ["split", "lang", "tasks"] if metric == "lang" else ["split", "bin_lo", "bin_hi", "tasks"]
        parts += [note(f"Tasks by {title}" + ("" if metric == "lang" else " (log2 bins: lo <= value < hi)")),
                  table_html(rows, cols, csv_name="tasks_distributions")]
    page.section("tasks", "Tasks from repository history", parts)

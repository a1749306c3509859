"""The repository-tasks part of the report: the commits funnel and what the tasks look like.

    tasks_funnel          commits listed -> read -> filtered -> deduplicated -> candidates -> eval / train,
                          and the edit set's examples (from the stages' ``_stats.json``)
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

FUNNEL_SCHEMA = pa.schema([("step", pa.int32()), ("what", pa.string()), ("stage", pa.string()), ("count", pa.int64())])
DIST_SCHEMA = pa.schema([
    ("metric", pa.string()), ("split", pa.string()), ("bin_lo", pa.int64()), ("bin_hi", pa.int64()),
    ("lang", pa.string()), ("tasks", pa.int64()),
])  # fmt: skip

METRICS = {"patch_lines": "diff size (changed code lines)", "patch_files": "files changed",
           "description_chars": "description length (chars)"}  # fmt: skip


def _funnel_steps(data: RunData) -> list[tuple[str, str, int | None]]:
    s = data.stats

    def out(stage: str) -> int | None:
        return s[stage]["rows_out"] if stage in s else None

    counters = s.get("task_outputs", {}).get("counters", {})
    return [
        ("commits listed", "commits", s["commits"]["rows_in"] if "commits" in s else None),
        ("commits read", "commits", out("commits")),
        ("filtered", "commit_filters", out("commit_filters")),
        ("deduplicated", "commit_dedup", out("commit_dedup")),
        ("task candidates", "task_candidates", out("task_candidates")),
        ("evaluation tasks", "task_outputs", counters.get("tasks_eval") if "task_outputs" in s else None),
        ("training tasks", "task_outputs", counters.get("tasks_train") if "task_outputs" in s else None),
        ("edit examples", "edit_set", out("edit_set")),
        ("edit examples rendered", "sft_render", out("sft_render") if "edit_set" in s else None),
    ]


def tasks_funnel(data: RunData) -> pa.Table:
    """Commits through the stages to tasks and edit examples (steps of stages that ran)."""
    rows = [{"step": i, "what": what, "stage": stage, "count": n}
            for i, (what, stage, n) in enumerate(_funnel_steps(data)) if n is not None]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=FUNNEL_SCHEMA)


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


def build_tables(data: RunData) -> dict[str, pa.Table]:
    """The tasks tables, for a run that mined commits (none otherwise)."""
    if "commits" not in data.stats:
        return {}
    return {"tasks_funnel": tasks_funnel(data), "tasks_distributions": tasks_distributions(data)}


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
        note("Commits through the stages to SWE-bench tasks (train / evaluation by commit time) and edit "
             "examples; every drop and its reason is in the drops section."),
        chart, table_html(funnel, ["what", "stage", "count"], csv_name="tasks_funnel"),
    ]
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

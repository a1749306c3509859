"""The environments section of the report: the yield funnel, the CPU cost, failures by
reason, and each repository version's verdict.

    repositories -> candidates -> installs -> test runs -> per-test results
        -> at least min_passed -> at least min_pass_rate -> reproduced in a fresh tree
        -> verified environments -> task candidates -> validated tasks

read from the stats of ``env_discover``, ``env_verify`` and ``task_validate`` (their
counters and drop counts by ecosystem). A run without those stages gets no section.
``verdicts`` reads the ``env_verify`` outputs and drops for the per-repository lines the
CLI prints at the end of a run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from codecorpus import schema
from codecorpus.reports.html import Page, note, rows_of, table_html

YIELD_SCHEMA = pa.schema([("step", pa.string()), ("count", pa.int64()), ("of_previous", pa.float64())])
COST_SCHEMA = pa.schema([("per", pa.string()), ("count", pa.int64()), ("cpu_seconds", pa.float64()),
                         ("cpu_seconds_each", pa.float64())])
VERDICT_SCHEMA = pa.schema([("repo", pa.string()), ("version", pa.string()), ("verdict", pa.string()),
                            ("passed", pa.int64()), ("failed", pa.int64()), ("wall_seconds", pa.float64())])
FAILURE_SCHEMA = pa.schema([("stage", pa.string()), ("reason", pa.string()), ("ecosystem", pa.string()),
                            ("count", pa.int64())])


def _counter(stats: dict[str, dict[str, Any]], stage: str, key: str) -> int:
    return int((stats.get(stage) or {}).get("counters", {}).get(key, 0))


def _rows_out(stats: dict[str, dict[str, Any]], stage: str) -> int:
    return int((stats.get(stage) or {}).get("rows_out", 0))


def yield_funnel(stats: dict[str, dict[str, Any]]) -> pa.Table:
    """One row per funnel step; ``of_previous`` is the share of the step before it."""
    steps = [
        ("repositories", _counter(stats, "env_discover", "repositories")),
        ("candidates", _counter(stats, "env_discover", "candidates")),
        ("dependency versions", _rows_out(stats, "env_discover")),
        ("installs", _counter(stats, "env_verify", "installed")),
        ("test runs", _counter(stats, "env_verify", "test_runs")),
        ("per-test results", _counter(stats, "env_verify", "per_test_results")),
        ("at least min_passed passing", _counter(stats, "env_verify", "min_passed")),
        ("at least min_pass_rate", _counter(stats, "env_verify", "min_pass_rate")),
        ("reproduced in a fresh tree", _counter(stats, "env_verify", "fresh_tree")),
        ("verified environments", _rows_out(stats, "env_verify")),
        ("task candidates", _counter(stats, "task_validate", "task_candidates")),
        ("validated tasks", _rows_out(stats, "task_validate")),
    ]
    rows, prev = [], None
    for step, count in steps:
        rows.append({"step": step, "count": count,
                     "of_previous": round(count / prev, 4) if prev else None})
        prev = count
    return pa.Table.from_pylist(rows, schema=YIELD_SCHEMA)


def costs(stats: dict[str, dict[str, Any]]) -> pa.Table:
    """Sandboxed CPU-seconds per verified environment and per validated task."""
    rows = []
    for per, stage in (("verified environment", "env_verify"), ("validated task", "task_validate")):
        cpu = _counter(stats, stage, "cpu_ms") / 1000
        n = _rows_out(stats, stage)
        rows.append({"per": per, "count": n, "cpu_seconds": round(cpu, 3),
                     "cpu_seconds_each": round(cpu / n, 3) if n else None})
    return pa.Table.from_pylist(rows, schema=COST_SCHEMA)


def failures(stats: dict[str, dict[str, Any]]) -> pa.Table:
    """Drops of the environment stages (the repo-envs pipeline's) by reason and ecosystem (the
    toolchain found)."""
    from codecorpus.pipeline.pipelines import pipeline_stages

    rows = [{"stage": stage, "reason": reason, "ecosystem": eco, "count": int(n)}
            for stage in pipeline_stages("repo-envs")
            for eco, reasons in sorted((stats.get(stage) or {}).get("dropped_by_lang", {}).items())
            for reason, n in sorted(reasons.items())]
    return pa.Table.from_pylist(rows, schema=FAILURE_SCHEMA)


def verdicts(run_dir: Path) -> pa.Table:
    """One row per repository version ``env_verify`` judged: ``verified`` or the drop reason
    with its detail, tests passed and failed, and the wall seconds of its sandboxed commands."""
    paths = schema.RunPaths(Path(run_dir))
    rows = []
    for part in sorted(paths.stage_dir("env_verify").glob("*.parquet")):
        for row in pq.read_table(part).to_pylist():
            env = json.loads(row["verification"])
            statuses = list(env.get("tests", {}).values())
            rows.append({"repo": row[schema.REPO], "version": row[schema.ID], "verdict": "verified",
                         "passed": statuses.count("passed"), "failed": statuses.count("failed"),
                         "wall_seconds": env.get("wall_seconds", 0.0)})
    for part in sorted(paths.dropped_dir("env_verify").glob("*.parquet")):
        for row in pq.read_table(part).to_pylist():
            try:
                detail = json.loads(row[schema.DETAIL] or "{}")
            except ValueError:
                detail = {}
            why = detail.get("detail") if isinstance(detail, dict) else ""
            rows.append({"repo": row[schema.REPO], "version": row[schema.ID],
                         "verdict": row[schema.REASON] + (f": {why}" if why else ""),
                         "passed": int(detail.get("passed", 0)), "failed": int(detail.get("failed", 0)),
                         "wall_seconds": float(detail.get("wall_seconds", 0.0))})
    rows.sort(key=lambda r: (r["repo"], r["version"]))
    return pa.Table.from_pylist(rows, schema=VERDICT_SCHEMA)


def verdict_lines(run_dir: Path) -> list[str]:
    """The per-repository lines printed at the end of a run (none without ``env_verify``)."""
    if not schema.RunPaths(Path(run_dir)).stage_dir("env_verify").is_dir():
        return []
    return [f"{r['version']}: {r['verdict']} ({r['passed']} passed, {r['failed']} failed, "
            f"{r['wall_seconds']:.1f} s)" for r in verdicts(run_dir).to_pylist()]


def tables(stats: dict[str, dict[str, Any]]) -> dict[str, pa.Table]:
    """The section's tables by report file name (none for a run without environment stages)."""
    if "env_discover" not in stats:
        return {}
    return {"env_yield": yield_funnel(stats), "env_costs": costs(stats), "env_failures": failures(stats)}


def section(page: Page, t: dict[str, pa.Table]) -> None:
    """Add the environments section when the run has one."""
    if "env_yield" not in t:
        return
    page.section("environments", "Environments and verified tasks", [
        note("Repositories to verified environments to validated tasks (FAIL_TO_PASS non-empty). A "
             "verified environment ran in the sandbox with per-test results (never an exit code alone), "
             "at least min_passed passing tests at a pass rate of at least min_pass_rate, the same counts "
             "in a fresh checkout readied by its spec's steps, and its own packages imported from the "
             "work tree; each step below counts the versions that got through it."),
        table_html(rows_of(t["env_yield"]), ["step", "count", "of_previous"], {"of_previous": "pct"},
                   csv_name="env_yield"),
        note("CPU-seconds of the sandboxed commands (installs and test runs, failures included)."),
        table_html(rows_of(t["env_costs"]), ["per", "count", "cpu_seconds", "cpu_seconds_each"],
                   csv_name="env_costs"),
        note("Failures by reason and ecosystem."),
        table_html(rows_of(t["env_failures"]), ["stage", "reason", "ecosystem", "count"],
                   csv_name="env_failures"),
    ])

"""The report's tables, built from what a run directory holds (stats, drop logs, parts, manifests).

Every table is long form (one fact per row) so that polars or DuckDB can
filter and pivot it; docs/reports.md documents their columns. A table whose data
the run does not have (no dedup stage, no mixed set, no long-context set, a
run stopped with ``--until``) is simply empty: the report degrades, it never
fails on a partial run. Nothing here holds a whole stage in memory except the
columns a histogram needs (one number per document).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.manifests.manifest import set_kind
from codecorpus.pipeline import pipelines
from codecorpus.reports import scores
from codecorpus.reports.run import RunData as RunData
from codecorpus.reports.run import load_run as load_run
from codecorpus.storage import mirror as store
from codecorpus.storage.parquet import parquet_schema, read_parquet_files


def _has_tokens(s: dict[str, Any]) -> bool:
    return bool(s.get("tokens_in") or s.get("tokens_out"))


# --- funnel and mix -------------------------------------------------------------------------


def funnel(data: RunData) -> pa.Table:
    """One row per stage (documents, bytes, tokens in and out, drops, skipped entries), then one
    row per output set under the stage that wrote it, with the tokens its shards hold.

    Skipped entries (directories, links: not documents) are in their own column and
    never in ``docs_dropped`` or ``drop_rate``. A packing stage has no single token
    figure: each set holds every document's copies (mixture upsampling, long-context
    repetition), so ``tokens_out`` is given per set, from the set manifests.
    """
    rows, set_stages = [], pipelines.set_stages()
    for step, stage in enumerate(data.stages):
        s = data.stats[stage]
        tok = _has_tokens(s)
        dropped = sum(s["dropped"].values())
        set_rows = _set_rows(data, stage, step, s) if stage in set_stages else []
        rows.append({
            "stage": stage, "set": None, "step": step,
            "docs_in": s["rows_in"], "docs_out": s["rows_out"], "docs_dropped": dropped,
            "skipped_entries": sum(s.get("skipped_entries", {}).values()),
            "bytes_in": s["bytes_in"], "bytes_out": s["bytes_out"],
            "bytes_dropped": s.get("bytes_dropped", sum(s.get("dropped_bytes", {}).values())),
            "bytes_changed": s.get("bytes_changed", 0),
            "tokens_in": s["tokens_in"] if tok else None,
            "tokens_out": s["tokens_out"] if tok and not set_rows else None,
            "drop_rate": dropped / s["rows_in"] if s["rows_in"] else 0.0,
        })
        rows += set_rows
    return _table(rows, FUNNEL_SCHEMA)


def _set_rows(data: RunData, stage: str, step: int, s: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per output set of the run, under ``stage``, the stage that wrote them (a run's
    pipeline has one stage that writes sets, ``StageSpec.writes_sets``): the set's documents
    and tokens as its manifest records them, beside the stage's own in figures.

    For ``task_outputs`` those in figures are its tasks, not the rendered examples the edit set
    was packed from: a known fault, left because fixing it changes the quickstart report's bytes."""
    rows = []
    for name, m in sorted(data.sets.items()):
        t = m.get("totals", {})
        rows.append({
            "stage": stage, "set": name, "step": step, "docs_in": s["rows_in"], "docs_out": t.get("documents", 0),
            "docs_dropped": 0, "skipped_entries": 0, "bytes_in": s["bytes_in"], "bytes_out": None,
            "bytes_dropped": 0, "bytes_changed": 0, "tokens_in": s["tokens_in"], "tokens_out": t.get("tokens", 0),
            "drop_rate": 0.0,
        })
    return rows


def skipped_entries(data: RunData) -> pa.Table:
    """Per stage and reason: entries stepped over that are not documents (from the ``_skipped`` logs)."""
    rows = []
    for stage in data.stages:
        files = store.list_files(data.run.skipped_dir(stage), "*.parquet", fetch=True)
        if files:
            t = read_parquet_files(files, [schema.REASON])
            for r in t.group_by([schema.REASON]).aggregate([(schema.REASON, "count")]).to_pylist():
                rows.append({"stage": stage, "reason": r[schema.REASON], "entries": r[f"{schema.REASON}_count"]})
        else:  # no log: the stats still count them
            rows += [{"stage": stage, "reason": k, "entries": n}
                     for k, n in data.stats[stage].get("skipped_entries", {}).items()]
    rows.sort(key=lambda r: (data.stages.index(r["stage"]), r["reason"]))
    return _table(rows, SKIPPED_SCHEMA)


def mix_by_stage(data: RunData) -> pa.Table:
    """Per stage, side (in/out) and language: documents, bytes, tokens and their shares."""
    rows = []
    for step, stage in enumerate(data.stages):
        s = data.stats[stage]
        tok = _has_tokens(s)
        for side in ("in", "out"):
            langs = s.get(f"langs_{side}") or {}
            totals = [sum(v[i] for v in langs.values()) for i in range(3)]
            for lang, (docs, nbytes, tokens) in sorted(langs.items()):
                rows.append({
                    "stage": stage, "step": step, "side": side, "lang": lang,
                    "docs": docs, "bytes": nbytes, "tokens": tokens if tok else None,
                    "docs_share": docs / totals[0] if totals[0] else 0.0,
                    "bytes_share": nbytes / totals[1] if totals[1] else 0.0,
                    "tokens_share": (tokens / totals[2] if totals[2] else 0.0) if tok else None,
                })
    return _table(rows, MIX_SCHEMA)


# --- drops and dedup ------------------------------------------------------------------------


def drops(data: RunData) -> pa.Table:
    """Per stage, reason and language: dropped documents and bytes (from the drop logs)."""
    rows = []
    for stage in data.stages:
        files = store.list_files(data.run.dropped_dir(stage), "*.parquet", fetch=True)
        if files:
            t = read_parquet_files(files, [schema.REASON, schema.LANG, schema.BYTES])
            g = t.group_by([schema.REASON, schema.LANG]).aggregate([(schema.BYTES, "count"), (schema.BYTES, "sum")])
            for r in g.to_pylist():
                rows.append({"stage": stage, "reason": r[schema.REASON], "lang": r[schema.LANG],
                             "docs": r[f"{schema.BYTES}_count"], "bytes": r[f"{schema.BYTES}_sum"]})
        else:  # no drop log: the stats still have counts per language
            for lang, reasons in data.stats[stage].get("dropped_by_lang", {}).items():
                rows += [{"stage": stage, "reason": k, "lang": lang, "docs": n, "bytes": None}
                         for k, n in reasons.items()]
    rows.sort(key=lambda r: (data.stages.index(r["stage"]), r["reason"], r["lang"]))
    return _table(rows, DROPS_SCHEMA)


DEDUP_STAGE = "dedup"


def dedup_by_lang(data: RunData) -> pa.Table:
    """Per language: documents into dedup, duplicates removed (any dedup reason), the rate."""
    s = data.stats.get(DEDUP_STAGE)
    if not s:
        return _table([], DEDUP_SCHEMA)
    rows = []
    for lang, (docs, _, _) in sorted((s.get("langs_in") or {}).items()):
        dups = sum(s.get("dropped_by_lang", {}).get(lang, {}).values())
        rows.append({"lang": lang, "docs_in": docs, "duplicates": dups, "dup_rate": dups / docs if docs else 0.0})
    return _table(rows, DEDUP_SCHEMA)


def cluster_sizes(data: RunData) -> pa.Table:
    """Clusters by size: near-dup ``dup_cluster``/``dup_cluster_size`` if the run has them, else exact ``dup_count``."""
    files = store.list_files(data.run.stage_dir(DEDUP_STAGE), "part-*.parquet", fetch=True)
    if not files:
        return _table([], CLUSTER_SCHEMA)
    names = parquet_schema(files[0]).names
    if "dup_cluster" in names and "dup_cluster_size" in names:
        t = read_parquet_files(files, ["dup_cluster", "dup_cluster_size"])
        t = t.group_by(["dup_cluster"]).aggregate([("dup_cluster_size", "max")])
        sizes = t.column("dup_cluster_size_max")
        kind = "near"
    elif schema.DUP_COUNT in names:
        sizes = read_parquet_files(files, [schema.DUP_COUNT]).column(schema.DUP_COUNT)
        kind = "exact"
    else:
        return _table([], CLUSTER_SCHEMA)
    values = pc.fill_null(sizes, 1).to_numpy(zero_copy_only=False).astype(np.int64)
    uniq, counts = np.unique(values, return_counts=True)
    rows = [{"kind": kind, "size": int(u), "clusters": int(c), "documents": int(u * c)}
            for u, c in zip(uniq, counts, strict=True)]
    return _table(rows, CLUSTER_SCHEMA)


# --- score and length distributions ------------------------------------------------------------


def filter_tables(data: RunData) -> dict[str, pa.Table]:
    """``filter_rules``, ``filter_thresholds`` and ``filter_scores`` (see ``reports/scores.py``)."""
    rows = scores.build(data)
    return {name: _table(rows[name], sch) for name, sch in (
        ("filter_rules", RULES_SCHEMA), ("filter_thresholds", THRESHOLDS_SCHEMA), ("filter_scores", SCORES_SCHEMA))}


def _numeric_columns(part: Path) -> set[str]:
    sch = parquet_schema(part)
    return {f.name for f in sch if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)}


def _column_values(stage_dir: Path, column: str) -> np.ndarray:
    files = store.list_files(stage_dir, "part-*.parquet", fetch=True)
    if not files:
        return np.zeros(0)
    col = read_parquet_files(files, [column]).column(column)
    return pc.drop_null(col).to_numpy().astype(np.float64)


def lengths(data: RunData) -> pa.Table:
    """Document length histograms on log2 bins: bytes entering and leaving the pipeline, tokens per document."""
    doc_stages = [s for s in data.stages if store.exists(data.run.part(s, 0))]
    if not doc_stages:
        return _table([], LENGTHS_SCHEMA)
    series = [("bytes", doc_stages[0], schema.BYTES)]
    if doc_stages[-1] != doc_stages[0]:
        series.append(("bytes", doc_stages[-1], schema.BYTES))
    tok_stage = next((s for s in reversed(doc_stages) if schema.NUM_TOKENS in _numeric_columns(data.run.part(s, 0))), None)
    if tok_stage:
        series.append(("tokens", tok_stage, schema.NUM_TOKENS))
    rows = []
    for metric, stage, col in series:
        values = _column_values(data.run.stage_dir(stage), col)
        if not values.size:
            continue
        top = max(1, int(np.ceil(np.log2(max(values.max(), 1)))) + 1)
        counts = np.bincount(np.floor(np.log2(np.maximum(values, 1))).astype(np.int64), minlength=top)
        for k, n in enumerate(counts):
            rows.append({"metric": metric, "stage": stage, "bin_lo": 2**k, "bin_hi": 2 ** (k + 1), "docs": int(n)})
    return _table(rows, LENGTHS_SCHEMA)


# --- sets: mixture and long context ------------------------------------------------------------


def mix_plan(data: RunData) -> pa.Table:
    """Per mixed set and group: the plan (available, target, rate, shortfall) and what was achieved."""
    rows = []
    for set_name, plan in sorted(data.plans.items()):
        achieved = (data.sets.get(set_name, {}).get("mix") or {}).get("achieved", {})
        for g in plan["groups"]:
            a = achieved.get(g["group"], {})
            rows.append({
                "set": set_name, "group": g["group"], "status": g["status"],
                "available_docs": g["available_docs"], "available_tokens": g["available_tokens"],
                "natural_share": g["natural_share"], "weight": g["weight"], "target_share": g["target_share"],
                "target_tokens": g["target_tokens"], "rate": g["rate"], "max_epochs": g["max_epochs"],
                "shortfall_tokens": g["shortfall_tokens"], "planned_tokens": g["planned_tokens"],
                "achieved_tokens": a.get("tokens"), "achieved_share": a.get("share"),
                "achieved_docs": a.get("documents"), "achieved_copies": a.get("copies"),
                "error_vs_target": a.get("error_vs_target"),
            })
    return _table(rows, PLAN_SCHEMA)


def sets(data: RunData) -> pa.Table:
    """Per output set: kind, seq_len, totals, padding and fill."""
    rows = []
    for name, m in sorted(data.sets.items()):
        t, seq_len = m.get("totals", {}), m.get("seq_len") or 0
        seqs = t.get("sequences", 0)
        rows.append({
            "set": name, "kind": set_kind(m),
            "seq_len": seq_len, "shards": len(m.get("shards", [])), "tokens": t.get("tokens", 0),
            "documents": t.get("documents", 0), "sequences": seqs, "padding_tokens": t.get("padding_tokens", 0),
            "fill": t.get("tokens", 0) / (seqs * seq_len) if seqs and seq_len else None,
            "truncated_documents": (m.get("packing") or {}).get("truncated_documents"),
        })
    return _table(rows, SETS_SCHEMA)


def long_context(data: RunData) -> pa.Table:
    """Every long-context statistic of every set that has them, one (set, key, value) per row.

    Histograms (dict values) become one row per bucket with the key ``name[bucket]``.
    """
    rows = []
    for name, m in sorted(data.sets.items()):
        for key, value in sorted((m.get("long_context") or {}).items()):
            if isinstance(value, dict):
                rows += [{"set": name, "key": key, "bucket": b, "value": float(v)} for b, v in _every_bucket(value)]
            elif isinstance(value, int | float):
                rows.append({"set": name, "key": key, "bucket": None, "value": float(value)})
    return _table(rows, LONG_SCHEMA)


def _every_bucket(hist: dict[str, float]) -> list[tuple[str, float]]:
    """A histogram's buckets in order, the empty ones between its first and last filled in.

    Buckets named by a power of two (``2^k``, ``<=2^k``) are filled in; other names keep
    their order.

    >>> _every_bucket({"<=2^12": 3, "<=2^10": 1})
    [('<=2^10', 1), ('<=2^11', 0), ('<=2^12', 3)]
    """
    found = [re.fullmatch(r"(.*\^)(\d+)", str(b)) for b in hist]
    prefixes = {m.group(1) for m in found if m}
    if not hist or not all(found) or len(prefixes) != 1:
        return [(str(b), v) for b, v in hist.items()]
    prefix = prefixes.pop()
    powers = {int(m.group(2)): v for m, v in zip(found, hist.values(), strict=True)}
    return [(f"{prefix}{k}", powers.get(k, 0)) for k in range(min(powers), max(powers) + 1)]


# --- schemas: the report's formats, defined once (docs/reports.md documents them) ---------------

_i, _f, _s = pa.int64(), pa.float64(), pa.string()
FUNNEL_SCHEMA = pa.schema([
    ("stage", _s), ("set", _s), ("step", _i), ("docs_in", _i), ("docs_out", _i), ("docs_dropped", _i),
    ("skipped_entries", _i), ("bytes_in", _i), ("bytes_out", _i), ("bytes_dropped", _i), ("bytes_changed", _i),
    ("tokens_in", _i), ("tokens_out", _i), ("drop_rate", _f),
])
SKIPPED_SCHEMA = pa.schema([("stage", _s), ("reason", _s), ("entries", _i)])
MIX_SCHEMA = pa.schema([
    ("stage", _s), ("step", _i), ("side", _s), ("lang", _s), ("docs", _i), ("bytes", _i), ("tokens", _i),
    ("docs_share", _f), ("bytes_share", _f), ("tokens_share", _f),
])
DROPS_SCHEMA = pa.schema([("stage", _s), ("reason", _s), ("lang", _s), ("docs", _i), ("bytes", _i)])
DEDUP_SCHEMA = pa.schema([("lang", _s), ("docs_in", _i), ("duplicates", _i), ("dup_rate", _f)])
CLUSTER_SCHEMA = pa.schema([("kind", _s), ("size", _i), ("clusters", _i), ("documents", _i)])
RULES_SCHEMA = pa.schema([
    ("rule", _s), ("column", _s), ("direction", _s), ("thresholds", _s), ("docs_scored", _i), ("dropped", _i),
    ("dropped_bytes", _i),
])
THRESHOLDS_SCHEMA = pa.schema([
    ("rule", _s), ("direction", _s), ("lang", _s), ("threshold", _f), ("kept", _i), ("dropped", _i),
])
SCORES_SCHEMA = pa.schema([
    ("rule", _s), ("column", _s), ("direction", _s), ("scale", _s), ("bin", _i), ("bin_lo", _f), ("bin_hi", _f),
    ("label", _s), ("kept", _i), ("dropped", _i),
])
LENGTHS_SCHEMA = pa.schema([("metric", _s), ("stage", _s), ("bin_lo", _i), ("bin_hi", _i), ("docs", _i)])
PLAN_SCHEMA = pa.schema([
    ("set", _s), ("group", _s), ("status", _s), ("available_docs", _i), ("available_tokens", _i),
    ("natural_share", _f), ("weight", _f), ("target_share", _f), ("target_tokens", _f), ("rate", _f),
    ("max_epochs", _f), ("shortfall_tokens", _i), ("planned_tokens", _i), ("achieved_tokens", _i),
    ("achieved_share", _f), ("achieved_docs", _i), ("achieved_copies", _i), ("error_vs_target", _f),
])
SETS_SCHEMA = pa.schema([
    ("set", _s), ("kind", _s), ("seq_len", _i), ("shards", _i), ("tokens", _i), ("documents", _i),
    ("sequences", _i), ("padding_tokens", _i), ("fill", _f), ("truncated_documents", _i),
])
LONG_SCHEMA = pa.schema([("set", _s), ("key", _s), ("bucket", _s), ("value", _f)])


def _table(rows: list[dict[str, Any]], sch: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=sch) if rows else sch.empty_table()


BUILDERS = {
    "funnel": funnel, "skipped_entries": skipped_entries, "mix_by_stage": mix_by_stage, "drops": drops,
    "dedup_by_lang": dedup_by_lang, "cluster_sizes": cluster_sizes, "lengths": lengths,
    "mix_plan": mix_plan, "sets": sets, "long_context": long_context,
}
"""Report tables by file name (``RUN/report/<name>.parquet|csv``), one builder each; the
filter tables (``filter_rules``, ``filter_thresholds``, ``filter_scores``) are built together."""


def build_tables(data: RunData) -> dict[str, pa.Table]:
    tables = {name: fn(data) for name, fn in BUILDERS.items()}
    tables.update(filter_tables(data))
    return tables

"""``codecorpus report RUN [--compare OTHER]``: the audit report of a run directory.

    load the run (stats, drop logs, parts, manifests, mix plan)
      -> long-form tables   RUN/report/<table>.parquet and .csv
      -> index.html         one chart and one table per section, self-contained
      -> compare.html       (with --compare) language share and drop deltas between two runs

Called at the end of every ``codecorpus run`` and on demand. It reads only
files, never Ray, and only the columns its histograms need.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from codecorpus import schema
from codecorpus.reports import compare as cmp
from codecorpus.reports import envs as envrep
from codecorpus.reports import scores as tsc
from codecorpus.reports import tables as tb
from codecorpus.reports import tasks as tasks_report
from codecorpus.reports.html import (
    Page,
    empty,
    note,
    rows_of,
    series_by,
    table_html,
    top_keys,
    warning,
)
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.storage.parquet import write_parquet


def write_tables(root: Path, tables: dict[str, pa.Table]) -> None:
    """Every table as zstd Parquet and as CSV (header always written, even when empty)."""
    run = schema.RunPaths(root)
    for name, table in tables.items():
        write_parquet(run.report_table(name, ".parquet"), table)
        sink = pa.BufferOutputStream()
        pacsv.write_csv(table, sink)
        atomic_write_bytes(run.report_table(name, ".csv"), sink.getvalue().to_pybytes())


def write_report(root: Path | str, compare_to: Path | str | None = None) -> list[Path]:
    """Write RUN/report/ (and compare.html against ``compare_to``); returns the pages written."""
    data = tb.load_run(root)
    tables = {**tb.build_tables(data), **tasks_report.build_tables(data), **envrep.tables(data.stats)}
    pages = [data.run.report_index]
    _remove_compare(data.run)  # a comparison of an older state of this run must not survive
    if compare_to is not None:
        other = tb.load_run(compare_to)
        deltas = cmp.build_deltas(data, tables, other, tb.build_tables(other))
        tables.update(deltas)
        atomic_write_bytes(data.run.report_compare, cmp.render(data, other, deltas).encode())
        pages.append(data.run.report_compare)
    write_tables(data.run.root, tables)
    atomic_write_bytes(data.run.report_index, render_index(data, tables).encode())
    return pages


def _remove_compare(run: schema.RunPaths) -> None:
    for path in [run.report_compare, *store.list_files(run.report_dir, "compare_*")]:
        store.remove_file(path)


# --- the page ------------------------------------------------------------------------------------


def render_index(data: tb.RunData, t: dict[str, pa.Table]) -> str:
    stages = " -> ".join(data.stages) or "no stage finished yet"
    page = Page(f"codecorpus report: {data.name}", f"stages: {stages}")
    funnel_section(page, rows_of(t["funnel"]), rows_of(t["skipped_entries"]))
    tasks_report.section(page, t)
    envrep.section(page, t)
    mix_section(page, data, rows_of(t["mix_by_stage"]))
    drops_section(page, rows_of(t["drops"]))
    dedup_section(page, rows_of(t["dedup_by_lang"]), rows_of(t["cluster_sizes"]))
    scores_section(page, rows_of(t["filter_rules"]), rows_of(t["filter_thresholds"]), rows_of(t["filter_scores"]))
    lengths_section(page, rows_of(t["lengths"]))
    plan_section(page, data, rows_of(t["mix_plan"]))
    sets_section(page, rows_of(t["sets"]), rows_of(t["long_context"]))
    return page.render()


def _metric(series: list[dict[str, Any]], fmt: str = "int") -> dict[str, Any]:
    return {"series": series, "format": fmt}


def funnel_section(page: Page, rows: list[dict[str, Any]], skipped: list[dict[str, Any]]) -> None:
    if not rows:
        page.section("funnel", "Funnel", [empty("no stage has finished")])
        return
    for r in rows:
        r["step"] = r["stage"] if r["set"] is None else f"{r['stage']}: set {r['set']}"
    cats = [r["step"] for r in rows]
    metrics = {}
    for m, fmt in (("docs", "int"), ("bytes", "bytes"), ("tokens", "int")):
        if m == "tokens" and all(r["tokens_out"] is None for r in rows):
            continue
        metrics[m] = _metric([
            {"name": "in", "values": [r[f"{m}_in"] or 0 for r in rows]},
            {"name": "out", "values": [r[f"{m}_out"] or 0 for r in rows]},
        ], fmt)
    chart = page.chart({"kind": "hbar", "categories": cats, "metrics": metrics, "label_width": 200})
    cols = ["step", "docs_in", "docs_out", "docs_dropped", "drop_rate", "skipped_entries", "bytes_in", "bytes_out",
            "bytes_dropped", "bytes_changed", "tokens_in", "tokens_out"]
    parts = [
        note("Documents, bytes and tokens into and out of every stage (tokens are counted from tokenize on); "
             "bytes_in + bytes_changed = bytes_out + bytes_dropped for every stage, bytes_changed being what "
             "decoding and redaction rewrote. A packing stage writes every document into each set, copies "
             "included: its tokens are given per set, as the shards hold them."),
        chart, table_html(rows, cols, {"drop_rate": "pct"}, csv_name="funnel"),
    ]
    if skipped:
        parts.append(note("Skipped entries are not documents (directories stepped over, links, special files, "
                          "submodules): counted here and logged in <stage>/_skipped/, never as drops."))
        parts.append(table_html(skipped, ["stage", "reason", "entries"], csv_name="skipped_entries"))
    page.section("funnel", "Funnel through the stages", parts)


def mix_section(page: Page, data: tb.RunData, rows: list[dict[str, Any]]) -> None:
    out_rows = [r for r in rows if r["side"] == "out" and r["lang"]]
    tagged = [s for s in data.stages if any(r["stage"] == s and r["lang"] != "unknown" for r in out_rows)]
    if not tagged:
        page.section("mix", "Language mix per stage", [empty("no stage has tagged languages yet")])
        return
    last = tagged[-1]
    keep = top_keys({r["lang"]: r["bytes"] for r in out_rows if r["stage"] == last})
    metrics = {}
    for m, fmt in (("docs", "int"), ("bytes", "bytes"), ("tokens", "int")):
        if m != "tokens" or any(r["tokens"] for r in out_rows):
            metrics[m] = _metric(series_by(out_rows, lambda r: r["stage"], "lang", m, tagged, keep), fmt)
    chart = page.chart({"kind": "hbar", "percent": True, "categories": tagged, "metrics": metrics})
    first = tagged[0]
    before = {r["lang"]: r for r in out_rows if r["stage"] == first}
    after = {r["lang"]: r for r in out_rows if r["stage"] == last}
    langs = sorted(set(before) | set(after), key=lambda k: (-(before.get(k) or after.get(k))["bytes"], k))
    table = [{
        "lang": lang,
        f"docs ({first})": (before.get(lang) or {}).get("docs", 0), f"docs ({last})": (after.get(lang) or {}).get("docs", 0),
        f"bytes share ({first})": (before.get(lang) or {}).get("bytes_share", 0.0),
        f"bytes share ({last})": (after.get(lang) or {}).get("bytes_share", 0.0),
        f"tokens ({last})": (after.get(lang) or {}).get("tokens"),
        f"tokens share ({last})": (after.get(lang) or {}).get("tokens_share"),
    } for lang in langs]
    cols = list(table[0])
    kinds = {c: "pct" for c in cols if "share" in c}
    page.section("mix", "Language mix per stage", [
        note(f"Share of each language in the output of every stage (top {len(keep)} by bytes at {last}; "
             "the rest as other). The table compares the first tagged stage with the last."),
        chart, table_html(table, cols, kinds, csv_name="mix_by_stage"),
    ])


def drops_section(page: Page, rows: list[dict[str, Any]]) -> None:
    if not rows:
        page.section("drops", "Drops by reason and language", [empty("no document was dropped")])
        return
    per_cat: dict[str, int] = {}
    for r in rows:
        per_cat[f"{r['stage']}: {r['reason']}"] = per_cat.get(f"{r['stage']}: {r['reason']}", 0) + r["docs"]
    cats = sorted(per_cat, key=lambda c: (-per_cat[c], c))  # ties by name: same bytes on every run
    agg: dict[str, float] = {}
    for r in rows:
        agg[r["lang"]] = agg.get(r["lang"], 0) + r["docs"]
    keep = top_keys(agg)
    key = lambda r: f"{r['stage']}: {r['reason']}"  # noqa: E731
    metrics = {"docs": _metric(series_by(rows, key, "lang", "docs", cats, keep))}
    if all(r["bytes"] is not None for r in rows):
        metrics["bytes"] = _metric(series_by(rows, key, "lang", "bytes", cats, keep), "bytes")
    chart = page.chart({"kind": "hbar", "stacked": True, "categories": cats, "metrics": metrics, "label_width": 240})
    page.section("drops", "Drops by reason and language", [
        note("Every dropped document has a machine-readable reason (from the stages' drop logs)."),
        chart, table_html(rows, ["stage", "reason", "lang", "docs", "bytes"], csv_name="drops"),
    ])


def dedup_section(page: Page, by_lang: list[dict[str, Any]], clusters: list[dict[str, Any]]) -> None:
    if not by_lang and not clusters:
        page.section("dedup", "Deduplication", [empty("this run has no dedup stage output")])
        return
    parts = [note("Duplicate rate per language (documents removed by dedup / documents into dedup) "
                  "and the size of the duplicate clusters.")]
    if by_lang:
        ranked = sorted(by_lang, key=lambda r: (-r["docs_in"], r["lang"]))[:20]
        parts.append(page.chart({"kind": "hbar", "categories": [r["lang"] for r in ranked], "metrics": {
            "dup rate": _metric([{"name": "dup rate", "values": [r["dup_rate"] for r in ranked]}], "pct"),
            "duplicates": _metric([{"name": "duplicates", "values": [r["duplicates"] for r in ranked]}]),
        }}))
        parts.append(table_html(sorted(by_lang, key=lambda r: (-r["docs_in"], r["lang"])),
                                ["lang", "docs_in", "duplicates", "dup_rate"], {"dup_rate": "pct"}, csv_name="dedup_by_lang"))
    if clusters:
        parts.append(f"<h3>Cluster sizes ({clusters[0]['kind']} duplicates)</h3>")
        cats = [str(r["size"]) for r in clusters]
        parts.append(page.chart({"kind": "columns", "log_y": True, "categories": cats, "x_label": "cluster size",
                                 "metrics": {"clusters": _metric([{"name": "clusters", "values": [r["clusters"] for r in clusters]}]),
                                             "documents": _metric([{"name": "documents", "values": [r["documents"] for r in clusters]}])}}))
        parts.append(table_html(clusters, ["size", "clusters", "documents"], csv_name="cluster_sizes"))
    page.section("dedup", "Deduplication", parts)


def scores_section(
    page: Page, rules: list[dict[str, Any]], thresholds: list[dict[str, Any]], bins: list[dict[str, Any]]
) -> None:
    if not rules:
        page.section("scores", "Filter scores", [empty("this run has no filter rule that applied or dropped")])
        return
    parts = [note("Every filter rule that dropped a document or has a threshold, in the order the stage checks "
                  "them: max rules drop scores above the threshold, min rules below it (decontamination at or "
                  "above). Each histogram holds the kept documents the rule applied to and those it dropped; "
                  "documents dropped by an earlier rule were not scored against it. Dashed lines: thresholds.")]
    parts.append(table_html(rules, ["rule", "direction", "thresholds", "docs_scored", "dropped", "dropped_bytes"],
                            csv_name="filter_rules"))
    for rule in rules:
        mine = [r for r in bins if r["rule"] == rule["rule"]]
        if not mine:
            continue
        parts.append(f"<h3>{html.escape(rule['rule'])} ({html.escape(rule['direction'])}, "
                     f"score {html.escape(rule['column'] or '')})</h3>")
        edges = np.array([r["bin_lo"] for r in mine] + [mine[-1]["bin_hi"]])
        marks = [{"at": tsc.mark_position(t, edges, mine[0]["scale"], rule["direction"]),
                  "label": f"{rule['direction']} {t:g}"} for t in _distinct_thresholds(thresholds, rule["rule"])]
        x_label = rule["column"] + {"log": " (log bins)", "discrete": "", "single": " (one value)"}.get(
            mine[0]["scale"], "")
        continuous = mine[0]["scale"] in ("linear", "log")  # labels are lower edges; log y shows the few drops
        parts.append(page.chart({"kind": "columns", "categories": [r["label"] for r in mine], "marks": marks,
                                 "x_label": x_label, "edge_labels": continuous, "log_y": True,
                                 "metrics": {"documents": _metric([
                                     {"name": "kept", "values": [r["kept"] for r in mine]},
                                     {"name": "dropped", "values": [r["dropped"] for r in mine]}])}}))
    parts.append("<h3>Thresholds per language</h3>")
    parts.append(table_html(thresholds, ["rule", "direction", "lang", "threshold", "kept", "dropped"],
                            csv_name="filter_thresholds"))
    page.section("scores", "Filter scores", parts)


MAX_MARKS = 4


def _distinct_thresholds(thresholds: list[dict[str, Any]], rule: str) -> list[float]:
    """The rule's thresholds, the most used first (at most ``MAX_MARKS`` dashed lines)."""
    used: dict[float, int] = {}
    for r in thresholds:
        if r["rule"] == rule and r["threshold"] is not None:
            used[r["threshold"]] = used.get(r["threshold"], 0) + r["kept"] + r["dropped"]
    return sorted(sorted(used, key=lambda t: (-used[t], t))[:MAX_MARKS])


def lengths_section(page: Page, rows: list[dict[str, Any]]) -> None:
    if not rows:
        page.section("lengths", "Document lengths", [empty("no stage output to measure")])
        return
    parts = [note("Documents per length bucket (powers of two).")]
    for metric in ("bytes", "tokens"):
        mine = [r for r in rows if r["metric"] == metric]
        if not mine:
            continue
        los = sorted({r["bin_lo"] for r in mine})
        stages = sorted({r["stage"] for r in mine}, key=lambda s: [r["stage"] for r in mine].index(s))
        series = [{"name": st, "values": [sum(r["docs"] for r in mine if r["stage"] == st and r["bin_lo"] == lo) for lo in los]}
                  for st in stages]
        metrics = {st: _metric([s]) for st, s in zip(stages, series, strict=True)}
        parts.append(f"<h3>{metric} per document</h3>")
        parts.append(page.chart({"kind": "columns", "categories": [_pow2(lo) for lo in los],
                                 "x_label": f"{metric} (at least)", "metrics": metrics}))
        table = [{"bucket": f">= {_pow2(lo)}", **{st: s["values"][i] for st, s in zip(stages, series, strict=True)}}
                 for i, lo in enumerate(los)]
        parts.append(table_html(table, ["bucket", *stages], csv_name="lengths"))
    page.section("lengths", "Document lengths", parts)


def _pow2(v: int) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if v >= size:
            return f"{v // size}{unit}"
    return str(v)


def plan_section(page: Page, data: tb.RunData, rows: list[dict[str, Any]]) -> None:
    if not rows:
        page.section("mixplan", "Mixture: plan vs achieved", [empty("no output set has a mix: section")])
        return
    parts = [note("Per set and group: natural share of the tokens, the planned share and the share the packed set "
                  "achieved; rate = epochs over the group's tokens.")]
    for set_name in sorted({r["set"] for r in rows}):
        mine = [r for r in rows if r["set"] == set_name and (r["status"] != "excluded" or r["achieved_tokens"])]
        for w in data.plans.get(set_name, {}).get("warnings", []):
            parts.append(warning(w))
        parts.append(f"<h3>set {set_name}</h3>")
        cats = [r["group"] for r in mine]
        parts.append(page.chart({"kind": "hbar", "categories": cats, "metrics": {"share": _metric([
            {"name": "natural", "values": [r["natural_share"] for r in mine]},
            {"name": "planned", "values": [r["target_share"] for r in mine]},
            {"name": "achieved", "values": [r["achieved_share"] or 0 for r in mine]},
        ], "pct"), "tokens": _metric([
            {"name": "available", "values": [r["available_tokens"] for r in mine]},
            {"name": "planned", "values": [r["target_tokens"] for r in mine]},
            {"name": "achieved", "values": [r["achieved_tokens"] or 0 for r in mine]},
        ])}}))
    cols = ["set", "group", "status", "available_tokens", "natural_share", "weight", "target_share", "target_tokens",
            "rate", "max_epochs", "shortfall_tokens", "achieved_tokens", "achieved_share", "error_vs_target"]
    kinds = {c: "pct" for c in ("natural_share", "weight", "target_share", "achieved_share", "error_vs_target")}
    parts.append(table_html(rows, cols, {**kinds, "rate": "float", "target_tokens": "int"}, csv_name="mix_plan"))
    page.section("mixplan", "Mixture: plan vs achieved", parts)


def sets_section(page: Page, sets: list[dict[str, Any]], long_rows: list[dict[str, Any]]) -> None:
    if not sets:
        page.section("sets", "Output sets and long context", [empty("no output set has been packed")])
        return
    parts = [note("Every packed set: fill = tokens / (sequences x seq_len)."),
             table_html(sets, ["set", "kind", "seq_len", "shards", "tokens", "documents", "sequences",
                               "padding_tokens", "fill", "truncated_documents"], {"fill": "pct"}, csv_name="sets")]
    if not long_rows:
        parts.append(empty("no long-context set in this run"))
    for set_name in sorted({r["set"] for r in long_rows}):
        mine = [r for r in long_rows if r["set"] == set_name]
        parts.append(f"<h3>long context: {set_name}</h3>")
        for key in sorted({r["key"] for r in mine if r["bucket"] is not None}):
            hist = [r for r in mine if r["key"] == key]
            parts.append(page.chart({"kind": "columns", "categories": [r["bucket"] for r in hist], "x_label": key,
                                     "metrics": {key: _metric([{"name": key, "values": [r["value"] for r in hist]}])}}))
        scalars = [{"statistic": r["key"], "value": r["value"]} for r in mine if r["bucket"] is None]
        parts.append(table_html(scalars, ["statistic", "value"], csv_name="long_context"))
    page.section("sets", "Output sets and long context", parts)

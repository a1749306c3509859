"""``--compare``: what changed between two runs, for the audit of a recipe change.

Two delta tables (also written as ``compare_lang_share`` and ``compare_drops``):
the share of each language in each stage's output, and the documents dropped
per stage and reason. Run A is the report's own run, B the other one; deltas
are A - B. Stages are matched by name, so a stage only one run has shows with
the other side empty.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from codecorpus.reports import tables as tb
from codecorpus.reports.html import Page, empty, note, rows_of, table_html, top_keys

_i, _f, _s = pa.int64(), pa.float64(), pa.string()
LANG_SHARE_SCHEMA = pa.schema([
    ("stage", _s), ("metric", _s), ("lang", _s), ("share_a", _f), ("share_b", _f), ("delta", _f),
])
DROPS_DELTA_SCHEMA = pa.schema([
    ("stage", _s), ("reason", _s), ("docs_a", _i), ("docs_b", _i), ("delta", _i),
])


def lang_share_deltas(a: pa.Table, b: pa.Table) -> pa.Table:
    """Per stage, metric (docs/bytes/tokens) and language: share in A, in B, and A - B."""
    def shares(t: pa.Table) -> dict[tuple[str, str, str], float]:
        out = {}
        for r in rows_of(t):
            if r["side"] != "out":
                continue
            for m in ("docs", "bytes", "tokens"):
                if r[f"{m}_share"] is not None:
                    out[(r["stage"], m, r["lang"])] = r[f"{m}_share"]
        return out

    sa, sb = shares(a), shares(b)
    stages = {k[0] for k in sa} & {k[0] for k in sb}
    rows = []
    for key in sorted(set(sa) | set(sb)):
        if key[0] not in stages:
            continue
        x, y = sa.get(key, 0.0), sb.get(key, 0.0)
        rows.append({"stage": key[0], "metric": key[1], "lang": key[2], "share_a": x, "share_b": y, "delta": x - y})
    return pa.Table.from_pylist(rows, schema=LANG_SHARE_SCHEMA) if rows else LANG_SHARE_SCHEMA.empty_table()


def drop_deltas(a: pa.Table, b: pa.Table) -> pa.Table:
    """Per stage and reason: documents dropped in A, in B, and A - B."""
    def by_reason(t: pa.Table) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for r in rows_of(t):
            out[(r["stage"], r["reason"])] = out.get((r["stage"], r["reason"]), 0) + r["docs"]
        return out

    da, db = by_reason(a), by_reason(b)
    rows = [{"stage": k[0], "reason": k[1], "docs_a": da.get(k, 0), "docs_b": db.get(k, 0),
             "delta": da.get(k, 0) - db.get(k, 0)} for k in sorted(set(da) | set(db))]
    return pa.Table.from_pylist(rows, schema=DROPS_DELTA_SCHEMA) if rows else DROPS_DELTA_SCHEMA.empty_table()


def build_deltas(
    a: tb.RunData, ta: dict[str, pa.Table], b: tb.RunData, tb_: dict[str, pa.Table]
) -> dict[str, pa.Table]:
    return {
        "compare_lang_share": lang_share_deltas(ta["mix_by_stage"], tb_["mix_by_stage"]),
        "compare_drops": drop_deltas(ta["drops"], tb_["drops"]),
        "compare_funnel": _funnel_deltas(ta["funnel"], tb_["funnel"]),
    }


FUNNEL_DELTA_SCHEMA = pa.schema([
    ("stage", _s), ("docs_out_a", _i), ("docs_out_b", _i), ("bytes_out_a", _i), ("bytes_out_b", _i),
    ("tokens_out_a", _i), ("tokens_out_b", _i),
])


def _funnel_deltas(a: pa.Table, b: pa.Table) -> pa.Table:
    ra = {_step(r): r for r in rows_of(a)}
    rb = {_step(r): r for r in rows_of(b)}
    order = [*ra, *(s for s in rb if s not in ra)]
    rows = [{f"{m}_{side}": (r.get(s) or {}).get(m) for m in ("docs_out", "bytes_out", "tokens_out")
             for side, r in (("a", ra), ("b", rb))} | {"stage": s} for s in order]
    return pa.Table.from_pylist(rows, schema=FUNNEL_DELTA_SCHEMA) if rows else FUNNEL_DELTA_SCHEMA.empty_table()


def _step(row: dict[str, Any]) -> str:
    """A funnel row's name: its stage, or ``stage: set NAME`` for an output set's row."""
    return row["stage"] if row.get("set") is None else f"{row['stage']}: set {row['set']}"


def render(a: tb.RunData, b: tb.RunData, deltas: dict[str, pa.Table]) -> str:
    """compare.html: run A (this report's run) against run B."""
    label_a, label_b = run_labels(a, b)
    page = Page(f"codecorpus compare: {label_a} (A) vs {label_b} (B)", "deltas are A - B")
    share = rows_of(deltas["compare_lang_share"])
    _share_section(page, share)
    drops = rows_of(deltas["compare_drops"])
    if drops:
        cats = [f"{r['stage']}: {r['reason']}" for r in drops]
        chart = page.chart({"kind": "hbar", "categories": cats, "label_width": 240, "metrics": {"docs": {
            "format": "int", "series": [{"name": "A", "values": [r["docs_a"] for r in drops]},
                                        {"name": "B", "values": [r["docs_b"] for r in drops]}]}}})
        page.section("drops", "Drops by reason", [chart, table_html(
            drops, ["stage", "reason", "docs_a", "docs_b", "delta"], csv_name="compare_drops")])
    else:
        page.section("drops", "Drops by reason", [empty("neither run dropped a document")])
    funnel = rows_of(deltas["compare_funnel"])
    page.section("funnel", "Funnel", [table_html(funnel, list(FUNNEL_DELTA_SCHEMA.names), csv_name="compare_funnel")])
    return page.render()


def run_labels(a: tb.RunData, b: tb.RunData) -> tuple[str, str]:
    """How the page names the two runs: by recipe name, by directory when the names collide,
    by path when the directories do too (two runs of one recipe are the usual comparison).

    >>> from pathlib import Path
    >>> from codecorpus import schema
    >>> def run(path, name): return tb.RunData(schema.RunPaths(Path(path)), name, {}, [], {})
    >>> run_labels(run("/r/a", "x"), run("/r/b", "y")), run_labels(run("/r/a", "x"), run("/r/b", "x"))
    (('x', 'y'), ('a', 'b'))
    >>> run_labels(run("/r/one/qs", "x"), run("/r/two/qs", "x"))
    ('/r/one/qs', '/r/two/qs')
    """
    if a.name != b.name:
        return a.name, b.name
    if a.run.root.name != b.run.root.name:
        return a.run.root.name, b.run.root.name
    return str(a.run.root), str(b.run.root)


def _share_section(page: Page, rows: list[dict[str, Any]]) -> None:
    if not rows:
        page.section("share", "Language shares", [empty("the runs have no stage with languages in common")])
        return
    last = rows[-1]["stage"]
    stage_rows = [r for r in rows if r["stage"] == last]
    metrics = {}
    for m in ("tokens", "bytes", "docs"):
        mine = [r for r in stage_rows if r["metric"] == m]
        if not mine:
            continue
        keep = top_keys({r["lang"]: abs(r["delta"]) for r in mine}, 15)
        picked = sorted((r for r in mine if r["lang"] in keep), key=lambda r: (-abs(r["delta"]), r["lang"]))
        metrics[m] = {"format": "pct", "categories": [r["lang"] for r in picked], "series": [
            {"name": "A", "values": [r["share_a"] for r in picked]},
            {"name": "B", "values": [r["share_b"] for r in picked]}]}
    first = next(iter(metrics))
    parts = [note(f"Share of each language in the output of stage {last} (the 15 largest changes per metric; "
                  "every stage in report/compare_lang_share.csv).")]
    for m, spec in metrics.items():
        parts.append(f"<h3>{m} share</h3>")
        parts.append(page.chart({"kind": "hbar", "categories": spec.pop("categories"), "metrics": {m: spec}}))
    table = sorted((r for r in stage_rows if r["metric"] == first), key=lambda r: (-abs(r["delta"]), r["lang"]))
    parts.append(table_html(table, ["stage", "metric", "lang", "share_a", "share_b", "delta"],
                            {"share_a": "pct", "share_b": "pct", "delta": "pct"}, csv_name="compare_lang_share"))
    page.section("share", "Language shares", parts)

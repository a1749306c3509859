"""Render the report tables as one self-contained HTML page: a chart and a table per section.

Python turns each table into a chart spec (top-N categories, the rest as
``other``) and an HTML table; ``assets.CHARTS_JS`` draws the specs as SVG in
the browser. Nothing is fetched: the page is one file that opens from file://.
The page holds no timestamps and no absolute paths, so the same run gives the
same bytes.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from codecorpus.reports.assets import CHARTS_JS, CSS, ERROR_TRAP

TOP_LANGS = 10
MAX_TABLE_ROWS = 60


class Page:
    """Sections of one report page, each a heading, notes, charts and tables."""

    def __init__(self, title: str, subtitle: str):
        self.title, self.subtitle = title, subtitle
        self.sections: list[tuple[str, str, list[str]]] = []
        self.specs: list[dict[str, Any]] = []

    def section(self, key: str, heading: str, parts: list[str]) -> None:
        self.sections.append((key, heading, parts))

    def chart(self, spec: dict[str, Any]) -> str:
        self.specs.append(spec)
        i = len(self.specs) - 1
        payload = json.dumps(spec, allow_nan=False).replace("</", "<\\/")
        return (
            f'<script type="application/json" id="spec-{i}">{payload}</script>'
            f'<div class="chart" data-spec="spec-{i}"></div>'
        )

    def render(self) -> str:
        nav = "".join(f'<a href="#{k}">{html.escape(h)}</a>' for k, h, _ in self.sections)
        body = "".join(
            f'<section id="{k}"><h2>{html.escape(h)}</h2>{"".join(parts)}</section>' for k, h, parts in self.sections
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style><script>{ERROR_TRAP}</script></head>"
            f"<body><header><h1>{html.escape(self.title)}</h1><p>{html.escape(self.subtitle)}</p></header>"
            f"<nav>{nav}</nav><main>{body}</main><script>{CHARTS_JS}</script></body></html>\n"
        )


def note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def empty(text: str) -> str:
    return f'<p class="empty">{html.escape(text)}</p>'


def warning(text: str) -> str:
    return f'<div class="warn">{html.escape(text)}</div>'


def _cell(value: Any, kind: str) -> str:
    if value is None:
        return "<td>-</td>"
    if kind == "pct":
        return f"<td>{value:.2%}</td>"
    if kind == "float":
        return f"<td>{value:,.3f}</td>"
    if kind == "int":
        return f"<td>{round(value):,}</td>"
    if isinstance(value, int):
        return f"<td>{value:,}</td>"
    if isinstance(value, float):
        return f"<td>{int(value):,}</td>" if value.is_integer() else f"<td>{value:,.4g}</td>"
    return f'<td class="text">{html.escape(str(value))}</td>'


def table_html(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], kinds: dict[str, str] | None = None,
    limit: int = MAX_TABLE_ROWS, csv_name: str | None = None,
) -> str:
    """An HTML table of ``rows``; beyond ``limit`` rows the rest fold into a <details>."""
    if not rows:
        return empty("no rows")
    kinds = kinds or {}
    head = "".join(f'<th class="{"text" if i == 0 else ""}">{html.escape(c)}</th>' for i, c in enumerate(columns))

    def body(part: Sequence[dict[str, Any]]) -> str:
        return "".join("<tr>" + "".join(_cell(r.get(c), kinds.get(c, "")) for c in columns) + "</tr>" for r in part)

    out = f"<table><thead><tr>{head}</tr></thead><tbody>{body(rows[:limit])}</tbody></table>"
    if len(rows) > limit:
        out += (
            f"<details><summary>{len(rows) - limit} more rows</summary><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body(rows[limit:])}</tbody></table></details>"
        )
    if csv_name:
        out += note(f"Full table: report/{csv_name}.csv and report/{csv_name}.parquet")
    return out


def top_keys(weights: dict[str, float], n: int = TOP_LANGS) -> list[str]:
    """The ``n`` heaviest keys (ties by name); the rest become ``other``."""
    return [k for k, _ in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def series_by(
    rows: Sequence[dict[str, Any]], cat_key: Callable[[dict[str, Any]], str], series_key: str, value: str,
    categories: list[str], keep: list[str],
) -> list[dict[str, Any]]:
    """Series (one per kept key, plus ``other``) of ``value`` summed per category."""
    index = {c: i for i, c in enumerate(categories)}
    names = [*keep, "other"]
    values = {k: [0.0] * len(categories) for k in names}
    for r in rows:
        c = cat_key(r)
        if c not in index or r.get(value) is None:
            continue
        name = r[series_key] if r[series_key] in keep else "other"
        values[name][index[c]] += r[value]
    return [{"name": k, "values": values[k]} for k in names if any(values[k])]


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    return table.to_pylist()

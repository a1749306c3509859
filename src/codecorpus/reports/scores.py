"""The filter-score tables: every rule as the filters stage applied it, and histograms the data can fill.

The section is driven by the rules (``filters.rules.RULES``, then decontamination
and the license allow-list), never by whichever numeric columns happen to exist:
a rule appears when it dropped a row or has a threshold for some row that
reached the filters. For each rule:

- ``filter_rules``: its score column, its real direction, the drop count and
  bytes from the drop log, and a summary of its thresholds;
- ``filter_thresholds``: per language, each threshold the rule applied (the
  recipe and the built-in levels resolved per extension, language and kind of
  the rows that entered the stage; null = the rule is off), with the documents
  it applied to and those it dropped (from the drop log, which records the
  threshold of every drop);
- ``filter_scores``: a histogram of the score over the kept documents and those
  dropped by this rule (documents dropped by an earlier rule were never scored
  against it). Bins are chosen from the data: fractions on [0, 1]; small integer
  ranges one bin per value; wide non-negative ranges on log bins (a zero bin
  first); otherwise linear bins between the 0.5 and 99.5 percentiles with the
  tails in the end bins; one value, one bin.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError

from codecorpus import schema
from codecorpus.filters import rules
from codecorpus.filters.config import FiltersConfig
from codecorpus.storage import mirror as store
from codecorpus.storage.parquet import parquet_schema, read_parquet_files

if TYPE_CHECKING:
    from codecorpus.reports.run import RunData

FILTERS_STAGE = "filters"
HIST_BINS = 30
LOG_RATIO = 100.0
"""A non-negative score whose largest value is this many times its smallest positive one gets log bins."""


@dataclass(frozen=True)
class RuleView:
    """A filter rule as the report shows it."""

    name: str
    column: str | None
    direction: str


def rule_views() -> list[RuleView]:
    """Every rule in the order the stage checks them; decontamination drops at or above its threshold."""
    views = [RuleView(r.name, r.column, r.direction) for r in rules.RULES]
    views.append(RuleView(schema.DECONTAMINATED, schema.DECONTAM_OVERLAP, "max"))
    views.append(RuleView(rules.LICENSE_RULE, None, "allow-list"))
    return views


# --- reading the run --------------------------------------------------------------------------------


def _files(data: RunData, stage: str) -> list:
    return store.list_files(data.run.stage_dir(stage), "part-*.parquet", fetch=True)


def _read(files: list, columns: list[str]) -> pa.Table | None:
    if not files:
        return None
    names = parquet_schema(files[0]).names
    return read_parquet_files(files, [c for c in columns if c in names])


def _drop_log(data: RunData) -> pa.Table | None:
    files = store.list_files(data.run.dropped_dir(FILTERS_STAGE), "*.parquet", fetch=True)
    cols = [schema.REASON, schema.LANG, schema.BYTES, schema.SCORE, schema.THRESHOLD]
    return read_parquet_files(files, cols) if files else None


def _config(data: RunData) -> FiltersConfig | None:
    raw = (data.recipe.get("stages") or {}).get(FILTERS_STAGE)
    try:
        return FiltersConfig.model_validate(raw or {})
    except ValidationError:
        return None  # a recipe of another version: thresholds come from the drop log alone


# --- the tables ---------------------------------------------------------------------------------------


def build(data: RunData) -> dict[str, list[dict[str, Any]]]:
    """Rows of ``filter_rules``, ``filter_thresholds`` and ``filter_scores`` (empty without a filters stage)."""
    out: dict[str, list[dict[str, Any]]] = {"filter_rules": [], "filter_thresholds": [], "filter_scores": []}
    if FILTERS_STAGE not in data.stages:
        return out
    log = _drop_log(data)
    cfg = _config(data)
    views = rule_views()
    columns = sorted({v.column for v in views if v.column} | {schema.PATH, schema.LANG, schema.KIND})
    kept = _read(_files(data, FILTERS_STAGE), columns)
    keys = KeyIndex(rules.row_keys(kept) if kept is not None else [])
    langs = np.array(kept.column(schema.LANG).to_pylist() if kept is not None else [], dtype=object)
    for view in views:
        mine = log.filter(pc.equal(log.column(schema.REASON), view.name)) if log is not None else None
        limits = keys.thresholds(view, cfg)
        scored = np.isfinite(_column(kept, view.column)) if view.column else np.zeros(len(langs), bool)
        thresholds = _thresholds(view, langs[scored], limits[scored], mine)
        n_dropped = mine.num_rows if mine is not None else 0
        if not n_dropped and not any(r["threshold"] is not None for r in thresholds):
            continue
        hist = _histogram(view, kept, np.isfinite(limits), mine) if view.column else []
        out["filter_thresholds"] += thresholds
        out["filter_scores"] += hist
        out["filter_rules"].append({
            "rule": view.name, "column": view.column, "direction": view.direction,
            "thresholds": _summary(thresholds), "docs_scored": sum(r["kept"] + r["dropped"] for r in hist),
            "dropped": n_dropped, "dropped_bytes": _sum(mine, schema.BYTES),
        })
    return out


def _sum(t: pa.Table | None, column: str) -> int:
    return int(pc.sum(t.column(column)).as_py() or 0) if t is not None and t.num_rows else 0


def _thresholds(
    view: RuleView, langs: np.ndarray, limits: np.ndarray, mine: pa.Table | None
) -> list[dict[str, Any]]:
    """Per (language, threshold): kept documents scored under it, and those it dropped (null: off)."""
    applied: Counter[tuple[str, float | None]] = Counter(
        (lang, None if math.isnan(t) else float(t)) for lang, t in zip(langs.tolist(), limits.tolist(), strict=True)
    )
    dropped: Counter[tuple[str, float | None]] = Counter()
    if mine is not None:
        for lang, thr in zip(mine.column(schema.LANG).to_pylist(), mine.column(schema.THRESHOLD).to_pylist(),
                             strict=True):
            dropped[(lang, thr)] += 1
    rows = []
    for lang, thr in sorted(set(applied) | set(dropped), key=lambda k: (k[0], k[1] is None, k[1] or 0.0)):
        rows.append({"rule": view.name, "direction": view.direction, "lang": lang, "threshold": thr,
                     "kept": applied.get((lang, thr), 0), "dropped": dropped.get((lang, thr), 0)})
    return rows


def _summary(thresholds: list[dict[str, Any]], shown: int = 3) -> str:
    """'0.8: Python, C, Cython +9; off: Markdown, Text': each threshold with its heaviest languages."""
    by_thr: dict[float | None, Counter[str]] = {}
    for r in thresholds:
        by_thr.setdefault(r["threshold"], Counter())[r["lang"]] += r["kept"] + r["dropped"]
    parts = []
    for thr in sorted(by_thr, key=lambda t: (t is None, t or 0.0)):
        langs = [k for k, _ in sorted(by_thr[thr].items(), key=lambda kv: (-kv[1], kv[0]))]
        more = f" +{len(langs) - shown}" if len(langs) > shown else ""
        parts.append(f"{'off' if thr is None else f'{thr:g}'}: {', '.join(langs[:shown])}{more}")
    return "; ".join(parts)


# --- histograms ---------------------------------------------------------------------------------------


class KeyIndex:
    """Rows' (extension, language, kind) keys, each distinct key resolved once per rule."""

    def __init__(self, keys: list[tuple[str, str, str]]):
        self.distinct = sorted(set(keys))
        position = {k: i for i, k in enumerate(self.distinct)}
        self.inverse = np.array([position[k] for k in keys], np.int64)

    def thresholds(self, view: RuleView, cfg: FiltersConfig | None) -> np.ndarray:
        """Per row, the rule's threshold as the stage resolved it (NaN: off, or no recipe to resolve)."""
        rule = rules.BY_NAME.get(view.name)
        if cfg is None or (rule is None and view.name != schema.DECONTAMINATED):
            return np.full(len(self.inverse), np.nan)
        if rule is None:  # decontamination: one threshold for every row
            limit = cfg.decontam.threshold if cfg.decontam is not None else np.nan
            return np.full(len(self.inverse), float(limit))
        per_key = np.array([_nan(rules.resolve(rule, cfg, *k)) for k in self.distinct] or [np.nan])
        return per_key[self.inverse] if self.inverse.size else np.zeros(0)


def _nan(value: float | None) -> float:
    return np.nan if value is None else float(value)


def _column(t: pa.Table | None, column: str | None) -> np.ndarray:
    """A score column as floats, null as NaN (empty without a table or column)."""
    if t is None or column is None or column not in t.column_names:
        return np.full(t.num_rows if t is not None else 0, np.nan)
    return t.column(column).cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)


def _histogram(view: RuleView, kept: pa.Table | None, applies: np.ndarray, mine: pa.Table | None) -> list[dict[str, Any]]:
    """Kept documents the rule applied to, and those it dropped, on bins both can fill."""
    values = _column(kept, view.column)
    k = values[np.isfinite(values) & applies]
    d = _column(mine, schema.SCORE)
    d = d[np.isfinite(d)]
    both = np.concatenate([k, d])
    if not both.size:
        return []
    edges, scale = choose_bins(both, fraction=is_fraction(view.column))
    kc, dc = _counts(k, edges, scale), _counts(d, edges, scale)
    labels = bin_labels(edges, scale)
    return [{"rule": view.name, "column": view.column, "direction": view.direction, "scale": scale, "bin": i,
             "bin_lo": float(edges[i]), "bin_hi": float(edges[i + 1]), "label": labels[i],
             "kept": int(kc[i]), "dropped": int(dc[i])} for i in range(len(labels))]


def is_fraction(column: str) -> bool:
    """Scores that are shares of a document, drawn on [0, 1] whatever the data holds."""
    return column.endswith("_frac") or column == schema.DECONTAM_OVERLAP


def choose_bins(values: np.ndarray, fraction: bool = False) -> tuple[np.ndarray, str]:
    """Bin edges and their scale for ``values`` (see the module docstring).

    >>> choose_bins(np.array([3.0, 3.0]))[1], choose_bins(np.array([0.0, 2.0]))[0].tolist()
    ('single', [0.0, 1.0, 2.0, 3.0])
    >>> edges, scale = choose_bins(np.array([0.0, 1.0, 10.0, 1e6]))
    >>> scale, float(edges[0]), float(edges[1]), float(edges[-1])
    ('log', 0.0, 1.0, 1000000.0)
    """
    lo, hi = float(values.min()), float(values.max())
    if fraction:
        return np.linspace(0.0, 1.0, 21), "linear"
    if lo == hi:
        return np.array([lo, hi]), "single"
    integers = bool(np.all(values == np.round(values)))
    if integers and hi - lo < HIST_BINS:
        return np.arange(lo, hi + 2), "discrete"
    positive = values[values > 0]
    if lo >= 0 and positive.size and hi / positive.min() >= LOG_RATIO:
        edges = np.geomspace(positive.min(), hi, HIST_BINS + 1)
        if integers:
            edges = np.unique(np.concatenate([np.floor(edges[:-1]), [hi]]))
        return (np.concatenate([[0.0], edges]) if lo == 0 else edges), "log"
    q_lo, q_hi = np.quantile(values, [0.005, 0.995])
    if q_hi <= q_lo:
        q_lo, q_hi = lo, hi
    return np.linspace(q_lo, q_hi, HIST_BINS + 1), "linear"


def _counts(values: np.ndarray, edges: np.ndarray, scale: str) -> np.ndarray:
    if scale == "single":
        return np.array([values.size])
    if scale == "discrete":  # bin i holds the value edges[i]
        idx = np.clip(np.round(values - edges[0]).astype(np.int64), 0, len(edges) - 2)
        return np.bincount(idx, minlength=len(edges) - 1)
    return np.histogram(np.clip(values, edges[0], edges[-1]), edges)[0]  # tails fold into the end bins


def _fmt(v: float, digits: int) -> str:
    """About ``digits`` significant digits, 10k and up with a k/M/G suffix, no exponent.

    >>> _fmt(3500.0, 3), _fmt(51800.0, 3), _fmt(0.05, 3), _fmt(12.345, 3)
    ('3500', '51.8k', '0.05', '12.3')
    """
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= 10 * size:
            return f"{v / size:.{digits}g}{unit}"
    if abs(v) >= 1:
        decimals = max(digits - len(str(int(abs(v)))), 0)
        return f"{v:.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{v:.0f}"
    return f"{v:.{digits}g}"


def bin_labels(edges: np.ndarray, scale: str) -> list[str]:
    """One label per bin (its lower edge; the value itself for discrete and single bins),
    with as many digits as it takes for neighbouring bins to read differently.

    >>> bin_labels(np.array([32411.0, 32411.0]), "single")
    ['32411']
    >>> bin_labels(np.array([1.0, 1.001, 1.002]), "linear")
    ['1', '1.001']
    """
    if scale == "single":
        v = float(edges[0])
        return [str(int(v)) if v.is_integer() else f"{v:.6g}"]
    if scale == "discrete":
        return [str(int(v)) for v in edges[:-1]]
    for digits in range(3, 9):
        labels = [_fmt(float(v), digits) for v in edges[:-1]]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{float(v):.9g}" for v in edges[:-1]]


def mark_position(threshold: float, edges: np.ndarray, scale: str, direction: str) -> float:
    """Where a threshold falls, in bins from the left edge of the first (for the chart's dashed line).

    A discrete ``max`` rule drops values above the threshold, so its line sits after
    the threshold's bin; a ``min`` rule's before it.

    >>> mark_position(0.25, np.linspace(0, 1, 21), "linear", "min")
    5.0
    >>> mark_position(0.0, np.arange(0.0, 4.0), "discrete", "max")
    1.0
    """
    n = len(edges) - 1
    if scale == "single":
        return 0.5 if threshold == edges[0] else (0.0 if threshold < edges[0] else 1.0)
    if scale == "discrete":
        at = threshold - edges[0] + (1.0 if direction == "max" else 0.0)
        return float(min(max(at, 0.0), n))
    if threshold <= edges[0]:
        return 0.0
    if threshold >= edges[-1]:
        return float(n)
    i = int(np.searchsorted(edges, threshold, side="right")) - 1
    a, b = float(edges[i]), float(edges[i + 1])
    if scale == "log" and a > 0:
        frac = (math.log(threshold) - math.log(a)) / (math.log(b) - math.log(a))
    else:
        frac = (threshold - a) / (b - a) if b > a else 0.0
    return i + frac

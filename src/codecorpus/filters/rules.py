"""The filter rules as data: name, score column, direction and built-in thresholds.

A rule drops a row whose score is strictly worse than its threshold (``max``: score
above; ``min``: score below), so a row exactly at a threshold passes. Rules are
checked in :data:`RULES` order and the first failing one is the drop reason, with
its score and threshold in the drop log. A null score (the rule does not apply to
the row: ``comment_frac`` of Markdown, ``html_*`` of Python, ``parse_error_frac``
when langid did not parse) or a null threshold never drops.

Thresholds are resolved per row from the most specific level that names one:
extension, then language, then kind, then the rule's default. At each level the
recipe (``stages.filters.rules.<rule>``) wins over the built-in value here. The
built-in defaults follow StarCoder / StarCoder2 (The Stack v2) and OpenCoder:

==================  ===  ====================================================================
rule                dir  built-in thresholds
==================  ===  ====================================================================
max_line_len        max  1000 (recipe ``max_line_len``); docs 10000; data, notebook off
mean_line_len       max  100 (recipe ``max_mean_line_len``); docs 500; data, notebook off
alnum_frac          min  0.25 (recipe ``min_alnum_frac``)
alpha_frac          min  0.25 for code and docs (StarCoder's alpha filter); data/config off
autogen_score       max  0 for code and config (any auto-generation marker drops)
encoded_data_frac   max  0.5 (StarCoder2: base64/hex/unicode-escape runs)
max_encoded_run     max  1024 characters (StarCoder2: any single encoded run)
xml_text_frac       min  0.1 for XML, SVG, plists (XML with no real content)
html_visible_frac   min  0.2 for HTML (StarCoder2)
html_visible_chars  min  100 for HTML (StarCoder2)
data_bytes_min      min  50 for JSON, YAML, CSV, TSV (StarCoder2 data-file bounds)
data_bytes_max      max  5000 for JSON, YAML, CSV, TSV
num_lines_max       max  100000 lines
num_lines_min       min  off (a recipe can ask, e.g. ``default: 3``)
comment_frac_max    max  0.8 for code (mostly-commented-out or licence-only files)
comment_frac_min    min  off (OpenCoder-style minimum comment share; recipe)
parse_error_frac    max  0.1 (langid's ``parse_error_frac``; rows it did not parse skip)
==================  ===  ====================================================================

Every language langid knows gets a threshold through its kind (``code``, ``docs``,
``notebook``, ``data``, ``config``); the language and extension levels refine it.
Languages in the recipe's ``exempt_langs`` skip the two line-length rules.
``licenses`` (a list of SPDX ids) adds the ``license`` rule: rows whose license is
not listed, ``unknown`` included, are dropped with the license as the detail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.filters.columns import (
    ALNUM_FRAC,
    ALPHA_FRAC,
    AUTOGEN_SCORE,
    COMMENT_FRAC,
    ENCODED_DATA_FRAC,
    HTML_VISIBLE_CHARS,
    HTML_VISIBLE_FRAC,
    MAX_ENCODED_RUN,
    MAX_LINE_LEN,
    MEAN_LINE_LEN,
    NUM_LINES,
    XML_TEXT_FRAC,
)
from codecorpus.filters.config import RULE_NAMES, FiltersConfig

LICENSE_RULE = "license"


@dataclass(frozen=True)
class Rule:
    name: str
    """Drop reason and key under ``stages.filters.rules``."""
    column: str
    """Score column the rule reads (added by the stage, or langid's ``parse_error_frac``)."""
    direction: Literal["max", "min"]
    default: float | None = None
    kinds: Mapping[str, float | None] = field(default_factory=dict)
    langs: Mapping[str, float | None] = field(default_factory=dict)
    exts: Mapping[str, float | None] = field(default_factory=dict)


_DATA_FILES = ("JSON", "YAML", "CSV", "TSV")
_NOT_CODE = {"data": None, "config": None, "notebook": None}

RULES: tuple[Rule, ...] = (
    Rule(MAX_LINE_LEN, MAX_LINE_LEN, "max", 1000,
         kinds={"docs": 10_000, "data": None, "notebook": None}),
    Rule(MEAN_LINE_LEN, MEAN_LINE_LEN, "max", 100,
         kinds={"docs": 500, "data": None, "notebook": None}),
    Rule(ALNUM_FRAC, ALNUM_FRAC, "min", 0.25),
    Rule(ALPHA_FRAC, ALPHA_FRAC, "min", 0.25, kinds=_NOT_CODE),
    Rule(AUTOGEN_SCORE, AUTOGEN_SCORE, "max", None, kinds={"code": 0, "config": 0}),
    Rule(ENCODED_DATA_FRAC, ENCODED_DATA_FRAC, "max", 0.5),
    Rule(MAX_ENCODED_RUN, MAX_ENCODED_RUN, "max", 1024),
    Rule(XML_TEXT_FRAC, XML_TEXT_FRAC, "min", 0.1),
    Rule(HTML_VISIBLE_FRAC, HTML_VISIBLE_FRAC, "min", 0.2),
    Rule(HTML_VISIBLE_CHARS, HTML_VISIBLE_CHARS, "min", 100),
    Rule("data_bytes_min", schema.BYTES, "min", None, langs=dict.fromkeys(_DATA_FILES, 50)),
    Rule("data_bytes_max", schema.BYTES, "max", None, langs=dict.fromkeys(_DATA_FILES, 5000)),
    Rule("num_lines_max", NUM_LINES, "max", 100_000),
    Rule("num_lines_min", NUM_LINES, "min", None),
    Rule("comment_frac_max", COMMENT_FRAC, "max", None, kinds={"code": 0.8}),
    Rule("comment_frac_min", COMMENT_FRAC, "min", None),
    Rule(schema.PARSE_ERROR_FRAC, schema.PARSE_ERROR_FRAC, "max", 0.1),
)
if tuple(r.name for r in RULES) != RULE_NAMES:  # the config's vocabulary and the rules must agree
    raise ImportError(f"filters/config.py RULE_NAMES {RULE_NAMES} != the rules {tuple(r.name for r in RULES)}")
BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
_RECIPE_DEFAULTS = {MAX_LINE_LEN: "max_line_len", MEAN_LINE_LEN: "max_mean_line_len",
                    ALNUM_FRAC: "min_alnum_frac"}
_LINE_RULES = (MAX_LINE_LEN, MEAN_LINE_LEN)

_UNSET = object()


@dataclass(frozen=True)
class Verdict:
    """Per row: ``keep``; for dropped rows the rule, its score and threshold, and a detail."""

    keep: np.ndarray  # bool
    reason: list[str | None]
    score: list[float | None]
    threshold: list[float | None]
    detail: list[str | None]


def extension(path: str) -> str:
    """Lowercase extension of a path's base name, with its dot ('' when none).

    >>> extension("a/B.JSON"), extension("Makefile"), extension(".bashrc")
    ('.json', '', '')
    """
    base = path.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    return base[dot:].lower() if dot > 0 else ""


def resolve(rule: Rule, cfg: FiltersConfig, ext: str, lang: str, kind: str) -> float | None:
    """The threshold of ``rule`` for one (extension, language, kind); None = rule off."""
    user = cfg.rules.get(rule.name)
    if user is not None and not user.enabled:
        return None
    if rule.name in _LINE_RULES and lang in cfg.exempt_langs:
        return None
    builtin_default = getattr(cfg, _RECIPE_DEFAULTS[rule.name]) if rule.name in _RECIPE_DEFAULTS else rule.default
    levels = (
        (user.exts if user else {}, rule.exts, ext),
        (user.langs if user else {}, rule.langs, lang),
        (user.kinds if user else {}, rule.kinds, kind),
    )
    for recipe_level, builtin_level, key in levels:
        for table in (recipe_level, builtin_level):
            value = table.get(key, _UNSET)
            if value is not _UNSET:
                return None if value is None else float(value)
    if user is not None and user.default is not None:
        return float(user.default)
    return None if builtin_default is None else float(builtin_default)


def live_columns(cfg: FiltersConfig) -> set[str]:
    """Score columns that some enabled rule can compare (has a threshold at any level).

    In filter mode the stage computes only these: a rule switched off "neither drops
    nor is reported", and the heavier scores (encoded-data runs, comments, markup)
    cost most of the stage's time. Annotate mode computes every score.
    """
    live = set()
    for rule in RULES:
        user = cfg.rules.get(rule.name)
        if user is not None and not user.enabled:
            continue
        builtin_default = getattr(cfg, _RECIPE_DEFAULTS[rule.name]) if rule.name in _RECIPE_DEFAULTS else rule.default
        candidates = [builtin_default, *rule.kinds.values(), *rule.langs.values(), *rule.exts.values()]
        if user is not None:
            candidates += [user.default, *user.kinds.values(), *user.langs.values(), *user.exts.values()]
        if any(v is not None for v in candidates):
            live.add(rule.column)
    return live


def thresholds(rule: Rule, cfg: FiltersConfig, keys: list[tuple[str, str, str]]) -> np.ndarray:
    """Per-row thresholds (NaN = off) from per-row (extension, language, kind) keys."""
    cache: dict[tuple[str, str, str], float] = {}
    out = np.empty(len(keys))
    for i, key in enumerate(keys):
        if key not in cache:
            value = resolve(rule, cfg, *key)
            cache[key] = np.nan if value is None else value
        out[i] = cache[key]
    return out


def row_keys(table: pa.Table) -> list[tuple[str, str, str]]:
    paths = table.column(schema.PATH).to_pylist()
    langs = table.column(schema.LANG).to_pylist()
    kinds = table.column(schema.KIND).to_pylist()
    return [(extension(p), lang, kind) for p, lang, kind in zip(paths, langs, kinds, strict=True)]


def _is_float32(table: pa.Table, column: str) -> bool:
    return table.schema.field(column).type == pa.float32()


def _score_array(table: pa.Table, column: str) -> np.ndarray | None:
    if column not in table.column_names:
        return None  # e.g. parse_error_frac before langid adds it: the rule is skipped
    arr = table.column(column).cast(pa.float64()).fill_null(np.nan)
    return np.asarray(arr.to_numpy(zero_copy_only=False), np.float64)


def judge(table: pa.Table, cfg: FiltersConfig) -> Verdict:
    """The first failing rule of every row (scores are read from ``table``'s columns)."""
    n = table.num_rows
    keys = row_keys(table)
    failed = np.zeros(n, bool)
    reason: list[str | None] = [None] * n
    score: list[float | None] = [None] * n
    limit: list[float | None] = [None] * n
    detail: list[str | None] = [None] * n
    for rule in RULES:
        values = _score_array(table, rule.column)
        if values is None:
            continue
        t = thresholds(rule, cfg, keys)
        # scores are stored as float32: compare at that precision, so a score written
        # as exactly the threshold passes (0.1 as float32 is 0.10000000149)
        limit32 = t.astype(np.float32).astype(np.float64) if _is_float32(table, rule.column) else t
        worse = values > limit32 if rule.direction == "max" else values < limit32
        for i in np.flatnonzero(worse & ~failed).tolist():
            reason[i], score[i], limit[i] = rule.name, float(values[i]), float(t[i])
        failed |= worse
    if cfg.licenses is not None:
        allowed = set(cfg.licenses)
        for i, lic in enumerate(table.column(schema.LICENSE).to_pylist()):
            if not failed[i] and lic not in allowed:
                failed[i], reason[i], detail[i] = True, LICENSE_RULE, lic
    return Verdict(~failed, reason, score, limit, detail)

"""The filters stage: score, drop, decontaminate, redact -- one map stage, in that order.

1. *Annotate* every row with the typed score columns (:mod:`codecorpus.filters.columns`):
   StarCoder's line and character scores, ``num_lines``, ``comment_frac``, encoded
   data, auto-generation markers, XML/HTML content. langid's ``parse_error_frac`` is
   used as it is.
2. *Filter* by the rules of :mod:`codecorpus.filters.rules`: the first failing rule is
   the drop reason, with its score and threshold in the drop log.
3. *Decontaminate* the rows still kept against the benchmark index: overlap at or
   above the threshold drops the row with reason ``decontaminated``, the entry
   (``benchmark:problem:part``) as detail, the overlap as score. Every scored row
   carries ``decontam_overlap`` / ``decontam_match``.
4. *Redact* PII and secrets in the kept rows (a transform): ``text``, ``bytes`` and
   ``content_hash`` are updated, ``redacted`` counts the spans, and the stage stats'
   ``counters`` hold ``redact.<kind>`` and ``redact.docs``.

``mode: annotate`` runs 1 and 3's scoring and 4, and drops nothing, so an analyst
can study the score distributions before choosing thresholds.

Decontamination runs after the heuristics so that rows already dropped are not
tokenised, and before redaction so that it sees the text as written.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.filters import decontam, redact, rules, scores
from codecorpus.filters.basic import line_scores
from codecorpus.filters.columns import (
    ALNUM_FRAC,
    ALPHA_FRAC,
    AUTOGEN_SCORE,
    COLUMN_TYPES,
    COMMENT_FRAC,
    DECONTAM_MATCH,
    ENCODED_DATA_FRAC,
    HTML_VISIBLE_CHARS,
    HTML_VISIBLE_FRAC,
    MAX_ENCODED_RUN,
    MAX_LINE_LEN,
    MEAN_LINE_LEN,
    NUM_LINES,
    REDACTED,
    XML_TEXT_FRAC,
    with_column,
)
from codecorpus.filters.config import FiltersConfig
from codecorpus.stage import MapResult

STAGE = "filters"


def _nullable(values: np.ndarray, column: str) -> pa.Array:
    """A typed column from float scores, NaN written as null (the rule does not apply)."""
    typ = COLUMN_TYPES[column]
    missing = np.isnan(values)
    if pa.types.is_integer(typ):
        values = np.where(missing, 0, np.rint(values))
    return pa.array(values, mask=missing).cast(typ)


def annotate(table: pa.Table, only: set[str] | None = None) -> pa.Table:
    """Typed score columns (the annotator half of the stage): every score, or the
    line-based four plus those named in ``only`` (``rules.live_columns``)."""
    texts = table.column(schema.TEXT)
    langs = table.column(schema.LANG)
    basic = line_scores(texts)  # one pass gives all four; always written
    columns: dict[str, np.ndarray] = {
        MAX_LINE_LEN: basic.max_line_len.astype(np.float64),
        MEAN_LINE_LEN: basic.mean_line_len,
        ALNUM_FRAC: basic.alnum_frac,
        ALPHA_FRAC: basic.alpha_frac,
    }

    def wanted(*names: str) -> bool:
        return only is None or any(n in only for n in names)

    if wanted(NUM_LINES):
        columns[NUM_LINES] = scores.num_lines(texts)
    if wanted(COMMENT_FRAC):
        columns[COMMENT_FRAC] = scores.comment_frac(texts, langs)
    if wanted(ENCODED_DATA_FRAC, MAX_ENCODED_RUN):
        columns[ENCODED_DATA_FRAC], columns[MAX_ENCODED_RUN] = scores.encoded_scores(texts)
    if wanted(AUTOGEN_SCORE):
        columns[AUTOGEN_SCORE] = scores.autogen_score(texts)
    if wanted(XML_TEXT_FRAC):
        columns[XML_TEXT_FRAC] = scores.xml_text_frac(texts, langs)
    if wanted(HTML_VISIBLE_FRAC, HTML_VISIBLE_CHARS):
        columns[HTML_VISIBLE_CHARS], columns[HTML_VISIBLE_FRAC] = scores.html_visible(texts, langs)
    for name, values in columns.items():
        table = with_column(table, name, _nullable(values, name))
    return table


def _decontaminate(
    table: pa.Table, keep: np.ndarray, index: decontam.DecontamIndex | None
) -> tuple[pa.Table, np.ndarray, np.ndarray, list[str | None]]:
    """Score the kept rows against ``index``; returns the table and per-row hit mask/overlap/label."""
    n = table.num_rows
    overlap, labels = np.full(n, np.nan), [None] * n
    if index is not None:
        rows = np.flatnonzero(keep)
        found = decontam.match(table.column(schema.TEXT).take(pa.array(rows, pa.int64())), index)
        overlap[rows] = found.overlap
        for i, label in zip(rows.tolist(), found.label, strict=True):
            labels[i] = label
    table = with_column(table, schema.DECONTAM_OVERLAP, _nullable(overlap, schema.DECONTAM_OVERLAP))
    table = with_column(table, DECONTAM_MATCH, pa.array(labels, pa.string()))
    threshold = index.threshold if index is not None else np.inf
    hit = np.nan_to_num(overlap, nan=0.0) >= threshold
    return table, hit, overlap, labels


def _redact(table: pa.Table, cfg: FiltersConfig) -> tuple[pa.Table, Counter[str], int]:
    """Redact the (kept) rows' texts; updates text, bytes and content_hash of changed rows.

    Returns the table, the redaction counters and the bytes the placeholders added or
    removed (the stage's ``bytes_changed``).
    """
    counters: Counter[str] = Counter()
    counts = np.zeros(table.num_rows, np.int32)
    if cfg.redact is None or table.num_rows == 0:
        return with_column(table, REDACTED, pa.array(counts)), counters, 0
    texts, per_row = redact.redact_column(table.column(schema.TEXT), table.column(schema.ID).to_pylist(), cfg.redact)
    nbytes = table.column(schema.BYTES).to_pylist()
    hashes = table.column(schema.CONTENT_HASH).to_pylist()
    changed, delta = False, 0
    for i, (new, kinds) in enumerate(zip(texts, per_row, strict=True)):
        if not kinds:
            continue
        changed = True
        data = new.encode("utf-8", "surrogatepass")
        delta += len(data) - nbytes[i]
        texts[i], nbytes[i], hashes[i] = new, len(data), schema.content_hash(data)
        counts[i] = sum(kinds.values())
        counters.update({f"redact.{k}": v for k, v in kinds.items()})
        counters["redact.docs"] += 1
    if changed:
        for name, values in ((schema.TEXT, texts), (schema.BYTES, nbytes), (schema.CONTENT_HASH, hashes)):
            col = table.schema.get_field_index(name)
            table = table.set_column(col, table.schema.field(col), pa.array(values, table.schema.field(col).type))
    return with_column(table, REDACTED, pa.array(counts)), counters, delta


def run(table: pa.Table, cfg: FiltersConfig, index: decontam.DecontamIndex | None = None) -> MapResult:
    """Annotate, filter, decontaminate and redact one shard (see the module docstring).

    ``index`` is the benchmark index the executor built once on the driver; when it
    is None and ``cfg.decontam`` is set, it is built (and cached) in this process.
    """
    index = decontam.index_for(cfg.decontam, index)
    table = annotate(table, None if cfg.mode == "annotate" else rules.live_columns(cfg))
    verdict = rules.judge(table, cfg)
    enforce = cfg.mode == "filter"
    keep = verdict.keep if enforce else np.ones(table.num_rows, bool)
    table, hit, overlap, labels = _decontaminate(table, keep, index)
    counters = decontam.benchmark_counts([lbl if h else None for lbl, h in zip(labels, hit, strict=True)])
    reason, score, limit, detail = verdict.reason, verdict.score, verdict.threshold, verdict.detail
    if enforce:
        for i in np.flatnonzero(hit & keep).tolist():
            reason[i], score[i], limit[i], detail[i] = schema.DECONTAMINATED, float(overlap[i]), index.threshold, labels[i]
        keep = keep & ~hit
    drop = np.flatnonzero(~keep).tolist()
    dropped = schema.drops_from_rows(
        table.take(pa.array(drop, pa.int64())),
        STAGE,
        [reason[i] for i in drop],
        detail=[detail[i] for i in drop],
        score=[score[i] for i in drop],
        threshold=[limit[i] for i in drop],
    )
    kept, redacted, bytes_changed = _redact(table.filter(pa.array(keep)), cfg)
    counters.update(redacted)
    return MapResult(kept, dropped, counters, bytes_changed=bytes_changed)

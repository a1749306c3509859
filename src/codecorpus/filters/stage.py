"""The filters stage: score every row, keep those that pass, log the rest with a reason.

Kept rows carry the typed score columns ``max_line_len``, ``mean_line_len`` and
``alnum_frac`` so analysts can see how close they came; dropped rows go to the
drop log with the failing rule as ``reason`` and its ``score`` and ``threshold``.
"""

from __future__ import annotations

import pyarrow as pa

from codecorpus import schema
from codecorpus.config import FiltersConfig
from codecorpus.filters.basic import judge, line_scores
from codecorpus.stage import MapResult, with_column

STAGE = "filters"


def run(table: pa.Table, cfg: FiltersConfig) -> MapResult:
    """Annotate the three scores on every row, then drop the rows that fail a rule."""
    scores = line_scores(table.column(schema.TEXT))
    table = with_column(table, schema.MAX_LINE_LEN, pa.array(scores.max_line_len))
    table = with_column(table, schema.MEAN_LINE_LEN, pa.array(scores.mean_line_len))
    table = with_column(table, schema.ALNUM_FRAC, pa.array(scores.alnum_frac))

    verdict = judge(scores, table.column(schema.LANG), cfg)
    drop = ~verdict.keep
    dropped = schema.drops_from_rows(
        table.filter(pa.array(drop)),
        STAGE,
        verdict.reason[drop].tolist(),
        score=verdict.score[drop].tolist(),
        threshold=verdict.threshold[drop].tolist(),
    )
    return MapResult(table.filter(pa.array(verdict.keep)), dropped)

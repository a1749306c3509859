"""The filters' own columns, defined once for the part: one typed column per heuristic score.

A score is null where its rule does not apply to a row (``comment_frac`` of a language without
comment syntax, ``html_*`` of non-HTML rows ...). The columns the filters share with other parts
stay in :mod:`codecorpus.schema`: ``parse_error_frac`` (langid writes it), ``decontam_overlap``
and the ``decontaminated`` drop reason (the report reads them).
"""

from __future__ import annotations

from collections import ChainMap

import pyarrow as pa

from codecorpus import schema, stage

# StarCoder's line and character scores
MAX_LINE_LEN = "max_line_len"
MEAN_LINE_LEN = "mean_line_len"
ALNUM_FRAC = "alnum_frac"
ALPHA_FRAC = "alpha_frac"
NUM_LINES = "num_lines"
COMMENT_FRAC = "comment_frac"
ENCODED_DATA_FRAC = "encoded_data_frac"
MAX_ENCODED_RUN = "max_encoded_run"
AUTOGEN_SCORE = "autogen_score"
XML_TEXT_FRAC = "xml_text_frac"
HTML_VISIBLE_FRAC = "html_visible_frac"
HTML_VISIBLE_CHARS = "html_visible_chars"
DECONTAM_MATCH = "decontam_match"
REDACTED = "redacted"

STAGE_COLUMNS: dict[str, pa.DataType] = {
    MAX_LINE_LEN: pa.int32(),
    MEAN_LINE_LEN: pa.float32(),
    ALNUM_FRAC: pa.float32(),
    ALPHA_FRAC: pa.float32(),
    NUM_LINES: pa.int32(),
    COMMENT_FRAC: pa.float32(),
    ENCODED_DATA_FRAC: pa.float32(),
    MAX_ENCODED_RUN: pa.int32(),
    AUTOGEN_SCORE: pa.float32(),
    XML_TEXT_FRAC: pa.float32(),
    HTML_VISIBLE_FRAC: pa.float32(),
    HTML_VISIBLE_CHARS: pa.int32(),
    DECONTAM_MATCH: pa.string(),  # "benchmark:problem:part" of the best overlap, null when none
    REDACTED: pa.int32(),  # PII/secret spans replaced in the row's text
}
"""Types of the columns the filters stage adds."""

COLUMN_TYPES = ChainMap(STAGE_COLUMNS, schema.STAGE_COLUMNS)
"""Every column type the filters stage writes: its own, then the document row's
(``decontam_overlap``: the best benchmark overlap, 0 when none)."""


def with_column(table: pa.Table, name: str, values: pa.Array | list) -> pa.Table:
    """Add (or replace) a filters column with its type from ``COLUMN_TYPES``."""
    return stage.with_column(table, name, values, types=COLUMN_TYPES)

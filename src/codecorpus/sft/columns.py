"""The SFT part's own formats, defined once: the value sets it checks trace rows against and
the columns its stages add.

The trace row itself (``schema.TRACE_SCHEMA``) and its ``format``, ``task_id``, ``outcome``,
``messages``, ``tools`` and ``metadata`` columns are :mod:`codecorpus.schema`'s: the tasks part
writes edit examples in the same row.
"""

from __future__ import annotations

from collections import ChainMap

import pyarrow as pa

from codecorpus import schema, stage

TRACE_ROLES = ("system", "user", "assistant", "tool")
# outcome of a trace: resolved / unresolved when the source says so (an evaluation);
# submitted when an agent submitted a patch nobody evaluated yet; incomplete when it
# stopped early (cost, context or step limits, errors, a run cut off); else unknown
TRACE_OUTCOMES = ("resolved", "unresolved", "submitted", "incomplete", schema.UNKNOWN)

# columns added by the SFT stages
REDACTIONS = "redactions"
LOSS_MASK = "loss_mask"
SEGMENT_LENGTHS = "segment_lengths"
LOSS_TOKENS = "loss_tokens"
NUM_SEGMENTS = "num_segments"
SUMMARY_SOURCE = "summary_source"
# where a split trace's continuation summaries came from (mixed: some its own, some extractive)
SUMMARY_SOURCES = ("none", "trace", "extractive", "mixed")

STAGE_COLUMNS: dict[str, pa.DataType] = {
    REDACTIONS: pa.int32(),
    LOSS_MASK: pa.large_list(pa.uint8()),
    SEGMENT_LENGTHS: pa.list_(pa.int32()),
    LOSS_TOKENS: pa.int64(),
    NUM_SEGMENTS: pa.int32(),
    SUMMARY_SOURCE: pa.string(),
}
"""Types of the columns the SFT stages add."""

COLUMN_TYPES = ChainMap(STAGE_COLUMNS, schema.STAGE_COLUMNS)
"""Every column type the SFT stages write: their own, then the document row's (``tokens``,
``num_tokens``)."""


def with_column(table: pa.Table, name: str, values: pa.Array | list) -> pa.Table:
    """Add (or replace) an SFT column with its type from ``COLUMN_TYPES``."""
    return stage.with_column(table, name, values, types=COLUMN_TYPES)

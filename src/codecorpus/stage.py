"""What a stage returns, and the shapes of global-stage phases (docs/ARCHITECTURE.md,
"The stage contract").

Map stages are ``fn(table, cfg) -> MapResult``: annotators return every row with
new columns; filters return the kept rows and a drop-log table whose row count
is exactly the number of rows removed. ``runtime/`` checks
``rows_in == rows_out + dropped`` and ``bytes_in + bytes_changed == bytes_out +
bytes_dropped`` for every task.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema


@dataclass
class MapResult:
    table: pa.Table
    dropped: pa.Table = field(default_factory=schema.empty_drops)
    counters: Counter[str] = field(default_factory=Counter)
    """Extra named counts (e.g. ``tokens``) summed into the stage stats."""
    bytes_changed: int = 0
    """Bytes the stage's rewrites added (+) or removed (-) in the rows it returns or drops
    (redaction, re-encoding): ``bytes_in + bytes_changed = bytes_out + bytes_dropped``."""
    skipped: pa.Table = field(default_factory=schema.empty_drops)
    """Entries that are not documents (a skipped directory, a symlink), in the drop-log
    layout: logged and counted by reason, never rows, so they are in neither side of
    ``rows_in = rows_out + dropped``."""


def concat_drops(parts: list[pa.Table]) -> pa.Table:
    parts = [p for p in parts if p.num_rows]
    return pa.concat_tables(parts) if parts else schema.empty_drops()


def with_column(
    table: pa.Table, name: str, values: pa.Array | list, types: Mapping[str, pa.DataType] = schema.STAGE_COLUMNS
) -> pa.Table:
    """Add (or replace) a stage column with its type from ``types`` (the document row's
    ``schema.STAGE_COLUMNS`` unless a part's own rows have their own table of types)."""
    typ = types[name]
    arr = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, typ)
    if arr.type != typ:
        arr = arr.cast(typ)
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, arr)
    return table.append_column(pa.field(name, typ), arr)


def text_slices(texts: pa.Array | pa.ChunkedArray, max_bytes: int) -> list[pa.Array]:
    """Consecutive zero-copy slices (``large_string``) of whole texts, each about ``max_bytes``
    of text (a longer text alone), so a vectorised pass over a shard needs memory for one slice.

    >>> [len(s) for s in text_slices(pa.array(["ab", "cd", "efgh", ""]), 4)]
    [2, 2]
    """
    arr = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    arr = arr.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return []
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + n + 1]
    out, start = [], 0
    while start < n:
        end = int(np.searchsorted(offsets, offsets[start] + max_bytes, "right")) - 1
        end = min(max(end, start + 1), n)
        out.append(arr.slice(start, end - start))
        start = end
    return out


def apply_reasons(table: pa.Table, reasons: pa.Array | pa.ChunkedArray, stage: str,
                  details: list[str | None] | None = None) -> MapResult:
    """Keep the rows whose reason is null; the others go to the drop log with their reason."""
    reasons = reasons.cast(pa.string())
    drop = reasons.is_valid()
    dropped_rows = table.filter(drop)
    drop_reasons = reasons.filter(drop).to_pylist()
    kept_details = [d for d, r in zip(details, reasons.to_pylist(), strict=True) if r is not None] if details else None
    dropped = schema.drops_from_rows(dropped_rows, stage, drop_reasons, detail=kept_details)
    return MapResult(table.filter(pc.invert(drop)), dropped)

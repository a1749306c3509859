"""datatrove filters as codecorpus stages: ``use: "datatrove.pipeline.filters:GopherRepetitionFilter"``.

The class (any ``BaseFilter`` subclass, datatrove's own or a user's) is built with the
stage's ``config`` as keyword arguments, once per task. Rows become datatrove
``Document``s (``text``, ``id``, and every other scalar column in ``metadata``) and go
through ``filter_batch`` in the filter's own batch size. A rejection is a drop whose
reason is ``<FilterName>:<its reason>`` (``<FilterName>`` when it gives none). A kept
document's text and the metadata keys that are columns map back to the row, so a
filter that edits text (C4's line removal) works; metadata keys it adds are not kept
(a filter drops, it does not annotate). Needs the ``[datatrove]`` extra.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

try:
    from datatrove.data import Document
    from datatrove.pipeline.filters.base_filter import BaseFilter, get_filter_result
except ImportError as err:  # an optional extra: codecorpus runs without it
    raise ImportError(
        f"datatrove filters as stages need datatrove: pip install 'codecorpus[datatrove]' ({err})"
    ) from err

from codecorpus import schema
from codecorpus.model import RecipeError
from codecorpus.stage import MapResult, apply_reasons

_NOT_METADATA = (schema.TEXT, schema.ID, schema.TOKENS)


def build_filter(name: str, cls: type[BaseFilter], config: dict[str, Any]) -> BaseFilter:
    """``cls(**config)``; a RecipeError naming the stage when the keywords do not fit."""
    try:
        return cls(**config)
    except TypeError as err:
        raise RecipeError(f"stages.{name}.config: {cls.__name__}({', '.join(config)}) failed: {err}") from None


def _documents(table: pa.Table) -> list[Document]:
    meta_cols = [c for c in table.column_names if c not in _NOT_METADATA]
    cols = {c: table.column(c).to_pylist() for c in meta_cols}
    texts, ids = table.column(schema.TEXT).to_pylist(), table.column(schema.ID).to_pylist()
    return [
        Document(text=texts[i], id=ids[i], metadata={c: cols[c][i] for c in meta_cols})
        for i in range(table.num_rows)
    ]


def _map_back(table: pa.Table, docs: list[Document]) -> pa.Table:
    """The rows with the documents' text (and bytes, content hash) and column metadata."""
    texts = [d.text for d in docs]
    if texts != table.column(schema.TEXT).to_pylist():
        data = [t.encode("utf-8", "surrogatepass") for t in texts]
        for col, values in ((schema.TEXT, texts), (schema.BYTES, [len(b) for b in data]),
                            (schema.CONTENT_HASH, [schema.content_hash(b) for b in data])):
            i = table.column_names.index(col)
            table = table.set_column(i, table.field(i), pa.array(values, table.field(i).type))
    for i, field in enumerate(table.schema):
        if field.name in _NOT_METADATA or field.name in (schema.BYTES, schema.CONTENT_HASH):
            continue
        values = [d.metadata.get(field.name) for d in docs]
        if values != table.column(i).to_pylist():
            table = table.set_column(i, field, pa.array(values, field.type))
    return table


def run_filter(table: pa.Table, name: str, cls: type[BaseFilter], config: dict[str, Any]) -> MapResult:
    """One shard through a datatrove filter: kept rows (mapped back) and drops with reasons."""
    flt = build_filter(name, cls, config)
    docs = _documents(table)
    size = max(1, int(getattr(flt, "batch_size", 1) or 1))
    reasons: list[str | None] = []
    for start in range(0, len(docs), size):
        for verdict in flt.filter_batch(docs[start : start + size]):
            keep, why = get_filter_result(verdict)
            reasons.append(None if keep else f"{cls.__name__}:{why}" if why else cls.__name__)
    table = _map_back(table, docs)
    return apply_reasons(table, pa.array(reasons, pa.string()), name)


__all__ = ["build_filter", "run_filter"]

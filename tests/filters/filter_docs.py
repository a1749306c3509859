"""Builds DOC_SCHEMA tables for the filters tests (imported by them; not a test module)."""

from __future__ import annotations

import pyarrow as pa

from codecorpus import schema


def doc_table(*docs: dict) -> pa.Table:
    """One row per dict: ``text`` plus optional ``lang``, ``kind``, ``path``, ``license``."""
    n = len(docs)
    texts = [d["text"] for d in docs]
    return pa.table(
        {
            schema.ID: [d.get("id", f"doc{i}") for i, d in enumerate(docs)],
            schema.SOURCE: ["src"] * n,
            schema.REPO: ["repo"] * n,
            schema.PATH: [d.get("path", f"f{i}.py") for i, d in enumerate(docs)],
            schema.REVISION: ["rev"] * n,
            schema.LICENSE: [d.get("license", "MIT") for d in docs],
            schema.LANG: [d.get("lang", "Python") for d in docs],
            schema.KIND: [d.get("kind", "code") for d in docs],
            schema.TEXT: texts,
            schema.BYTES: [len(t.encode()) for t in texts],
            schema.CONTENT_HASH: [schema.content_hash(t.encode()) for t in texts],
            schema.ENCODING: ["utf-8"] * n,
        },
        schema=schema.DOC_SCHEMA,
    )

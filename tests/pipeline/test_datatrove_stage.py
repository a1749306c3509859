"""datatrove filters on codecorpus rows: documents in, verdicts and edits back, on tiny tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from codecorpus import schema

pytest.importorskip("datatrove")

from datatrove.pipeline.filters import RegexFilter
from datatrove.pipeline.filters.base_filter import BaseFilter

from codecorpus.pipeline.datatrove import run_filter


def table(texts: list[str], langs: list[str]) -> pa.Table:
    paths = [f"f{i}.py" for i in range(len(texts))]
    data = [t.encode() for t in texts]
    cols = {
        schema.ID: [schema.document_id("s", "r", p, "HEAD") for p in paths], schema.SOURCE: ["s"] * len(texts),
        schema.REPO: ["r"] * len(texts), schema.PATH: paths, schema.REVISION: ["HEAD"] * len(texts),
        schema.LICENSE: ["MIT"] * len(texts), schema.LANG: langs, schema.KIND: ["code"] * len(texts),
        schema.TEXT: texts, schema.BYTES: [len(d) for d in data],
        schema.CONTENT_HASH: [schema.content_hash(d) for d in data], schema.ENCODING: ["utf-8"] * len(texts),
    }
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in schema.DOC_SCHEMA})


class StripDebugLines(BaseFilter):
    """Edits text (drops ``print(`` lines), relabels metadata, rejects with and without a reason."""

    name = "strip debug"

    def filter(self, doc):
        if "REJECT" in doc.text:
            return False, "rejected_word"
        if "NOPE" in doc.text:
            return False
        assert doc.metadata[schema.PATH].endswith(".py") and schema.TEXT not in doc.metadata
        doc.text = "".join(line for line in doc.text.splitlines(True) if not line.startswith("print("))
        doc.metadata[schema.LANG] = doc.metadata[schema.LANG].upper()
        doc.metadata["added_by_filter"] = 1
        return True


def test_rows_map_to_documents_and_back_with_reasons():
    t = table(["x = 1\nprint(x)\n", "REJECT me\n", "NOPE\n", "y = 2\n"], ["Python"] * 4)
    out = run_filter(t, "strip", StripDebugLines, {})
    kept = out.table.to_pylist()
    assert [r[schema.TEXT] for r in kept] == ["x = 1\n", "y = 2\n"]
    assert [r[schema.BYTES] for r in kept] == [6, 6]
    assert kept[0][schema.CONTENT_HASH] == schema.content_hash(b"x = 1\n") != t.column(schema.CONTENT_HASH)[0].as_py()
    assert [r[schema.LANG] for r in kept] == ["PYTHON", "PYTHON"] and "added_by_filter" not in out.table.column_names
    assert [r[schema.ID] for r in kept] == [t.column(schema.ID)[0].as_py(), t.column(schema.ID)[3].as_py()]
    assert out.dropped.column(schema.REASON).to_pylist() == ["StripDebugLines:rejected_word", "StripDebugLines"]
    assert out.dropped.column(schema.STAGE).to_pylist() == ["strip", "strip"]
    assert out.table.num_rows + out.dropped.num_rows == t.num_rows


def test_datatrove_regex_filter_drops_by_its_name():
    t = table(["ok\n", "<<<<<<< HEAD\n"], ["Python", "Python"])
    out = run_filter(t, "conflicts", RegexFilter, {"regex_exp": "(?m)^<<<<<<< "})
    assert out.table.column(schema.TEXT).to_pylist() == ["ok\n"]
    assert out.dropped.column(schema.REASON).to_pylist() == ["RegexFilter"]

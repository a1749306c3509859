"""Two stages of a data team's own, in the Arrow-native contract of ``codecorpus.pipeline.user``.

- ``todo_density`` is an annotator: it returns new columns, one value per row.
- ``drop_test_files`` is a filter: it returns one drop reason per row (null keeps the row).

Both are plain functions over a ``pyarrow.Table``; the keys under ``config:`` in the
recipe arrive as keyword arguments. They never see Ray, files or markers: the
codecorpus runtime maps them over the shards, checks that rows are conserved,
writes the drop log and resumes them like a built-in stage.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

DEFAULT_MARKERS = ("TODO", "FIXME", "XXX")


def todo_density(table: pa.Table, *, markers: list[str] | tuple[str, ...] = DEFAULT_MARKERS) -> dict[str, pa.Array]:
    """``todo_count``: how many work-in-progress markers a document holds;
    ``todo_per_kline``: that count per thousand lines (a cheap "unfinished code" score).

    >>> out = todo_density(pa.table({"text": ["x = 1  # TODO\\n", "print()\\n"]}))
    >>> out["todo_count"].to_pylist(), out["todo_per_kline"].to_pylist()
    ([1, 0], [1000.0, 0.0])
    """
    text = table.column("text")
    count = pc.count_substring(text, markers[0]) if markers else pc.multiply(pc.utf8_length(text), 0)
    for marker in markers[1:]:
        count = pc.add(count, pc.count_substring(text, marker))
    lines = pc.max_element_wise(pc.count_substring(text, "\n"), 1)
    per_kline = pc.divide(pc.multiply(pc.cast(count, pa.float64()), 1000.0), pc.cast(lines, pa.float64()))
    return {
        "todo_count": pc.cast(count, pa.int32()).combine_chunks(),
        "todo_per_kline": per_kline.combine_chunks(),
    }


def drop_test_files(table: pa.Table, *, dirs: list[str] | tuple[str, ...] = ("tests", "test"),
                    prefix: str = "test_") -> pa.Array:
    """Drop test code: ``in_test_dir`` when a folder of the path is one of ``dirs``,
    ``test_file`` when the file name starts with ``prefix``; other rows are kept (null).

    >>> drop_test_files(pa.table({"path": ["pkg/a.py", "tests/b.py", "pkg/test_c.py"]})).to_pylist()
    [None, 'in_test_dir', 'test_file']
    """
    reasons = []
    for path in table.column("path").to_pylist():
        *folders, name = path.split("/")
        reasons.append("in_test_dir" if set(folders) & set(dirs) else "test_file" if name.startswith(prefix) else None)
    return pa.array(reasons, pa.string())

"""Unit tests of the ingest fixes found by the hostile-input run (issue 9)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from codecorpus.config import ArchiveSource, IngestConfig, RecordsSource
from codecorpus.ingest import collect, notebook, plan, read

CFG = IngestConfig()


def read_source(src) -> tuple[list[dict], list[dict]]:
    result = read.read_shard(plan.plan_source(src, CFG), CFG)
    return result.table.to_pylist(), result.dropped.to_pylist()


def test_non_utf8_file_name_is_kept_escaped_instead_of_failing_the_shard(tmp_path):
    from codecorpus.config import LocalSource

    with open(os.fsencode(tmp_path) + b"/bad\xffname.py", "wb") as f:
        f.write(b"NAME = 1\n")
    rows, dropped = read_source(LocalSource(type="local", name="l", path=str(tmp_path), layout="repo"))
    assert [r["path"] for r in rows] == ["bad\\xffname.py"] and dropped == []
    assert rows[0]["text"] == "NAME = 1\n"


def test_deeply_nested_and_surrogate_jsonl_lines_are_drops(tmp_path):
    lines = [b'{"content": "ok = 1"}', b"[" * 100_000, b'{"content": "x = \'\\ud800\'"}',
             b'{"content": "fine", "path": "\\udcff.py"}']
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(lines))
    rows, dropped = read_source(RecordsSource(type="jsonl", name="j", path=str(tmp_path / "a.jsonl")))
    assert [(d["path"], d["reason"]) for d in dropped] == [("a.jsonl#1", "too_deep"), ("a.jsonl#2", "invalid_utf8")]
    assert sorted(r["path"] for r in rows) == ["\\udcff.py", "a.jsonl#0"]


def test_corrupt_parquet_footer_is_a_planned_drop_not_a_plan_crash(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not a parquet file PAR1")
    src = RecordsSource(type="parquet", name="p", path=str(tmp_path))
    units = plan.plan_source(src, CFG)
    assert [u.skip for u in units] == ["corrupt_file"] and "ArrowInvalid" in units[0].detail
    rows, dropped = read_source(src)
    assert rows == [] and [(d["path"], d["reason"]) for d in dropped] == [("bad.parquet", "corrupt_file")]


def test_deeply_nested_notebook_is_bad_notebook():
    with pytest.raises(notebook.NotebookError, match="recursion limit"):
        notebook.to_script('{"cells": ' + "[\n" * 100_000 + "]\n" * 100_000 + "}")


def test_archive_source_max_archive_bytes_is_applied(tmp_path):
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(5):
            zf.writestr(f"m{i}.py", "x = 1\n" * 50_000)  # 300 KB each
    src = ArchiveSource(type="archive", name="a", path=str(tmp_path), max_archive_bytes=1_000_000)
    assert plan.plan_source(src, CFG)[0].max_total_bytes == 1_000_000
    rows, dropped = read_source(src)
    assert len(rows) == 3 and [d["reason"] for d in dropped] == ["archive_cap"]


def test_storable_keeps_valid_names_as_they_are():
    assert collect.storable("é/ß.py") == "é/ß.py"
    name = "ok.py"
    assert collect.storable(name) is name
    assert json.dumps(collect.storable("\udcff")).isascii() and Path(collect.storable("a\udc80")).name == "a\\x80"

"""Run files read back: the table as written, without importing pyarrow.dataset."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codecorpus.storage.parquet import (
    parquet_schema,
    read_parquet,
    read_parquet_files,
    write_parquet,
)


def test_a_run_file_reads_back_as_read_table_reads_it(tmp_path):
    table = pa.table({"id": pa.array(range(5000), pa.int64()), "text": [f"doc {i}" for i in range(5000)]})
    path = tmp_path / "part-00000.parquet"
    write_parquet(path, table)
    assert read_parquet(path).equals(pq.read_table(path))
    assert read_parquet(path).equals(table)
    assert read_parquet(path, ["text"]).column_names == ["text"]
    assert parquet_schema(path).names == ["id", "text"]


def test_files_read_as_one_table_in_order_a_missing_column_null(tmp_path):
    first, second = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_parquet(first, pa.table({"id": [1, 2], "lang": ["Python", "C"]}))
    write_parquet(second, pa.table({"id": [3]}))
    both = read_parquet_files([first, second])
    assert both.column("id").to_pylist() == [1, 2, 3]
    assert both.column("lang").to_pylist() == ["Python", "C", None]
    with pytest.raises(ValueError, match="no files"):
        read_parquet_files([])


def test_many_files_read_at_once_come_back_in_the_order_given(tmp_path):
    """More files than ``READ_THREADS``, the first ones the largest (read last if order followed
    completion), and a missing file raises as it did read one at a time."""
    from codecorpus.storage import parquet

    paths = []
    for i in range(3 * parquet.READ_THREADS):
        paths.append(tmp_path / f"part-{i:05d}.parquet")
        rows = 50_000 if i < parquet.READ_THREADS else 1
        write_parquet(paths[-1], pa.table({"shard": pa.array([i] * rows, pa.int64())}))
    shards = read_parquet_files(paths, ["shard"]).column("shard").to_numpy()
    assert [int(v) for v in dict.fromkeys(shards)] == list(range(len(paths)))
    with pytest.raises(FileNotFoundError):
        read_parquet_files([*paths, tmp_path / "missing.parquet"])


def test_files_whose_column_types_differ_read_as_the_wider_type(tmp_path):
    narrow, wide = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_parquet(narrow, pa.table({"id": pa.array([1, 2], pa.int32())}))
    write_parquet(wide, pa.table({"id": pa.array([2**40], pa.int64())}))
    for order in ([narrow, wide], [wide, narrow]):
        table = read_parquet_files(order)
        assert table.schema.field("id").type == pa.int64()
        assert sorted(table.column("id").to_pylist()) == [1, 2, 2**40]


def test_reading_a_run_file_imports_no_pyarrow_dataset(tmp_path):
    path = tmp_path / "part.parquet"
    write_parquet(path, pa.table({"id": [1]}))
    script = (f"import sys\nfrom pathlib import Path\nfrom codecorpus.storage.parquet import read_parquet\n"
              f"read_parquet(Path({str(path)!r}))\nprint('pyarrow.dataset' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"

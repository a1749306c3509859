"""Deterministic Parquet files in a run directory: written atomically, read through the mirror."""

from __future__ import annotations

import io
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.storage.mirror import ensure_local

PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 3
PARQUET_ROW_GROUP_ROWS = 4096


def write_parquet(path: Path, table: pa.Table) -> int:
    """Deterministic zstd Parquet, written atomically. Returns the file size."""
    buf = io.BytesIO()
    pq.write_table(
        table,
        buf,
        compression=PARQUET_COMPRESSION,
        compression_level=PARQUET_COMPRESSION_LEVEL,
        row_group_size=PARQUET_ROW_GROUP_ROWS,
        write_statistics=False,
    )
    data = buf.getbuffer()
    atomic_write_bytes(path, data)
    return len(data)


def read_parquet(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """A run file as a table (``columns`` alone, if given), fetched from the S3 store first when
    the mirror lacks it.

    Read as one ``pq.ParquetFile``, not with ``pq.read_table``, which goes through
    ``pyarrow.dataset``: a module each reading process would otherwise import for this
    alone. The table is the same.
    """
    with pq.ParquetFile(ensure_local(path), memory_map=True) as file:
        return file.read(columns=columns)


READ_THREADS = 4
"""Files ``read_parquet_files`` opens and reads at once: opening a file (its footer) and decoding
it run mostly outside the interpreter lock, and a file missing from the mirror is fetched from
the S3 store meanwhile, so a few threads read a run's many small files in less time than one."""


def read_parquet_files(paths: Sequence[Path], columns: Sequence[str] | None = None) -> pa.Table:
    """Run files of one kind as one table, in the order given; a column a file lacks is null there,
    and a column whose type differs between files takes the wider type (int32 and int64: int64).

    For the driver's reads (the report): up to ``READ_THREADS`` files are read at once."""
    if not paths:
        raise ValueError("read_parquet_files: no files to read")
    if len(paths) == 1:
        return read_parquet(paths[0], columns)
    with ThreadPoolExecutor(min(READ_THREADS, len(paths)), thread_name_prefix="codecorpus-read") as pool:
        tables = list(pool.map(lambda path: read_parquet(path, columns), paths))
    return pa.concat_tables(tables, promote_options="permissive")


def parquet_schema(path: Path) -> pa.Schema:
    """A run file's schema, from its footer alone."""
    return pq.read_schema(ensure_local(path))

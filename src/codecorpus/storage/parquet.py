"""Deterministic Parquet files in a run directory: written atomically, read through the mirror."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from codecorpus import schema
from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.storage.mirror import ensure_local


def write_parquet(path: Path, table: pa.Table) -> int:
    """Deterministic zstd Parquet, written atomically. Returns the file size."""
    buf = io.BytesIO()
    pq.write_table(
        table,
        buf,
        compression=schema.PARQUET_COMPRESSION,
        compression_level=schema.PARQUET_COMPRESSION_LEVEL,
        row_group_size=schema.PARQUET_ROW_GROUP_ROWS,
        write_statistics=False,
    )
    data = buf.getbuffer()
    atomic_write_bytes(path, data)
    return len(data)


def read_parquet(path: Path) -> pa.Table:
    """A run file as a table, fetched from the S3 store first when the mirror lacks it."""
    return pq.read_table(ensure_local(path), memory_map=True)

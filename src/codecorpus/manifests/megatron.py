"""Token shards as Megatron-Core indexed datasets (``.bin`` + ``.idx``) plus a segment table.

The ``.bin`` is the flat little-endian token array. The ``.idx`` is the layout
``megatron.core.datasets.indexed_dataset`` reads (constants in ``schema``):
header, version, dtype code, sequence and document counts, then int32
``sequence_lengths``, int64 ``sequence_pointers`` (byte offsets into the
``.bin``, so shards past 2**31 tokens are fine) and int64 ``document_indices``.

codecorpus's packed-set convention on top of that format: each idx *sequence*
is one document SEGMENT (a whole document or one piece of a long one, EOS
included), and ``document_indices`` mark PACKED SEQUENCES: packed sequence j is
idx sequences ``document_indices[j]:document_indices[j+1]``, at most ``seq_len``
tokens, unpadded on disk (the loader pads). Its ``cu_seqlens`` are
``[0, *cumsum(sequence_lengths[document_indices[j]:document_indices[j+1]])]``.
Megatron's GPTDataset, which concatenates documents anyway, reads the files as is.

The segment table (``prefix + SEGMENTS_SUFFIX``) has one row per idx sequence,
in the same order: which document the piece came from, where in it, its length,
language and source, so reports and ``verify`` can re-count everything.

Numpy and pyarrow only: importing this never pulls in torch or megatron.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from codecorpus import schema
from codecorpus.storage.atomic import atomic_write_bytes, atomic_writer, sha256_bytes
from codecorpus.storage.parquet import (
    PARQUET_COMPRESSION,
    PARQUET_COMPRESSION_LEVEL,
    PARQUET_ROW_GROUP_ROWS,
)

DTYPE_CODES: dict[int, np.dtype] = {
    code: np.dtype(name) for code, name in schema.MEGATRON_DTYPE_CODES.items()
}
_CODE_OF_DTYPE = {dtype: code for code, dtype in DTYPE_CODES.items()}
# header, <Q version, <B dtype code, <Q sequence count, <Q document count
_HEAD = struct.Struct(f"<{len(schema.MEGATRON_INDEX_HEADER)}sQBQQ")


class FileInfo(TypedDict):
    """One shard file as a manifest lists it; ``path`` is relative to the set directory."""

    path: str
    bytes: int
    sha256: str


class ShardFormatError(ValueError):
    """A shard file that cannot be what it claims to be (bad header, truncated, ...)."""

    def __init__(self, path: Path | str, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path = str(path)
        self.what = what


@dataclass(frozen=True)
class IndexInfo:
    """The arrays of one ``.idx`` (read-only views onto a memory map)."""

    dtype: np.dtype
    sequence_lengths: np.ndarray
    sequence_pointers: np.ndarray
    document_indices: np.ndarray

    @property
    def tokens(self) -> int:
        return int(self.sequence_lengths.sum(dtype=np.int64))

    @property
    def packed_lengths(self) -> np.ndarray:
        """Token count of every packed sequence (int64), from the document indices."""
        ends = np.concatenate([[0], np.cumsum(self.sequence_lengths, dtype=np.int64)])
        return np.diff(ends[self.document_indices])


def shard_file(prefix: Path | str, key: str) -> Path:
    """Path of one shard file, ``key`` in ``schema.SHARD_FILE_SUFFIXES`` (bin, idx, seg, mask).

    Suffixes are appended, never substituted: prefixes may contain dots.
    """
    return Path(f"{prefix}{schema.SHARD_FILE_SUFFIXES[key]}")


def token_dtype(vocab_size: int) -> np.dtype:
    """Megatron's choice of token dtype: uint16 below 65500 ids, else int32.

    >>> token_dtype(50257), token_dtype(151646)
    (dtype('uint16'), dtype('int32'))
    """
    return np.dtype(np.uint16 if vocab_size < schema.MEGATRON_UINT16_VOCAB_LIMIT else np.int32)


def dtype_code(dtype: np.dtype | type) -> int:
    dtype = np.dtype(dtype).newbyteorder("=")
    if dtype not in _CODE_OF_DTYPE:
        raise ValueError(f"token dtype {dtype} has no Megatron dtype code: use uint16 or int32")
    return _CODE_OF_DTYPE[dtype]


def _check_layout(
    n_tokens: int, sequence_lengths: np.ndarray, document_indices: np.ndarray
) -> None:
    if sequence_lengths.ndim != 1 or document_indices.ndim != 1:
        raise ValueError("sequence_lengths and document_indices must be 1-D arrays")
    if len(sequence_lengths) and sequence_lengths.min() < 0:
        raise ValueError(f"sequence_lengths has a negative length ({sequence_lengths.min()})")
    if len(sequence_lengths) and sequence_lengths.max() > np.iinfo(np.int32).max:
        raise ValueError("a sequence is longer than 2**31-1 tokens: split it into segments")
    total = int(sequence_lengths.sum(dtype=np.int64))
    if total != n_tokens:
        raise ValueError(f"sum(sequence_lengths) is {total} but there are {n_tokens} tokens")
    if len(document_indices) == 0 or document_indices[0] != 0:
        raise ValueError("document_indices must start at 0")
    if document_indices[-1] != len(sequence_lengths):
        raise ValueError(
            f"document_indices must end at len(sequence_lengths) = {len(sequence_lengths)}, "
            f"not {document_indices[-1]}"
        )
    if np.any(np.diff(document_indices) < 0):
        raise ValueError("document_indices must be non-decreasing")


def sequence_pointers(sequence_lengths: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Byte offset of every sequence in the ``.bin`` (int64: no overflow past 2**31 tokens)."""
    pointers = np.zeros(len(sequence_lengths), dtype="<i8")
    np.cumsum(sequence_lengths[:-1], dtype=np.int64, out=pointers[1:])
    pointers *= np.dtype(dtype).itemsize
    return pointers


def index_bytes(
    dtype: np.dtype, sequence_lengths: np.ndarray, document_indices: np.ndarray
) -> bytes:
    """The ``.idx`` file for these arrays, byte for byte what Megatron's _IndexWriter writes."""
    lengths = np.asarray(sequence_lengths, dtype="<i4")
    pointers = sequence_pointers(lengths, dtype)
    head = _HEAD.pack(
        schema.MEGATRON_INDEX_HEADER,
        schema.MEGATRON_INDEX_VERSION,
        dtype_code(dtype),
        len(lengths),
        len(document_indices),
    )
    docs = np.asarray(document_indices, dtype="<i8")
    return head + lengths.tobytes() + pointers.tobytes() + docs.tobytes()


def _write(path: Path, data: bytes | memoryview) -> FileInfo:
    atomic_write_bytes(path, data)
    return FileInfo(path=path.name, bytes=len(data), sha256=sha256_bytes(data))


def write_indexed_dataset(
    prefix: Path | str,
    tokens: np.ndarray,
    sequence_lengths: np.ndarray,
    document_indices: np.ndarray,
) -> dict[str, FileInfo]:
    """Write ``prefix.bin`` then ``prefix.idx``, each atomically; the dtype is ``tokens.dtype``.

    The ``.bin`` goes first, so an ``.idx`` under its final name always has its
    complete ``.bin`` beside it. Hashes come from the in-memory bytes, so the
    files are not read back.
    """
    tokens = np.asarray(tokens)
    sequence_lengths = np.asarray(sequence_lengths)
    document_indices = np.asarray(document_indices)
    if tokens.ndim != 1:
        raise ValueError(f"tokens must be a 1-D array, got shape {tokens.shape}")
    dtype_code(tokens.dtype)  # fail before writing anything
    _check_layout(len(tokens), sequence_lengths, document_indices)
    data = np.ascontiguousarray(tokens, dtype=tokens.dtype.newbyteorder("<"))
    return {
        "bin": _write(shard_file(prefix, "bin"), memoryview(data).cast("B")),
        "idx": _write(
            shard_file(prefix, "idx"), index_bytes(data.dtype, sequence_lengths, document_indices)
        ),
    }


def concat_shards(sources: Sequence[Path | str], target: Path | str) -> dict[str, FileInfo]:
    """Write one shard at ``target`` holding the ``sources`` shards one after another.

    Packed sequences and segments keep their order, so the result is what
    packing the sources into one shard in that order would have written. The
    ``.bin`` (and a ``.mask.bin``, present in all sources or none) are copied in
    1 MiB chunks and hashed on the way, so memory is the idx arrays and the
    segment tables (about 50 bytes per segment), never the tokens. Every file is
    written atomically, the ``.idx`` last.
    """
    if not sources:
        raise ValueError("concat_shards needs at least one source shard")
    indexes = [read_index(shard_file(p, "idx")) for p in sources]
    dtypes = sorted({i.dtype.name for i in indexes})
    if len(dtypes) > 1:
        raise ValueError(f"cannot concatenate shards of token dtypes {dtypes}: {[str(p) for p in sources]}")
    with_mask = [shard_file(p, "mask").is_file() for p in sources]
    if any(with_mask) and not all(with_mask):
        raise ValueError(f"some of {[str(p) for p in sources]} have a loss mask and some do not")
    offsets = np.cumsum([0] + [len(i.sequence_lengths) for i in indexes[:-1]])
    document_indices = np.concatenate(
        [np.zeros(1, np.int64)] + [i.document_indices[1:] + off for i, off in zip(indexes, offsets, strict=True)]
    )
    files = {"bin": _concat_files([shard_file(p, "bin") for p in sources], shard_file(target, "bin"))}
    if all(with_mask):
        files["mask"] = _concat_files([shard_file(p, "mask") for p in sources], shard_file(target, "mask"))
    files["seg"] = write_segments(target, pa.concat_tables([read_segments(p) for p in sources]))
    lengths = np.concatenate([i.sequence_lengths for i in indexes])
    files["idx"] = _write(shard_file(target, "idx"), index_bytes(indexes[0].dtype, lengths, document_indices))
    return files


def _concat_files(sources: list[Path], target: Path) -> FileInfo:
    digest, size = hashlib.sha256(), 0
    with atomic_writer(target) as out:
        for path in sources:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
    return FileInfo(path=target.name, bytes=size, sha256=digest.hexdigest())


def read_index(idx_path: Path | str) -> IndexInfo:
    """Parse an ``.idx`` with numpy only, checking everything Megatron would assert on."""
    size = Path(idx_path).stat().st_size
    if size < _HEAD.size:
        raise ShardFormatError(
            idx_path, f"truncated: {size} bytes, the header alone is {_HEAD.size}"
        )
    buf = np.memmap(idx_path, dtype=np.uint8, mode="r")
    magic, version, code, n_seq, n_doc = _HEAD.unpack(buf[: _HEAD.size].tobytes())
    if magic != schema.MEGATRON_INDEX_HEADER:
        raise ShardFormatError(
            idx_path, f"bad magic {magic!r}, expected {schema.MEGATRON_INDEX_HEADER!r}"
        )
    if version != schema.MEGATRON_INDEX_VERSION:
        raise ShardFormatError(idx_path, f"unsupported version {version}, expected 1")
    if code not in DTYPE_CODES:
        raise ShardFormatError(idx_path, f"unknown dtype code {code}, expected one of 1..8")
    expected = _HEAD.size + 12 * n_seq + 8 * n_doc
    if size != expected:
        what = (
            "truncated" if size < expected else "trailing bytes (multimodal modes are unsupported)"
        )
        raise ShardFormatError(
            idx_path, f"{what}: {size} bytes, {n_seq} sequences and {n_doc} indices need {expected}"
        )
    lengths = np.frombuffer(buf, "<i4", n_seq, _HEAD.size)
    pointers = np.frombuffer(buf, "<i8", n_seq, _HEAD.size + 4 * n_seq)
    docs = np.frombuffer(buf, "<i8", n_doc, _HEAD.size + 12 * n_seq)
    return IndexInfo(DTYPE_CODES[code], lengths, pointers, docs)


def index_problems(info: IndexInfo) -> list[str]:
    """Inconsistencies inside one parsed index; an empty list when it is sound."""
    problems = []
    try:
        _check_layout(info.tokens, info.sequence_lengths, info.document_indices)
    except ValueError as e:
        problems.append(str(e))
    if info.sequence_lengths.size and info.sequence_lengths.min() >= 0:
        expected = sequence_pointers(info.sequence_lengths, info.dtype)
        bad = np.flatnonzero(expected != info.sequence_pointers)
        if bad.size:
            i = int(bad[0])
            problems.append(
                f"sequence_pointers[{i}] is {info.sequence_pointers[i]}, "
                f"expected {expected[i]} from the sequence lengths ({bad.size} wrong)"
            )
    return problems


def open_tokens(prefix: Path | str, dtype: np.dtype | type) -> np.ndarray:
    """The whole ``.bin`` as a read-only memory map (an empty array for an empty shard)."""
    path = shard_file(prefix, "bin")
    dtype = np.dtype(dtype).newbyteorder("<")
    size = path.stat().st_size
    if size % dtype.itemsize:
        raise ShardFormatError(path, f"{size} bytes is not a whole number of {dtype} tokens")
    if size == 0:
        return np.zeros(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def write_segments(prefix: Path | str, table: pa.Table) -> FileInfo:
    """Write the segment table atomically as zstd Parquet, same bytes for the same rows.

    The table is cast to ``schema.SEGMENT_SCHEMA`` (extra columns are an error,
    so nothing silently disappears) and written in one buffer, then renamed in.
    """
    names = schema.SEGMENT_SCHEMA.names
    if sorted(table.column_names) != sorted(names):
        raise ValueError(f"segment table columns are {table.column_names}, expected {names}")
    table = table.select(names).cast(schema.SEGMENT_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression=PARQUET_COMPRESSION,
        compression_level=PARQUET_COMPRESSION_LEVEL,
        row_group_size=PARQUET_ROW_GROUP_ROWS,
    )
    return _write(shard_file(prefix, "seg"), memoryview(sink.getvalue()))


def read_segments(prefix: Path | str) -> pa.Table:
    path = shard_file(prefix, "seg")
    with pq.ParquetFile(path) as file:  # not read_table: no pyarrow.dataset import
        table = file.read()
    if not table.schema.equals(schema.SEGMENT_SCHEMA):
        raise ShardFormatError(path, f"schema is {table.schema}, expected {schema.SEGMENT_SCHEMA}")
    return table


# --- loss mask (SFT sets; format defined here, written by the SFT pack step) -----------


def write_loss_mask(prefix: Path | str, mask: np.ndarray) -> FileInfo:
    """Write ``prefix.mask.bin``: one uint8 per token in ``.bin`` order (1 = loss), no header.

    Same length as the token array, so a loader slices it with the ``.idx``
    pointers divided by the token size. Values other than 0/1 are an error.
    """
    mask = np.ascontiguousarray(mask, dtype=schema.LOSS_MASK_DTYPE)
    if mask.ndim != 1:
        raise ValueError(f"loss mask must be 1-D, got shape {mask.shape}")
    if mask.size and int(mask.max()) > 1:
        raise ValueError("loss mask values must be 0 or 1")
    return _write(shard_file(prefix, "mask"), memoryview(mask).cast("B"))


def open_loss_mask(prefix: Path | str) -> np.ndarray:
    """The loss mask of a shard as a read-only memory map (empty array for an empty file)."""
    path = shard_file(prefix, "mask")
    if path.stat().st_size == 0:
        return np.zeros(0, schema.LOSS_MASK_DTYPE)
    return np.memmap(path, dtype=schema.LOSS_MASK_DTYPE, mode="r")

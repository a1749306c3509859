"""Megatron indexed-dataset shards: our writer against our reader and Megatron-Core's own."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.manifests.megatron import (
    DTYPE_CODES,
    IndexInfo,
    ShardFormatError,
    index_bytes,
    index_problems,
    open_tokens,
    read_index,
    read_segments,
    sequence_pointers,
    shard_file,
    token_dtype,
    write_indexed_dataset,
    write_segments,
)
from codecorpus.storage.atomic import atomic_write_bytes, atomic_writer, sha256_file

SEQ_LEN = 32


def packed_shard(seed: int, dtype: np.dtype, vocab: int, n_docs: int = 12):
    """Random documents cut into pieces of <= SEQ_LEN, packed in order (next-fit)."""
    rng = np.random.default_rng(seed)
    pieces = []
    for d in range(n_docs):
        doc = rng.integers(0, vocab, int(rng.integers(1, 3 * SEQ_LEN)))
        pieces += [(f"d{d}", off, doc[off : off + SEQ_LEN]) for off in range(0, len(doc), SEQ_LEN)]
    doc_indices, fill = [0], 0
    for i, (_, _, toks) in enumerate(pieces):
        if fill + len(toks) > SEQ_LEN:
            doc_indices.append(i)
            fill = 0
        fill += len(toks)
    doc_indices.append(len(pieces))
    tokens = np.concatenate([p[2] for p in pieces]).astype(dtype)
    lengths = np.array([len(p[2]) for p in pieces], np.int32)
    segments = pa.table(
        {
            schema.SEG_DOC_ID: [p[0] for p in pieces],
            schema.SEG_DOC_OFFSET: [p[1] for p in pieces],
            schema.SEG_LENGTH: lengths,
            schema.LANG: ["python"] * len(pieces),
            schema.SOURCE: ["github"] * len(pieces),
        }
    )
    return tokens, lengths, np.array(doc_indices, np.int64), segments, [p[2] for p in pieces]


DTYPES = [(np.uint16, 50_000), (np.int32, 150_000)]


@pytest.mark.parametrize(("dtype", "vocab"), DTYPES)
def test_round_trip_through_our_reader(tmp_path, dtype, vocab):
    tokens, lengths, doc_idx, _, pieces = packed_shard(1, dtype, vocab)
    prefix = tmp_path / "part-00000"
    files = write_indexed_dataset(prefix, tokens, lengths, doc_idx)

    info = read_index(shard_file(prefix, "idx"))
    assert info.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(info.sequence_lengths, lengths)
    np.testing.assert_array_equal(info.document_indices, doc_idx)
    itemsize = np.dtype(dtype).itemsize
    np.testing.assert_array_equal(info.sequence_pointers[1:], np.cumsum(lengths)[:-1] * itemsize)
    assert info.packed_lengths.max() <= SEQ_LEN
    assert index_problems(info) == []
    data = open_tokens(prefix, info.dtype)
    np.testing.assert_array_equal(data, tokens)
    for i, piece in enumerate(pieces):
        start = info.sequence_pointers[i] // itemsize
        np.testing.assert_array_equal(data[start : start + info.sequence_lengths[i]], piece)
    for key in ("bin", "idx"):
        path = shard_file(prefix, key)
        assert files[key] == {
            "path": path.name,
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
        }
    assert files["bin"]["bytes"] == len(tokens) * itemsize


@pytest.mark.parametrize(("dtype", "vocab"), DTYPES)
def test_megatron_indexed_dataset_opens_our_files(tmp_path, dtype, vocab):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    tokens, lengths, doc_idx, _, pieces = packed_shard(2, dtype, vocab)
    prefix = tmp_path / "part-00000"
    write_indexed_dataset(prefix, tokens, lengths, doc_idx)

    ds = IndexedDataset(str(prefix), mmap=True)
    assert len(ds) == len(pieces)
    assert ds.index.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(ds.document_indices, doc_idx)
    np.testing.assert_array_equal(ds.sequence_lengths, lengths)
    for i, piece in enumerate(pieces):
        np.testing.assert_array_equal(ds[i], piece)
    # a packed sequence read through Megatron is the concatenation of its segments
    j = len(doc_idx) // 2
    packed = np.concatenate(ds[int(doc_idx[j]) : int(doc_idx[j + 1])])
    np.testing.assert_array_equal(packed, np.concatenate(pieces[doc_idx[j] : doc_idx[j + 1]]))


@pytest.mark.parametrize(("dtype", "vocab"), DTYPES)
def test_bytes_identical_to_megatron_builder(tmp_path, dtype, vocab):
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    tokens, lengths, doc_idx, _, pieces = packed_shard(3, dtype, vocab)
    ours = tmp_path / "ours"
    write_indexed_dataset(ours, tokens, lengths, doc_idx)
    theirs = tmp_path / "theirs"
    builder = IndexedDatasetBuilder(f"{theirs}.bin", dtype=dtype)
    for j in range(len(doc_idx) - 1):
        for piece in pieces[doc_idx[j] : doc_idx[j + 1]]:
            builder.add_item(torch.from_numpy(piece.astype(np.int64)))
        builder.end_document()
    builder.finalize(f"{theirs}.idx")
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"ours{suffix}").read_bytes() == (
            tmp_path / f"theirs{suffix}"
        ).read_bytes()


def test_dtype_codes_match_megatron():
    from megatron.core.datasets.indexed_dataset import DType

    assert {d.value: np.dtype(d.name) for d in DType} == DTYPE_CODES
    for vocab in (100, 65_499, 65_500, 151_646):
        assert token_dtype(vocab) == np.dtype(DType.optimal_dtype(vocab))


def test_token_dtype_threshold():
    assert token_dtype(65_499) == np.uint16
    assert token_dtype(65_500) == np.int32


def test_pointers_are_64_bit_past_2_31_tokens(tmp_path):
    lengths = np.array([2**31 - 1, 2**31 - 1, 5], np.int32)
    pointers = sequence_pointers(lengths, np.dtype(np.int32))
    assert pointers.dtype == np.int64
    assert pointers.tolist() == [0, (2**31 - 1) * 4, 2 * (2**31 - 1) * 4]
    path = tmp_path / "big.idx"
    atomic_write_bytes(path, index_bytes(np.dtype(np.int32), lengths, np.array([0, 3])))
    info = read_index(path)
    assert info.tokens == 2 * (2**31 - 1) + 5
    assert info.sequence_pointers.tolist() == pointers.tolist()
    assert index_problems(info) == []


@pytest.mark.parametrize(
    ("lengths", "doc_idx", "message"),
    [
        ([3, 3], [0, 2], r"sum\(sequence_lengths\) is 6 but there are 7 tokens"),
        ([3, 4], [1, 2], "must start at 0"),
        ([3, 4], [0, 1], r"must end at len\(sequence_lengths\) = 2, not 1"),
        ([3, 4, 0], [0, 2, 1, 3], "non-decreasing"),
        ([8, -1], [0, 2], "negative length"),
    ],
)
def test_write_rejects_inconsistent_layout(tmp_path, lengths, doc_idx, message):
    tokens = np.arange(7, dtype=np.uint16)
    with pytest.raises(ValueError, match=message):
        write_indexed_dataset(tmp_path / "p", tokens, np.array(lengths), np.array(doc_idx))
    assert os.listdir(tmp_path) == []


def test_write_rejects_dtype_without_megatron_code(tmp_path):
    with pytest.raises(ValueError, match="no Megatron dtype code"):
        write_indexed_dataset(
            tmp_path / "p", np.arange(4, dtype=np.uint32), np.array([4]), np.array([0, 1])
        )


@pytest.fixture
def good_idx(tmp_path):
    tokens, lengths, doc_idx, _, _ = packed_shard(4, np.uint16, 1000)
    write_indexed_dataset(tmp_path / "p", tokens, lengths, doc_idx)
    return tmp_path / "p.idx"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda b: b"MMIDIDY" + b[7:], "bad magic"),
        (lambda b: b[:9] + (2).to_bytes(8, "little") + b[17:], "unsupported version 2"),
        (lambda b: b[:17] + bytes([9]) + b[18:], "unknown dtype code 9"),
        (lambda b: b[:-1], "truncated"),
        (lambda b: b[:20], "truncated: 20 bytes, the header alone is 34"),
        (lambda b: b + b"\x00" * 3, "trailing bytes"),
    ],
)
def test_read_index_rejects_bad_files(good_idx, edit, message):
    good_idx.write_bytes(edit(good_idx.read_bytes()))
    with pytest.raises(ShardFormatError, match=message) as err:
        read_index(good_idx)
    assert isinstance(err.value, ValueError)
    assert err.value.path == str(good_idx)


def test_index_problems_finds_wrong_pointer(good_idx):
    info = read_index(good_idx)
    pointers = info.sequence_pointers.copy()
    pointers[3] += 2
    bad = IndexInfo(info.dtype, info.sequence_lengths, pointers, info.document_indices)
    assert index_problems(bad) == [
        f"sequence_pointers[3] is {pointers[3]}, expected {pointers[3] - 2} "
        "from the sequence lengths (1 wrong)"
    ]


def test_open_tokens_rejects_partial_token(tmp_path):
    (tmp_path / "p.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ShardFormatError, match="not a whole number of uint16"):
        open_tokens(tmp_path / "p", np.uint16)
    (tmp_path / "e.bin").write_bytes(b"")
    assert len(open_tokens(tmp_path / "e", np.int32)) == 0


def test_atomic_writes_leave_only_final_files(tmp_path):
    tokens, lengths, doc_idx, segments, _ = packed_shard(5, np.uint16, 1000)
    write_indexed_dataset(tmp_path / "part-00000", tokens, lengths, doc_idx)
    write_segments(tmp_path / "part-00000", segments)
    assert sorted(os.listdir(tmp_path)) == [
        "part-00000.bin",
        "part-00000.idx",
        "part-00000.seg.parquet",
    ]


def test_failed_atomic_write_keeps_old_file_and_no_temp(tmp_path):
    target = tmp_path / "manifest.json"
    atomic_write_bytes(target, b"old")
    with pytest.raises(RuntimeError), atomic_writer(target) as f:
        f.write(b"half of the new")
        raise RuntimeError("crash mid-write")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["manifest.json"]


def test_segments_round_trip_and_deterministic_bytes(tmp_path):
    _, _, _, segments, _ = packed_shard(6, np.uint16, 1000)
    a = write_segments(tmp_path / "a", segments)
    b = write_segments(tmp_path / "b", segments.select(segments.column_names[::-1]))
    assert a["sha256"] == b["sha256"]
    assert a["path"] == "a.seg.parquet"
    back = read_segments(tmp_path / "a")
    assert back.schema.equals(schema.SEGMENT_SCHEMA)
    assert back.to_pylist() == segments.cast(schema.SEGMENT_SCHEMA).to_pylist()


def test_segments_reject_unknown_columns(tmp_path):
    _, _, _, segments, _ = packed_shard(7, np.uint16, 1000)
    with pytest.raises(ValueError, match="segment table columns"):
        write_segments(
            tmp_path / "a", segments.append_column("extra", pa.array([1] * len(segments)))
        )

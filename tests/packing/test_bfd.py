"""Best-Fit-Decreasing against a brute-force reference, and document packing invariants."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.packing.bfd import best_fit_decreasing
from codecorpus.packing.pack import PackedShard, TokenLists, pack_documents


def reference_bfd(lengths: list[int], capacity: int) -> list[list[int]]:
    """The textbook O(N * bins) BFD: scan every bin for the tightest fit."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    left: list[int] = []
    for item in order:
        best = -1
        for b, room in enumerate(left):
            if room >= lengths[item] and (best < 0 or room < left[best]):
                best = b
        if best < 0:
            bins.append([])
            left.append(capacity)
            best = len(bins) - 1
        bins[best].append(item)
        left[best] -= lengths[item]
    return bins


CASES = [
    ("uniform", 64, 500),
    ("uniform", 1000, 400),
    ("small", 128, 600),  # many ties: lengths 1..8
    ("lognormal", 2048, 400),
    ("exact", 100, 300),  # lengths that divide the capacity: many exactly-full bins
]


def random_lengths(kind: str, capacity: int, n: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        values = rng.integers(1, capacity + 1, n)
    elif kind == "small":
        values = rng.integers(1, 9, n)
    elif kind == "lognormal":
        values = np.clip(rng.lognormal(5.0, 1.2, n).astype(int), 1, capacity)
    else:
        values = rng.choice([10, 20, 25, 50, 100], n)
    return [int(v) for v in values]


@pytest.mark.parametrize(("kind", "capacity", "n"), CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bfd_matches_reference_and_invariants(kind: str, capacity: int, n: int, seed: int) -> None:
    lengths = random_lengths(kind, capacity, n, seed)
    bins = best_fit_decreasing(lengths, capacity)
    assert bins == reference_bfd(lengths, capacity)
    assert sorted(i for b in bins for i in b) == list(range(n))  # every item exactly once
    assert all(sum(lengths[i] for i in b) <= capacity for b in bins)
    assert best_fit_decreasing(np.array(lengths), capacity) == bins  # deterministic, any input type


def test_bfd_ties_and_edges() -> None:
    assert best_fit_decreasing([], 8) == []
    assert best_fit_decreasing([8, 8], 8) == [[0], [1]]
    # equal lengths keep input order; equally tight bins go to the lowest index
    assert best_fit_decreasing([3, 3, 3, 3], 7) == [[0, 1], [2, 3]]
    assert best_fit_decreasing([5, 5, 2, 2], 7) == [[0, 2], [1, 3]]
    # the tightest bin wins, not the first that fits: 2 goes where 2 is left
    assert best_fit_decreasing([6, 5, 2, 1], 7) == [[0, 3], [1, 2]]
    assert best_fit_decreasing([1], 1) == [[0]]


def test_bfd_rejects_items_over_capacity() -> None:
    with pytest.raises(ValueError, match="split"):
        best_fit_decreasing([3, 9], 8)
    with pytest.raises(ValueError, match="capacity"):
        best_fit_decreasing([1], 0)


def test_bfd_packs_tightly_at_scale() -> None:
    lengths = np.clip(np.random.default_rng(7).lognormal(6.5, 1.3, 20_000).astype(int), 1, 8192)
    bins = best_fit_decreasing(lengths, 8192)
    lower_bound = -(-int(lengths.sum()) // 8192)
    assert len(bins) <= lower_bound * 1.01
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))


# --- pack_documents --------------------------------------------------------------------


def make_docs(seed: int, n: int, seq_len: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = np.concatenate(
        [
            rng.integers(1, seq_len + 1, n),
            [seq_len, seq_len + 1, 2 * seq_len, 3 * seq_len + 5, 0],  # edges, and an empty doc
        ]
    )
    rng.shuffle(lengths)
    return [rng.integers(0, 60_000, int(k)).astype(np.uint32) for k in lengths]


def as_list_column(docs: list[np.ndarray]) -> pa.LargeListArray:
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    values = np.concatenate(docs) if docs else np.empty(0, np.uint32)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(values, pa.uint32()))


def pack(
    docs: list[np.ndarray],
    seq_len: int,
    tokens_arg: TokenLists | None = None,
    dtype: npt.DTypeLike = np.int32,
) -> tuple[list[str], list[str], list[str], PackedShard]:
    ids = [f"doc{i}" for i in range(len(docs))]
    langs = ["python" if i % 2 else "rust" for i in range(len(docs))]
    sources = ["a" if i % 3 else "b" for i in range(len(docs))]
    column = as_list_column(docs) if tokens_arg is None else tokens_arg
    return ids, langs, sources, pack_documents(ids, column, langs, sources, seq_len, dtype)


@pytest.mark.parametrize("seed", [0, 1])
def test_pack_documents_invariants(seed: int) -> None:
    seq_len = 64
    docs = make_docs(seed, 300, seq_len)
    ids, langs, sources, packed = pack(docs, seq_len)
    seg = packed.segments
    assert seg.schema == schema.SEGMENT_SCHEMA
    lengths = seg.column(schema.SEG_LENGTH).to_numpy()
    assert np.array_equal(lengths, packed.sequence_lengths)
    assert packed.sequence_lengths.dtype == np.int32
    assert packed.tokens.dtype == np.int32 and len(packed.tokens) == lengths.sum()

    # sequences: boundaries in segment space, each at most seq_len
    di = packed.document_indices
    assert di.dtype == np.int64 and di[0] == 0 and di[-1] == seg.num_rows
    assert np.all(np.diff(di) > 0) and packed.sequences == len(di) - 1
    used = np.add.reduceat(lengths.astype(np.int64), di[:-1])
    assert np.all(used <= seq_len)
    assert packed.padding_tokens == int((seq_len - used).sum())

    # every document's segments, in doc_offset order, rebuild it exactly
    starts = np.concatenate([[0], np.cumsum(lengths)])
    pieces: dict[str, list[tuple[int, np.ndarray]]] = {}
    for k, row in enumerate(seg.to_pylist()):
        i = int(row[schema.SEG_DOC_ID][3:])
        assert (row[schema.LANG], row[schema.SOURCE]) == (langs[i], sources[i])
        pieces.setdefault(row[schema.SEG_DOC_ID], []).append(
            (row[schema.SEG_DOC_OFFSET], packed.tokens[starts[k] : starts[k + 1]])
        )
    for i, doc in enumerate(docs):
        got = sorted(pieces.get(ids[i], []), key=lambda p: p[0])
        if len(doc) == 0:
            assert not got
            continue
        assert [off for off, _ in got] == list(range(0, len(doc), seq_len))[: len(got)]
        assert np.array_equal(np.concatenate([t for _, t in got]), doc)
        # split only when longer than seq_len
        assert (len(got) > 1) == (len(doc) > seq_len)
    assert packed.truncated_documents == sum(len(d) > seq_len for d in docs)


def test_pack_documents_full_chunks_are_sequences_of_their_own() -> None:
    seq_len = 10
    docs = [np.arange(25, dtype=np.uint32), np.arange(100, 104, dtype=np.uint32)]
    _, _, _, packed = pack(docs, seq_len)
    # two full chunks of doc0 alone, then BFD: doc0's tail (5) and doc1 (4) together
    assert packed.document_indices.tolist() == [0, 1, 2, 4]
    assert packed.sequence_lengths.tolist() == [10, 10, 5, 4]
    assert packed.segments.column(schema.SEG_DOC_OFFSET).to_pylist() == [0, 10, 20, 0]
    assert packed.tokens.tolist() == [*range(25), *range(100, 104)]
    assert (packed.padding_tokens, packed.truncated_documents) == (1, 1)


def test_pack_documents_input_forms_agree_and_are_deterministic() -> None:
    docs = make_docs(3, 200, 32)
    column = as_list_column(docs)
    *_, base = pack(docs, 32)
    *_, again = pack(docs, 32)
    *_, from_arrays = pack(docs, 32, tokens_arg=docs)
    *_, chunked = pack(
        docs, 32, tokens_arg=pa.chunked_array([column.slice(0, 50), column.slice(50)])
    )
    for other in (again, from_arrays, chunked):
        assert np.array_equal(other.tokens, base.tokens)
        assert np.array_equal(other.document_indices, base.document_indices)
        assert other.segments.equals(base.segments)


def test_pack_documents_sliced_column_and_uint16() -> None:
    docs = make_docs(4, 100, 32)
    column = as_list_column(docs)
    ids = [f"doc{i}" for i in range(10, 40)]
    packed = pack_documents(ids, column.slice(10, 30), ["c"] * 30, ["s"] * 30, 32, np.uint16)
    assert packed.tokens.dtype == np.uint16
    assert len(packed.tokens) == sum(len(d) for d in docs[10:40])
    assert set(packed.segments.column(schema.SEG_DOC_ID).to_pylist()) <= set(ids)
    big = [np.array([70_000], dtype=np.uint32)]
    with pytest.raises(ValueError, match="int32"):
        pack_documents(["x"], big, ["c"], ["s"], 8, np.uint16)


def test_pack_documents_empty() -> None:
    packed = pack_documents([], [], [], [], 16)
    assert packed.sequences == 0 and packed.document_indices.tolist() == [0]
    assert len(packed.tokens) == 0 and packed.segments.num_rows == 0

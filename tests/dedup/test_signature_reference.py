"""The batched shingler and signature path against a frozen copy of the first implementation.

``_reference_shingles`` below is the original whole-batch numpy shingler, kept
verbatim: MinHash signatures are data (an LSH index built today must match one
built next year), so any faster path must give the very same uint64 shingle
hashes, in the same order, and hence the same signatures. The inputs are real
code (Python's stdlib) plus the edge cases a corpus holds: empty and
whitespace-only documents, documents shorter than the n-gram, long
identifiers, non-ASCII text, and documents larger than one internal chunk.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from codecorpus.dedup import minhash
from codecorpus.dedup import shingles as sh

_U64 = np.uint64
_NGRAM_MULT = _U64(0x9E3779B97F4A7C15)
# byte masks for a token of length 1..8 read from a little-endian 8-byte window
_LEN_MASK = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 8)] + [(1 << 64) - 1], dtype=_U64)


def _ref_token_spans(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cls = sh._CLASS[data]
    word = cls == sh._WORD
    starts_mask = cls == sh._PUNCT
    ends_mask = starts_mask.copy()
    starts_mask[1:] |= word[1:] & ~word[:-1]
    ends_mask[:-1] |= word[:-1] & ~word[1:]
    if len(data):
        starts_mask[0] |= word[0]
        ends_mask[-1] |= word[-1]
        inner = offsets[1:-1]
        inner = inner[(inner > 0) & (inner < len(data))]
        starts_mask[inner] |= word[inner]
        ends_mask[inner - 1] |= word[inner - 1]
    return np.flatnonzero(starts_mask), np.flatnonzero(ends_mask) + 1


def _ref_token_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    padded = np.zeros((len(data) // 8 + 3) * 8, np.uint8)
    padded[: len(data)] = data
    windows = np.lib.stride_tricks.as_strided(padded.view("<u8"), shape=(len(data) + 8,), strides=(1,))
    lengths = ends - starts
    h = windows[starts] & _LEN_MASK[np.minimum(lengths, 8)]
    h = sh.fmix64(h ^ (lengths.astype(_U64) << _U64(56)))
    long_tokens = np.flatnonzero(lengths > 8)
    chunk = 1
    while len(long_tokens):
        pos = starts[long_tokens] + 8 * chunk
        rest = lengths[long_tokens] - 8 * chunk
        h[long_tokens] = sh.fmix64(h[long_tokens] ^ (windows[pos] & _LEN_MASK[np.minimum(rest, 8)]))
        long_tokens = long_tokens[rest > 8]
        chunk += 1
    return h


def _ref_ngram_hashes(tokens: np.ndarray, token_offsets: np.ndarray, ngram: int):
    n_tok = len(tokens)
    counts = np.diff(token_offsets)
    acc = tokens.copy()
    weight = _U64(1)
    for m in range(1, ngram):
        weight = weight * _NGRAM_MULT
        if m < n_tok:
            acc[: n_tok - m] += tokens[m:] * weight
    doc_of = np.repeat(np.arange(len(counts)), counts)
    idx = np.arange(n_tok)
    full = idx + ngram <= token_offsets[1:][doc_of]
    hashes = sh.fmix64(acc[full]) if n_tok else np.zeros(0, _U64)
    owners = doc_of[full]
    short_docs = np.flatnonzero((counts > 0) & (counts < ngram))
    if len(short_docs):
        extra = np.zeros(len(short_docs), _U64)
        weight = _U64(1)
        lo, hi = token_offsets[short_docs], token_offsets[short_docs + 1]
        for m in range(int((hi - lo).max())):
            inside = lo + m < hi
            extra[inside] += tokens[(lo + m)[inside]] * weight
            weight = weight * _NGRAM_MULT
        hashes = np.concatenate([hashes, sh.fmix64(extra)])
        owners = np.concatenate([owners, short_docs])
        order = np.argsort(owners, kind="stable")
        hashes, owners = hashes[order], owners[order]
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(np.bincount(owners, minlength=len(counts)), out=offsets[1:])
    return hashes, offsets


def _reference_shingles(texts: list[str], ngram: int) -> tuple[np.ndarray, np.ndarray]:
    data, offsets = sh._utf8_buffer(texts if isinstance(texts, pa.Array) else pa.array(texts, pa.large_string()))
    with np.errstate(over="ignore"):
        starts, ends = _ref_token_spans(data, offsets)
        tokens = _ref_token_hashes(data, starts, ends)
        token_offsets = np.searchsorted(starts, offsets).astype(np.int64)
        return _ref_ngram_hashes(tokens, token_offsets, ngram)


def _reference_rensa_rows(hashes: np.ndarray, offsets: np.ndarray, num_perm: int, seed: int) -> np.ndarray:
    import rensa

    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(
        np.ascontiguousarray(hashes, np.uint64), offsets.astype(np.uint64), num_perm, seed
    )
    rows = np.array(matrix.to_rows(), dtype=np.uint32).reshape(len(offsets) - 1, num_perm)
    rows[np.diff(offsets) == 0] = minhash.EMPTY
    return rows


STDLIB = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"

EDGE_CASES = [
    "", "   \n\t ", "x", "a b", "a = b + 1", "f(x)", "((((", "\u00ff\u00e9t\u00e9 = 1", "名前 = '値'",
    "a" * 9 + " " + "b" * 17 + " " + "c" * 64, "x\n" * 3, "  leading and trailing   ", "_" * 8,
    "end_without_newline", "\x00\x01 weird \x7f bytes",
]


def _corpus() -> list[str]:
    files = sorted(p for p in STDLIB.glob("*.py") if p.stat().st_size < 200_000)[:150]
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    big = "\n".join(texts[:100])  # one document larger than the shingler's chunk
    return [*EDGE_CASES, *texts[:60], big, *EDGE_CASES, *texts[60:]]


@pytest.mark.parametrize("ngram", [1, 3, 5, 9])
def test_shingles_equal_the_reference_on_real_code(ngram):
    texts = _corpus()
    want_hashes, want_offsets = _reference_shingles(texts, ngram)
    got = sh.shingle_texts(pa.array(texts, pa.large_string()), ngram)
    assert np.array_equal(got.offsets, want_offsets)
    assert got.hashes.dtype == np.uint64 and np.array_equal(got.hashes, want_hashes)


@pytest.mark.parametrize("chunk_bytes", [1, 5_000, 1 << 40])
def test_shingles_do_not_depend_on_the_internal_chunk_size(monkeypatch, chunk_bytes):
    texts = _corpus()
    want_hashes, want_offsets = _reference_shingles(texts, 5)
    monkeypatch.setattr(sh, "CHUNK_BYTES", chunk_bytes)
    got = sh.shingle_texts(texts, 5)
    assert np.array_equal(got.offsets, want_offsets) and np.array_equal(got.hashes, want_hashes)


def test_shingles_equal_the_reference_on_sliced_and_chunked_columns():
    texts = _corpus()
    sliced = pa.array(texts, pa.string()).slice(7, 120)
    chunked = pa.chunked_array([pa.array(texts[:50], pa.string()), pa.array(texts[50:], pa.string())])
    empty = pa.array([], pa.string())
    for column, subset in [(sliced, texts[7:127]), (chunked, texts), (empty, []), (sliced.slice(3, 0), [])]:
        want_hashes, want_offsets = _reference_shingles(subset, 5)
        got = sh.shingle_texts(column, 5)
        assert np.array_equal(got.offsets, want_offsets) and np.array_equal(got.hashes, want_hashes)


@pytest.mark.parametrize("num_perm,seed", [(128, 1), (256, 42), (7, 3)])
def test_signatures_equal_the_reference_path(num_perm, seed):
    texts = _corpus()
    want = _reference_rensa_rows(*_reference_shingles(texts, 5), num_perm, seed)
    got = minhash.signatures(sh.shingle_texts(texts, 5), num_perm, seed)
    assert got.dtype == np.uint32 and got.shape == (len(texts), num_perm)
    assert np.array_equal(got, want)


def test_signatures_of_a_fixed_text_are_pinned():
    """Signature bytes of a fixed input, recorded once: a change of shingling or kernel fails here."""
    texts = [*EDGE_CASES, "def f(a, b):\n    return a + b * 2  # sum\n" * 20, "class K:\n    pass\n"]
    sig = minhash.signatures(sh.shingle_texts(texts, 5), 64, 7)
    assert hashlib.sha256(sig.tobytes()).hexdigest() == PINNED_SHA256


PINNED_SHA256 = "e3fed6a60b1e85f8ff139c4f5c38aaa144c36e8a78b9f3ce8132c23d0e7e7a9f"  # rensa 0.5.0, ngram 5, 64 perms, seed 7

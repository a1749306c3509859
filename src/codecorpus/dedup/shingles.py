"""Code-aware shingles for a whole batch of documents at once, in numpy.

Tokens are what a code-dedup tokenizer (``\\w+|[^\\w\\s]``) finds: runs of
identifier characters (ASCII letters, digits, ``_`` and every non-ASCII byte,
so UTF-8 identifiers stay whole) and single punctuation characters;
whitespace separates tokens and is otherwise ignored, so re-indentation and
reformatting do not change a document's shingles. A shingle is ``ngram``
consecutive tokens; a document with fewer tokens than ``ngram`` gives one
shingle of all its tokens, and an empty (whitespace-only) one gives none.

Why numpy over the concatenated UTF-8 buffer of an Arrow string column rather
than a Python regex per document: per-document Python work (``re.findall``
plus hashing each token) would be the bottleneck of MinHash dedup. Here the only O(bytes) work is a few uint8 passes (class lookup, run
boundaries); every token is hashed from an unaligned 8-byte window read at its
start (O(tokens)), tokens longer than 8 bytes fold in further windows, and
n-grams are a positional sum of token hashes (O(tokens x ngram)). The passes
run over runs of whole documents of ``CHUNK_BYTES`` at a time, so their
temporaries stay in cache whatever the batch size.

Hashes are 64-bit (MurmurHash3's fmix64 finalizer over the packed bytes);
they depend only on the token bytes and the n-gram order, so the same text
gives the same shingles in any shard, batch or process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

_U64 = np.uint64
_WORD, _PUNCT = 1, 2
_CLASS = np.full(256, _PUNCT, np.uint8)
_CLASS[[ord(c) for c in " \t\n\r\x0b\x0c"]] = 0
_CLASS[128:] = _WORD
_CLASS[[ord(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"]] = _WORD
_CLASS_TABLE = _CLASS.tobytes()  # the same lookup for bytes.translate
_PAD = 16
"""Bytes a chunk's padded copy adds (``_padded_text``): a leading sentinel and 15 after the text."""
_NGRAM_MULT = _U64(0x9E3779B97F4A7C15)  # odd: position weights of an n-gram's tokens
_FMIX_C1, _FMIX_C2 = _U64(0xFF51AFD7ED558CCD), _U64(0xC4CEB9FE1A85EC53)
CHUNK_BYTES = 1 << 19
"""Text bytes shingled per pass (see ``shingle_texts``): small enough for a pass's temporaries to stay in cache."""


@dataclass(frozen=True)
class Shingles:
    """Flat shingle hashes of a batch: document ``d`` owns ``hashes[offsets[d]:offsets[d+1]]``."""

    hashes: np.ndarray  # uint64
    offsets: np.ndarray  # int64, len(documents) + 1

    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)


def fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer (an avalanching bijection), elementwise, wrapping."""
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> _U64(33))


def _utf8_buffer(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes and int64 offsets (starting at 0) of a string column, zero-copy where possible."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if texts.type != pa.large_string():
        texts = texts.cast(pa.large_string())
    n = len(texts)
    _, off_buf, data_buf = texts.buffers()
    offsets = np.frombuffer(off_buf, np.int64)[texts.offset : texts.offset + n + 1] if n else np.zeros(1, np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    data = data[offsets[0] : offsets[-1]]
    return data, offsets - offsets[0]


def _padded_text(data: np.ndarray) -> bytearray:
    """The text's bytes at ``[1, n + 1)``, a space on each side (class sentinels) and room after
    for an 8-byte read at any position: one copy of the text serves both passes. What an 8-byte
    read takes past a token's end is masked off (``_keep_low_bytes``), whatever it holds."""
    n = len(data)
    buf = bytearray(n + _PAD)
    buf[0] = buf[n + 1] = 0x20
    buf[1 : n + 1] = memoryview(data)
    return buf


def _token_spans(padded: bytearray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end byte positions of every token; tokens never cross a document boundary.

    One pass finds every boundary (a change of byte class, any punctuation
    byte, a document start); a token starts at a boundary before a non-space
    byte and ends at a boundary after one, so starts and ends are two masks
    of the same boundary array.
    """
    n = len(padded) - _PAD
    # bytearray.translate is a plain C table lookup, cheaper than numpy's fancy indexing
    cls = np.frombuffer(padded.translate(_CLASS_TABLE), np.uint8)[: n + 2]
    boundary = cls[1:] != cls[:-1]
    boundary |= cls[1:] == _PUNCT
    boundary[offsets[1:-1]] = True  # a document start is a boundary (harmless between spaces)
    nonspace = cls != 0
    starts = np.flatnonzero(boundary & nonspace[1:])
    boundary &= nonspace[:-1]
    return starts, np.flatnonzero(boundary)


def _fmix64_inplace(h: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """``fmix64`` computed in ``h`` itself (``scratch`` is a same-sized buffer), no temporaries."""
    for mult in (_FMIX_C1, _FMIX_C2, None):
        np.right_shift(h, _U64(33), out=scratch)
        h ^= scratch
        if mult is not None:
            h *= mult
    return h


def _keep_low_bytes(h: np.ndarray, n_bytes: np.ndarray, scratch: np.ndarray) -> None:
    """Clear all but the low ``min(n_bytes, 8)`` bytes of each ``h`` (two shifts, no table lookup);
    ``n_bytes`` (>= 1) may be ``scratch`` itself."""
    np.minimum(n_bytes, _U64(8), out=scratch)
    np.subtract(_U64(8), scratch, out=scratch)
    scratch <<= _U64(3)
    h <<= scratch
    h >>= scratch


def _token_hashes(padded: bytearray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """64-bit hash of each token's bytes, read as 8-byte windows (O(tokens), not O(bytes)).

    A token's first window, masked to the token, with its length xored into
    the top byte, is mixed by fmix64; each further window of a token longer
    than 8 bytes is xored in (masked to what is left) and mixed again. The
    long tokens are sorted by their number of windows, so each round works
    in place on a prefix of them.
    """
    # an overlapping view: windows[i] is the little-endian uint64 of text bytes i..i+7
    windows = np.ndarray((len(padded) - _PAD + 8,), "<u8", buffer=padded, offset=1, strides=(1,))
    lengths = np.subtract(ends, starts).view(_U64)  # >= 1
    h = windows[starts]
    scratch = np.empty_like(h)
    _keep_low_bytes(h, lengths, scratch)
    np.left_shift(lengths, _U64(56), out=scratch)
    h ^= scratch
    _fmix64_inplace(h, scratch)
    long_tokens = np.flatnonzero(lengths > 8)
    if not len(long_tokens):
        return h
    rounds = (lengths.take(long_tokens) - _U64(1)) >> _U64(3)  # further windows per long token
    long_tokens = long_tokens.take(np.argsort(rounds.view(np.int64))[::-1])  # most rounds first
    acc, first, size = h.take(long_tokens), starts.take(long_tokens), lengths.take(long_tokens)
    # at_least[k]: how many long tokens have k rounds or more (a prefix of the sorted ones)
    at_least = np.cumsum(np.bincount(rounds.view(np.int64))[::-1])[::-1]
    window, scratch = np.empty_like(acc), np.empty_like(acc)
    for k in range(1, len(at_least)):
        c = int(at_least[k])
        np.add(first[:c], 8 * k, out=scratch[:c].view(np.int64))  # where the k-th further window starts
        window[:c] = windows[scratch[:c].view(np.int64)]
        np.subtract(size[:c], _U64(8 * k), out=scratch[:c])  # bytes left from there
        _keep_low_bytes(window[:c], scratch[:c], scratch[:c])
        acc[:c] ^= window[:c]
        _fmix64_inplace(acc[:c], scratch[:c])
    h[long_tokens] = acc
    return h


def ngram_hashes(tokens: np.ndarray, token_offsets: np.ndarray, ngram: int) -> Shingles:
    """Shingles of ``ngram`` consecutive tokens per document (positional sum, then fmix64).

    The sum is taken at every token position over contiguous slices; a
    position is kept when its n-gram ends inside its document, and a
    document shorter than ``ngram`` keeps its first position, whose sum is
    redone over that document's tokens alone.
    """
    n_tok = len(tokens)
    counts = np.diff(token_offsets)
    acc = tokens.copy()
    scratch = np.empty_like(tokens)
    weight = _U64(1)
    for m in range(1, min(ngram, n_tok)):
        weight = weight * _NGRAM_MULT
        np.multiply(tokens[m:], weight, out=scratch[: n_tok - m])
        acc[: n_tok - m] += scratch[: n_tok - m]
    keep = np.ones(n_tok, bool)
    starts, ends = token_offsets[:-1], token_offsets[1:]
    for back in range(1, ngram):  # the last ngram - 1 positions of a document start no full n-gram
        tail = ends - back
        keep[tail[tail >= starts]] = False
    short_docs = np.flatnonzero((counts > 0) & (counts < ngram))
    if len(short_docs):
        acc[starts[short_docs]] = _whole_document_sums(tokens, token_offsets, short_docs)
        keep[starts[short_docs]] = True
    hashes = acc[keep]
    _fmix64_inplace(hashes, scratch[: len(hashes)])
    offsets = np.zeros(len(counts) + 1, np.int64)
    shingles_per_doc = np.where(counts >= ngram, counts - (ngram - 1), counts > 0)  # short: 1, empty: 0
    np.cumsum(shingles_per_doc, out=offsets[1:])
    return Shingles(hashes, offsets)


def _whole_document_sums(tokens: np.ndarray, token_offsets: np.ndarray, short_docs: np.ndarray) -> np.ndarray:
    """Positional sum of all tokens of each document shorter than the n-gram size."""
    extra = np.zeros(len(short_docs), _U64)
    weight = _U64(1)
    lo, hi = token_offsets[short_docs], token_offsets[short_docs + 1]
    for m in range(int((hi - lo).max())):
        inside = lo + m < hi
        extra[inside] += tokens[(lo + m)[inside]] * weight
        weight = weight * _NGRAM_MULT
    return extra


def _document_chunks(offsets: np.ndarray, chunk_bytes: int) -> list[tuple[int, int]]:
    """``[d0, d1)`` document ranges of about ``chunk_bytes`` of text each (one document at least)."""
    n_docs = len(offsets) - 1
    bounds, d0 = [], 0
    while d0 < n_docs:
        d1 = int(np.searchsorted(offsets, offsets[d0] + chunk_bytes, side="right")) - 1
        d1 = min(n_docs, max(d0 + 1, d1))
        bounds.append((d0, d1))
        d0 = d1
    return bounds


def _shingle_buffer(data: np.ndarray, offsets: np.ndarray, ngram: int) -> Shingles:
    padded = _padded_text(data)
    starts, ends = _token_spans(padded, offsets)
    tokens = _token_hashes(padded, starts, ends)
    token_offsets = np.searchsorted(starts, offsets).astype(np.int64)
    return ngram_hashes(tokens, token_offsets, ngram)


def shingle_texts(texts: pa.Array | pa.ChunkedArray | list[str], ngram: int = 5) -> Shingles:
    """Shingle hashes of every document of a string column (see the module docstring).

    The column is cut into runs of whole documents of about ``CHUNK_BYTES``
    each (a longer document is a run of its own): every temporary then stays
    in cache and below malloc's mmap threshold, so a large shard does not pay
    a fresh page fault per 4 KiB of each of its dozen whole-shard temporaries
    (that was half the time of a first call). Shingles do not depend on the cut.

    >>> s = shingle_texts(["a = b + 1", "a  =  b +\\n 1", "", "x"], ngram=5)
    >>> s.counts().tolist()
    [1, 1, 0, 1]
    >>> bool(s.hashes[0] == s.hashes[1])
    True
    """
    if isinstance(texts, list):
        texts = pa.array(texts, pa.large_string())
    data, offsets = _utf8_buffer(texts)
    parts = []
    with np.errstate(over="ignore"):
        for d0, d1 in _document_chunks(offsets, CHUNK_BYTES):
            lo = offsets[d0]
            parts.append(_shingle_buffer(data[lo : offsets[d1]], offsets[d0 : d1 + 1] - lo, ngram))
    if len(parts) == 1:
        return parts[0]
    return _concatenated(parts)


def _concatenated(parts: list[Shingles]) -> Shingles:
    """One batch's shingles from its chunks' (the documents of ``parts`` in order)."""
    if not parts:
        return Shingles(np.zeros(0, _U64), np.zeros(1, np.int64))
    counts = np.concatenate([p.counts() for p in parts])
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Shingles(np.concatenate([p.hashes for p in parts]), offsets)

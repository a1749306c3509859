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
plus hashing each token) runs at ~5-7 MB/s and is the bottleneck of MinHash
dedup. Here the only O(bytes) work is a few uint8 passes (class lookup, run
boundaries); every token is hashed from an unaligned 8-byte window read at its
start (O(tokens)), tokens longer than 8 bytes fold in further windows, and
n-grams are a positional sum of token hashes (O(tokens x ngram)).

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
# byte masks for a token of length 1..8 read from a little-endian 8-byte window
_LEN_MASK = np.array([0] + [(1 << (8 * k)) - 1 for k in range(1, 8)] + [(1 << 64) - 1], dtype=_U64)
_NGRAM_MULT = _U64(0x9E3779B97F4A7C15)  # odd: position weights of an n-gram's tokens


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


def token_spans(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end byte positions of every token; tokens never cross a document boundary."""
    cls = _CLASS[data]
    word = cls == _WORD
    starts_mask = cls == _PUNCT
    ends_mask = starts_mask.copy()
    starts_mask[1:] |= word[1:] & ~word[:-1]
    ends_mask[:-1] |= word[:-1] & ~word[1:]
    if len(data):
        starts_mask[0] |= word[0]
        ends_mask[-1] |= word[-1]
        inner = offsets[1:-1]
        inner = inner[(inner > 0) & (inner < len(data))]
        starts_mask[inner] |= word[inner]  # a word at a document start starts a token
        ends_mask[inner - 1] |= word[inner - 1]  # and one at a document end ends one
    return np.flatnonzero(starts_mask), np.flatnonzero(ends_mask) + 1


def token_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """64-bit hash of each token's bytes, read as 8-byte windows (O(tokens), not O(bytes))."""
    padded = np.zeros((len(data) // 8 + 3) * 8, np.uint8)
    padded[: len(data)] = data
    # an overlapping view: windows[i] is the little-endian uint64 of bytes i..i+7
    windows = np.lib.stride_tricks.as_strided(padded.view("<u8"), shape=(len(data) + 8,), strides=(1,))
    lengths = ends - starts
    h = windows[starts] & _LEN_MASK[np.minimum(lengths, 8)]
    h = fmix64(h ^ (lengths.astype(_U64) << _U64(56)))
    long_tokens = np.flatnonzero(lengths > 8)
    chunk = 1
    while len(long_tokens):
        pos = starts[long_tokens] + 8 * chunk
        rest = lengths[long_tokens] - 8 * chunk
        h[long_tokens] = fmix64(h[long_tokens] ^ (windows[pos] & _LEN_MASK[np.minimum(rest, 8)]))
        long_tokens = long_tokens[rest > 8]
        chunk += 1
    return h


def ngram_hashes(tokens: np.ndarray, token_offsets: np.ndarray, ngram: int) -> Shingles:
    """Shingles of ``ngram`` consecutive tokens per document (positional sum, then fmix64)."""
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
    hashes = fmix64(acc[full]) if n_tok else np.zeros(0, _U64)
    owners = doc_of[full]
    short_docs = np.flatnonzero((counts > 0) & (counts < ngram))
    if len(short_docs):
        hashes, owners = _with_short_documents(tokens, token_offsets, short_docs, hashes, owners)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(np.bincount(owners, minlength=len(counts)), out=offsets[1:])
    return Shingles(hashes, offsets)


def _with_short_documents(
    tokens: np.ndarray, token_offsets: np.ndarray, short_docs: np.ndarray, hashes: np.ndarray, owners: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Add one whole-document shingle for each document shorter than the n-gram size."""
    extra = np.zeros(len(short_docs), _U64)
    weight = _U64(1)
    lo, hi = token_offsets[short_docs], token_offsets[short_docs + 1]
    for m in range(int((hi - lo).max())):
        inside = lo + m < hi
        extra[inside] += tokens[(lo + m)[inside]] * weight
        weight = weight * _NGRAM_MULT
    all_hashes = np.concatenate([hashes, fmix64(extra)])
    all_owners = np.concatenate([owners, short_docs])
    order = np.argsort(all_owners, kind="stable")
    return all_hashes[order], all_owners[order]


def shingle_texts(texts: pa.Array | pa.ChunkedArray | list[str], ngram: int = 5) -> Shingles:
    """Shingle hashes of every document of a string column (see the module docstring).

    >>> s = shingle_texts(["a = b + 1", "a  =  b +\\n 1", "", "x"], ngram=5)
    >>> s.counts().tolist()
    [1, 1, 0, 1]
    >>> bool(s.hashes[0] == s.hashes[1])
    True
    """
    if isinstance(texts, list):
        texts = pa.array(texts, pa.large_string())
    data, offsets = _utf8_buffer(texts)
    with np.errstate(over="ignore"):
        starts, ends = token_spans(data, offsets)
        tokens = token_hashes(data, starts, ends)
        token_offsets = np.searchsorted(starts, offsets).astype(np.int64)
        return ngram_hashes(tokens, token_offsets, ngram)

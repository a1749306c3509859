"""StarCoder's basic code scores (bigcode-dataset): line lengths and character shares.

The thresholds and the order of the rules live in :mod:`codecorpus.filters.rules`;
this module computes the scores, exactly and fast. ``alpha_frac`` (letters only)
is computed in the same pass as ``alnum_frac``.

Machine-generated and data-like files (minified JavaScript, embedded blobs, long
tables) betray themselves by very long lines or by text that is mostly symbols.
The rules, checked in this order (the first that fails is the drop reason):

- ``max_line_len``: the longest line is longer than ``cfg.max_line_len`` (1000);
- ``mean_line_len``: the mean line length is above ``cfg.max_mean_line_len`` (100);
- ``alnum_frac``: the share of alphanumeric characters is below ``cfg.min_alnum_frac`` (0.25).

Lines are ``text.split("\\n")`` (a trailing newline makes a last, empty line), and
lengths count characters (code points), so the mean is the sum of line lengths
over the number of lines. "Alphanumeric" is Python's ``str.isalnum`` (Unicode
letters and digits); an empty text has ``alnum_frac`` 0. Languages in
``cfg.exempt_langs`` skip the two line-length rules but are still scored.

Speed: scores are exact, and computed in one pass per document for the line
statistics (``str.split`` runs in C) plus one vectorised pass over the shard's
UTF-8 buffer for ASCII alphanumerics; only non-ASCII characters go through a
regex. Both alternatives cost more: pure Python (``str.isalnum`` via ``bytes.translate``)
and pyarrow.compute kernels (``utf8_length``, ``count_substring``, ``split_pattern``,
``replace_substring_regex``), whose regex pass dominates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from codecorpus.filters.columns import ALNUM_FRAC, MAX_LINE_LEN, MEAN_LINE_LEN
from codecorpus.stage import text_slices

SLICE_BYTES = 1 << 18
"""Texts are scored about this many bytes at a time (memory: ~12 bytes per text byte), so the
slice, not the shard, bounds the scoring's memory, and its arrays stay in cache."""
RULES = (MAX_LINE_LEN, MEAN_LINE_LEN, ALNUM_FRAC)
"""StarCoder's three rules, whose names are also their score columns and drop reasons."""


@dataclass(frozen=True)
class Scores:
    max_line_len: np.ndarray  # int64, characters
    mean_line_len: np.ndarray  # float64, characters per line
    alnum_frac: np.ndarray  # float64 in [0, 1]
    alpha_frac: np.ndarray  # float64 in [0, 1]: letters only (StarCoder's "alpha" filter)


_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f]+")
_NON_ALNUM = re.compile(r"[\W_]+")  # \W is "not (isalnum() or '_')" for str patterns
_NON_ALPHA = re.compile(r"[\W\d_]+")  # what is left is str.isalpha() (\d is Unicode Nd)


def _ascii_masks(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(letters, alphanumerics) at ASCII bytes; bytes of multi-byte UTF-8 characters are >= 0x80."""
    letter = ((buf | np.uint8(0x20)) - np.uint8(ord("a"))) < 26
    digit = (buf - np.uint8(ord("0"))) < 10
    return letter, letter | digit


def _non_ascii_counts(text: str) -> tuple[int, int]:
    """(letters, alphanumerics) among the non-ASCII characters of ``text`` (e.g. accented names).

    Letters are ``[^\\W\\d_]`` in Python's ``re``: ``str.isalpha`` plus the rare numeric
    characters that are not decimal digits (``½``, ``Ⅻ``, ``²``), which is close enough
    for a share-of-letters score and costs one regex substitution.
    """
    rest = "".join(_NON_ASCII_RUN.findall(text))
    return len(_NON_ALPHA.sub("", rest)), len(_NON_ALNUM.sub("", rest))


def _segment_counts(mask: np.ndarray, bounds: list[int]) -> list[int]:
    """True values of ``mask`` in each ``[bounds[i], bounds[i + 1])``: one vectorised pass."""
    starts = np.asarray(bounds[:-1], np.int64)
    if not len(mask):
        return [0] * len(starts)
    counts = np.add.reduceat(mask.astype(np.int32), np.minimum(starts, len(mask) - 1))
    counts[np.diff(np.asarray(bounds, np.int64)) == 0] = 0  # reduceat gives mask[i] for empty segments
    return counts.tolist()


def _chunk_scores(arr: pa.Array) -> tuple[np.ndarray, ...]:
    n = len(arr)
    max_len = np.zeros(n, np.int64)
    mean_len = np.zeros(n, np.float64)
    alnum_frac = np.zeros(n, np.float64)
    alpha_frac = np.zeros(n, np.float64)
    if n == 0:
        return max_len, mean_len, alnum_frac, alpha_frac
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, np.int64)[arr.offset : arr.offset + n + 1]
    if data_buf is None or offsets[-1] == offsets[0]:
        letters = mask = np.zeros(0, bool)
    else:
        letters, mask = _ascii_masks(np.frombuffer(data_buf, np.uint8)[offsets[0] : offsets[-1]])
    bounds = (offsets - offsets[0]).tolist()
    alnum_counts = _segment_counts(mask, bounds)
    alpha_counts = _segment_counts(letters, bounds)

    for i, text in enumerate(arr.to_pylist()):
        if not text:
            continue  # empty (or null): every score stays 0
        lines = text.split("\n")
        max_len[i] = max(map(len, lines))
        mean_len[i] = (len(text) - (len(lines) - 1)) / len(lines)
        alnum, alpha = alnum_counts[i], alpha_counts[i]
        if not text.isascii():
            more_alpha, more_alnum = _non_ascii_counts(text)
            alpha, alnum = alpha + more_alpha, alnum + more_alnum
        alnum_frac[i] = alnum / len(text)
        alpha_frac[i] = alpha / len(text)
    return max_len, mean_len, alnum_frac, alpha_frac


def line_scores(texts: pa.Array | pa.ChunkedArray) -> Scores:
    """Exact scores of each text (see the module docstring for the definitions).

    >>> s = line_scores(pa.array(["ab\\ncdef", "", "== ==\\n"]))
    >>> s.max_line_len.tolist(), s.mean_line_len.tolist(), s.alnum_frac.tolist()
    ([4, 0, 5], [3.0, 0.0, 2.5], [0.8571428571428571, 0.0, 0.0])
    """
    parts = [_chunk_scores(part) for part in text_slices(texts, SLICE_BYTES)]
    if not parts:
        empty = np.zeros(0)
        return Scores(empty.astype(np.int64), empty, empty, empty)
    max_len, mean_len, alnum_frac, alpha_frac = (np.concatenate(cols) for cols in zip(*parts, strict=True))
    return Scores(max_len, mean_len, alnum_frac, alpha_frac)

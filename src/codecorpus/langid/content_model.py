"""codecorpus's content model: which language a file's bytes are, with no name to go by.

A multinomial naive Bayes over token features, the kind of model Linguist's own
classifier is (``samples.json``), trained on real files of pinned packages
(``bench/langid_train.py``; the bench tests it on other packages). Features:

- tokens: identifiers with a leading sigil kept (``$x``, ``@interface``, ``@Override``),
  runs of up to three punctuation characters (``::``, ``->``, ``<?``, ``#{``), numbers as one token;
- the first token of every line marked as such (``^#``, ``^//``, ``^--``, ``^end``, ``^fn``):
  comment markers and keywords that open lines are what tell Lua from SQL, R from Python;
- pairs of adjacent tokens.

Each feature is its token's CRC-32 (stable across runs and machines, no vocabulary
shipped); a file counts each feature once. Training keeps the ``features`` most
informative ones (information gain over the languages) seen in at least two packages,
and stores per language their centered log-probabilities as int8 with one scale:
``content_model.bin.gz`` (gzip, mtime 0: the same training files give the same bytes).

``predict`` returns the best language and a margin: the score difference between the
best and the second language per matched feature (0 below ``MIN_FEATURES`` matched).
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MODEL_FILE = Path(__file__).with_name("content_model.bin.gz")
HEAD_BYTES = 16 * 1024
"""Bytes of a file the model reads (the detector's head)."""
_TOKEN = re.compile(rb"[A-Za-z_$@][A-Za-z0-9_$]*|[0-9][0-9A-Za-z_.]*|[^\sA-Za-z0-9_$@]{1,3}")
_LINE_START = re.compile(rb"(?m)^[ \t]*([A-Za-z_$@][A-Za-z0-9_$]*|[^\sA-Za-z0-9_$@]{1,3})")
_FORMAT = "codecorpus-content-model/1"
MIN_FEATURES = 32
"""A guess from fewer matched features is no evidence: the margin is 0 (a wheel's 4-line ``WHEEL``
file matches 16, and looks like Go)."""


def tokens(data: bytes) -> list[bytes]:
    """The token stream of a file's head (numbers as ``0``).

    >>> tokens(b"local x = t[1] -- one")
    [b'local', b'x', b'=', b't', b'[', b'0', b']', b'--', b'one']
    """
    return [b"0" if t[:1].isdigit() else t for t in _TOKEN.findall(data[:HEAD_BYTES])]


def features(data: bytes) -> np.ndarray:
    """Sorted unique feature ids (uint32) of a file: tokens, line-start tokens, token pairs."""
    toks = tokens(data)
    crc = zlib.crc32
    ids = {crc(t) for t in toks}
    ids.update(crc(b"^" + t) for t in _LINE_START.findall(data[:HEAD_BYTES]))
    ids.update(crc(a + b" " + b) for a, b in itertools.pairwise(toks))
    return np.fromiter(ids, dtype=np.uint32, count=len(ids)) if ids else np.zeros(0, np.uint32)


@dataclass(frozen=True)
class ContentModel:
    """Languages, the kept feature ids (sorted), their int8 weights per language and the weights' scale."""

    languages: tuple[str, ...]
    ids: np.ndarray
    weights: np.ndarray
    scale: float

    def scores(self, data: bytes) -> tuple[np.ndarray, int]:
        """Per-language log-likelihood (up to a constant) of a file, and how many features matched."""
        feats = features(data)
        pos = np.minimum(np.searchsorted(self.ids, feats), max(len(self.ids) - 1, 0))
        hit = pos[self.ids[pos] == feats] if len(self.ids) else pos[:0]
        return self.weights[hit].sum(axis=0, dtype=np.int64) * self.scale, len(hit)

    def predict(self, data: bytes) -> tuple[str, float]:
        """(best language, margin per matched feature); margin 0 below ``MIN_FEATURES`` matched.

        >>> model = load()
        >>> model.predict(b"defmodule Greeter do\\n  def hello(name), do: IO.puts(\\"hi #{name}\\")\\nend\\n")[0]
        'Elixir'
        """
        scores, n = self.scores(data)
        if n < MIN_FEATURES:
            return self.languages[int(np.argmax(scores))], 0.0
        order = np.argsort(-scores, kind="stable")
        return self.languages[order[0]], float(scores[order[0]] - scores[order[1]]) / n

    def predict_among(self, data: bytes, candidates: tuple[str, ...]) -> tuple[str, float] | None:
        """(best language, margin) among the ``candidates`` the model knows; None unless it knows two
        (and ``MIN_FEATURES`` matched)."""
        known = [self.languages.index(c) for c in candidates if c in self.languages]
        if len(known) < 2:
            return None
        scores, n = self.scores(data)
        if n < MIN_FEATURES:
            return None
        sub = scores[known]
        order = np.argsort(-sub, kind="stable")
        return self.languages[known[order[0]]], float(sub[order[0]] - sub[order[1]]) / n

    def to_bytes(self) -> bytes:
        header = json.dumps({"format": _FORMAT, "languages": list(self.languages), "features": len(self.ids),
                             "scale": self.scale}, sort_keys=True).encode()
        body = self.ids.astype("<u4").tobytes() + self.weights.astype(np.int8).tobytes()
        return gzip.compress(len(header).to_bytes(4, "little") + header + body, compresslevel=9, mtime=0)

    @classmethod
    def from_bytes(cls, blob: bytes) -> ContentModel:
        raw = gzip.decompress(blob)
        size = int.from_bytes(raw[:4], "little")
        header = json.loads(raw[4:4 + size])
        if header.get("format") != _FORMAT:
            raise ValueError(f"not a content model: {header.get('format')!r}")
        k, n_lang = header["features"], len(header["languages"])
        body = raw[4 + size:]
        ids = np.frombuffer(body[:4 * k], dtype="<u4").astype(np.uint32)
        weights = np.frombuffer(body[4 * k:], dtype=np.int8).reshape(k, n_lang)
        return cls(tuple(header["languages"]), ids, weights, float(header["scale"]))


@functools.lru_cache(maxsize=1)
def load(path: str | None = None) -> ContentModel:
    """The shipped model (or one at ``path``), read once per process."""
    return ContentModel.from_bytes(Path(path or MODEL_FILE).read_bytes())


def train(docs: Iterable[tuple[bytes, str, str]], *, n_features: int = 40_000, alpha: float = 0.1,
          min_groups: int = 2) -> ContentModel:
    """A model from (file bytes, language, group) triples; ``group`` is the file's package.

    A feature is a candidate when files of at least ``min_groups`` packages hold it (what one
    package alone repeats, its names and licence header, says nothing of the language);
    the ``n_features`` candidates with the most information gain about the language are kept.
    Per language, P(feature | language) is its share of the language's feature occurrences with
    additive smoothing ``alpha``; the weights are those log-probabilities minus their mean over
    the languages, so unmatched features cost nothing.
    """
    rows: list[np.ndarray] = []
    row_lang: list[str] = []
    row_group: list[str] = []
    for data, lang, group in docs:
        rows.append(features(data))
        row_lang.append(lang)
        row_group.append(group)
    langs = sorted(set(row_lang))  # languages in name order: the output does not depend on file order
    lang_ix = {lang: i for i, lang in enumerate(langs)}
    group_ix = {g: i for i, g in enumerate(sorted(set(row_group)))}
    labels = np.array([lang_ix[lang] for lang in row_lang], np.int64)
    groups = np.array([group_ix[g] for g in row_group], np.int64)
    return _fit(rows, labels, groups, tuple(langs), n_features, alpha, min_groups)


def _fit(rows: list[np.ndarray], labels: np.ndarray, row_group: np.ndarray, langs: tuple[str, ...],
         n_features: int, alpha: float, min_groups: int) -> ContentModel:
    all_ids = np.concatenate(rows) if rows else np.zeros(0, np.uint32)
    doc_of = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    vocab, inverse = np.unique(all_ids, return_inverse=True)
    n_lang = len(langs)
    df = np.zeros((len(vocab), n_lang), np.float64)
    np.add.at(df, (inverse, labels[doc_of]), 1)
    n_all_groups = int(row_group.max()) + 1 if len(row_group) else 1
    pairs = np.unique(inverse.astype(np.int64) * n_all_groups + row_group[doc_of])
    n_groups = np.bincount(pairs // n_all_groups, minlength=len(vocab))
    candidate = np.flatnonzero(n_groups >= min_groups)
    docs_per_lang = np.bincount(labels, minlength=n_lang).astype(np.float64)
    gain = _information_gain(df[candidate], docs_per_lang)
    keep = candidate[np.sort(np.argsort(-gain, kind="stable")[:n_features])]
    counts = df[keep] + alpha
    logp = np.log(counts / counts.sum(axis=0, keepdims=True))
    centered = logp - logp.mean(axis=1, keepdims=True)
    scale = float(np.abs(centered).max() / 127) or 1.0
    weights = np.clip(np.round(centered / scale), -127, 127).astype(np.int8)
    return ContentModel(langs, vocab[keep].astype(np.uint32), weights, scale)


def _information_gain(df: np.ndarray, docs_per_lang: np.ndarray) -> np.ndarray:
    """Information gain about the language of each feature's presence, per feature (rows of ``df``)."""
    n = docs_per_lang.sum()
    prior = docs_per_lang / n

    def entropy(p: np.ndarray) -> np.ndarray:
        p = np.clip(p, 1e-12, 1)
        return -(p * np.log(p)).sum(axis=-1)

    present = df.sum(axis=1)
    absent = n - present
    p_present = present / n
    h_present = entropy(df / np.maximum(present, 1)[:, None])
    h_absent = entropy((docs_per_lang - df) / np.maximum(absent, 1)[:, None])
    return entropy(prior) - p_present * h_present - (1 - p_present) * h_absent

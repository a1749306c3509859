"""Long-context sets: whole repositories as documents, split at file boundaries, best-fit packed.

A repository document is its files in dependency order (``packing.deps``),
each preceded by its path marker, the whole preceded by the repository marker
and closed by EOS. Two marker formats:

- ``special`` (Qwen2.5-Coder's repository format)::

      <|repo_name|>owner/repo
      <|file_sep|>src/a.py
      ...code...<|file_sep|>src/b.py
      ...

- ``text``: plain comments in each file's own syntax (``# repo: owner/repo``,
  ``// path: src/b.js``), for vocabularies without such tokens.

A repository longer than ``seq_len`` is cut into pieces at file boundaries
where possible: a piece is closed before a file that would not fit, and every
continuation piece starts with the repository marker again. Only a single
file longer than a whole sequence is cut inside, and its continuation repeats
its path marker too, so every piece says which repository and file it is in.
Pieces are then packed with Best-Fit-Decreasing (``packing.bfd``): a piece
that fills its sequence stays alone; the gaps are filled with whole small
repositories.

Per-source length upsampling (Fu et al. 2024, "Data Engineering for Scaling
Language Models to 128K Context") repeats long repository documents of the
named sources; a cap on the token share of short documents keeps a seeded
sample of them. Both draw from ``blake2b(seed, repository)``.

Everything here works on one bucket of repositories at a time (the runtime
scatters files by repository hash), so memory is bounded by the largest
bucket, not the corpus.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from codecorpus.model import RecipeError
from codecorpus.packing import deps
from codecorpus.packing.bfd import best_fit_decreasing
from codecorpus.packing.config import LongContextConfig
from codecorpus.tokenize.tokenizer import Tokenizer

_LINE_COMMENT = {
    **{e: "//" for e in (*deps.JS_EXT, *deps.C_EXT, ".java", ".go", ".rs", ".cs", ".kt", ".kts",
                         ".scala", ".swift", ".dart", ".php", ".proto", ".zig", ".groovy")},
    **{e: "--" for e in (".sql", ".lua", ".hs", ".elm", ".ada", ".adb", ".ads")},
    **{e: ";" for e in (".lisp", ".clj", ".cljs", ".el", ".scm", ".asm", ".s")},
    **{e: "%" for e in (".tex", ".erl", ".m")},
}  # fmt: skip
_BLOCK_COMMENT = {e: ("<!--", " -->") for e in (".html", ".htm", ".xml", ".md", ".markdown", ".vue", ".svg")}


def bucket_of(source: str, repo: str, buckets: int) -> int:
    """Partition of a repository: the same repository always lands in the same bucket.

    >>> bucket_of("s", "r", 16) == bucket_of("s", "r", 16)
    True
    """
    digest = hashlib.blake2b(f"{source}\x00{repo}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % buckets


def _uniform(seed: int, what: str, key: str) -> float:
    digest = hashlib.blake2b(f"{seed}\x00{what}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2.0**64


def path_comment(path: str, label: str = "path") -> str:
    """A plain-text marker line in the file's own comment syntax.

    >>> path_comment("src/a.py"), path_comment("b.ts"), path_comment("R.md")
    ('# path: src/a.py\\n', '// path: b.ts\\n', '<!-- path: R.md -->\\n')
    """
    ext = posixpath.splitext(path)[1].lower()
    if ext in _BLOCK_COMMENT:
        open_, close = _BLOCK_COMMENT[ext]
        return f"{open_} {label}: {path}{close}\n"
    return f"{_LINE_COMMENT.get(ext, '#')} {label}: {path}\n"


@dataclass
class RepoFile:
    path: str
    lang: str
    text: str
    tokens: np.ndarray
    """Token ids of the file (no EOS)."""


@dataclass
class RepoDocument:
    """One repository document, already cut into pieces of at most ``seq_len`` tokens."""

    doc_id: str
    source: str
    repo: str
    lang: str
    """The language holding most of its file tokens (a piece's tokens are counted under it)."""
    pieces: list[np.ndarray]
    files: int
    split_files: int = 0
    """Files cut inside because they alone exceed a sequence."""

    @property
    def tokens(self) -> int:
        return sum(len(p) for p in self.pieces)


@dataclass
class Markers:
    """Token ids of the repository header and of each file header, by path."""

    repo: np.ndarray
    files: dict[str, np.ndarray] = field(default_factory=dict)


def encode_markers(repo: str, paths: Sequence[str], tokenizer: Tokenizer, cfg: LongContextConfig) -> Markers:
    """Marker ids of one repository, its name and paths encoded as ordinary text in one batch."""
    if cfg.markers == "special":
        missing = [t for t in (cfg.repo_token, cfg.file_token) if t not in tokenizer.special_tokens]
        if missing:
            raise RecipeError(
                f"tokenizer {tokenizer.name} lacks the marker tokens {missing}: add them to "
                "tokenizer.added_tokens or set long.markers: text"
            )
        texts = [f"{repo}\n", *(f"{p}\n" for p in paths)]
        heads = [[tokenizer.special_tokens[cfg.repo_token]]] + [[tokenizer.special_tokens[cfg.file_token]]] * len(paths)
    else:
        texts = [f"# repo: {repo}\n", *(path_comment(p) for p in paths)]
        heads = [[]] * (len(paths) + 1)
    encoded = tokenizer.encode_batch(texts)
    arrays = [np.asarray(h + e, np.uint32) for h, e in zip(heads, encoded, strict=True)]
    return Markers(arrays[0], dict(zip(paths, arrays[1:], strict=True)))


def order_files(files: Sequence[RepoFile], by_dependencies: bool) -> list[RepoFile]:
    by_path = {f.path: f for f in files}
    if not by_dependencies:
        return [by_path[p] for p in sorted(by_path)]
    return [by_path[p] for p in deps.dependency_order({f.path: f.text for f in files})]


def split_into_pieces(
    header: np.ndarray,
    bodies: Sequence[tuple[np.ndarray, np.ndarray]],
    seq_len: int,
    eos: int | None,
) -> tuple[list[np.ndarray], int]:
    """Cut a repository (header, then (file marker, file tokens) pairs, then EOS) into pieces.

    A piece ends before a file that does not fit (unless the piece holds no
    file yet); continuations start with ``header``; a file cut inside repeats
    its marker on the next piece. Returns the pieces and how many files were cut inside.

    >>> h = np.array([9]); f = lambda *t: (np.array([8]), np.array(t))
    >>> [p.tolist() for p in split_into_pieces(h, [f(1, 1), f(2, 2)], 5, 0)[0]]
    [[9, 8, 1, 1], [9, 8, 2, 2, 0]]
    >>> [p.tolist() for p in split_into_pieces(h, [f(1, 1, 1, 1, 1, 1)], 5, None)[0]]
    [[9, 8, 1, 1, 1], [9, 8, 1, 1, 1]]
    """
    # a header that would leave no room is not repeated (a pathologically long repo name)
    repeat = header if len(header) <= seq_len // 4 else header[:0]
    pieces: list[np.ndarray] = []
    cur: list[np.ndarray] = [header if len(header) <= seq_len // 4 else header[:0]]
    cur_len, has_body, split_files = len(cur[0]), False, 0
    items = [(m, t) for m, t in bodies]
    if eos is not None and items:  # EOS belongs to the last file, so it never sits alone
        items[-1] = (items[-1][0], np.concatenate([items[-1][1], np.asarray([eos], np.uint32)]))
    for marker, toks in items:
        body = np.concatenate([marker, toks]).astype(np.uint32, copy=False)
        if cur_len + len(body) > seq_len and has_body:
            pieces.append(np.concatenate(cur))
            cur, cur_len, has_body = [repeat], len(repeat), False
        if cur_len + len(body) > seq_len:
            split_files += 1
            resume = marker if len(repeat) + len(marker) <= seq_len // 2 else marker[:0]
            while cur_len + len(body) > seq_len:
                take = seq_len - cur_len
                cur.append(body[:take])
                pieces.append(np.concatenate(cur))
                body = np.concatenate([resume, body[take:]]).astype(np.uint32, copy=False)
                cur, cur_len = [repeat], len(repeat)
        cur.append(body)
        cur_len += len(body)
        has_body = True
    if has_body:
        pieces.append(np.concatenate(cur))
    return pieces, split_files


def assemble_repository(
    doc_id: str,
    source: str,
    repo: str,
    files: Sequence[RepoFile],
    tokenizer: Tokenizer,
    cfg: LongContextConfig,
    seq_len: int,
    append_eos: bool,
) -> RepoDocument:
    """One repository document: files ordered, marked and cut into pieces of at most ``seq_len``."""
    ordered = order_files(files, cfg.dependency_order)
    markers = encode_markers(repo, [f.path for f in ordered], tokenizer, cfg)
    bodies = [(markers.files[f.path], f.tokens) for f in ordered]
    pieces, split = split_into_pieces(markers.repo, bodies, seq_len, tokenizer.eos_id if append_eos else None)
    lang_tokens: Counter[str] = Counter()
    for f in ordered:
        lang_tokens[f.lang] += len(f.tokens)
    lang = min(lang_tokens.items(), key=lambda kv: (-kv[1], kv[0]))[0] if lang_tokens else "unknown"
    return RepoDocument(doc_id, source, repo, lang, pieces, len(ordered), split)


def upsample(docs: Sequence[RepoDocument], cfg: LongContextConfig, seed: int) -> tuple[list[RepoDocument], int]:
    """Per-source length upsampling: long documents of a source with factor f appear f times on average.

    A factor's whole part is repeated, its fraction drawn per repository; copies
    get ids ``<doc_id>#<k>``. Returns the documents and the number of copies added.
    """
    out: list[RepoDocument] = []
    added = 0
    for doc in docs:
        out.append(doc)
        factor = cfg.upsample.get(doc.source, 1.0)
        if factor == 1.0 or doc.tokens < cfg.upsample_min_tokens:
            continue
        copies = math.floor(factor) + (_uniform(seed, "upsample", doc.doc_id) < factor % 1) - 1
        if copies < 0:  # a factor below one thins long documents out
            out.pop()
            added -= 1
            continue
        for k in range(1, copies + 1):
            out.append(RepoDocument(f"{doc.doc_id}#{k}", doc.source, doc.repo, doc.lang, doc.pieces,
                                    doc.files, doc.split_files))  # fmt: skip
        added += copies
    return out, added


def limit_short_documents(
    docs: Sequence[RepoDocument], cfg: LongContextConfig, seed: int
) -> tuple[list[RepoDocument], list[RepoDocument]]:
    """(kept, left out): short documents kept in seeded order up to ``short_doc_share`` of the tokens."""
    if cfg.short_doc_share is None:
        return list(docs), []
    long_tokens = sum(d.tokens for d in docs if d.tokens >= cfg.short_doc_tokens)
    budget = cfg.short_doc_share / (1 - cfg.short_doc_share) * long_tokens
    short = sorted(
        (d for d in docs if d.tokens < cfg.short_doc_tokens),
        key=lambda d: (_uniform(seed, "short", d.doc_id), d.doc_id),
    )
    left_out: set[str] = set()
    used = 0
    for d in short:
        if used + d.tokens <= budget:
            used += d.tokens
        else:
            left_out.add(d.doc_id)
    return [d for d in docs if d.doc_id not in left_out], [d for d in docs if d.doc_id in left_out]


@dataclass
class LongPacked:
    """Packed pieces of a bucket in the layout of ``packing.pack.PackedShard``."""

    tokens: np.ndarray
    sequence_lengths: np.ndarray
    document_indices: np.ndarray
    seg_doc: list[RepoDocument]
    seg_offset: np.ndarray
    stats: dict[str, object]


def _log2_bucket(n: int) -> str:
    return f"<=2^{max(0, math.ceil(math.log2(max(n, 1))))}"


def pack_repositories(docs: Sequence[RepoDocument], seq_len: int) -> LongPacked:
    """Best-fit-decreasing over every piece of every document; single-repository statistics.

    Sequences come in BFD bin order; within a sequence, pieces in placement order.
    """
    pieces = [(d, k, p) for d in docs for k, p in enumerate(d.pieces)]
    lengths = np.fromiter((len(p) for _, _, p in pieces), np.int64, len(pieces))
    bins = best_fit_decreasing(lengths, seq_len)
    order = [i for b in bins for i in b]
    starts = {id(d): np.concatenate([[0], np.cumsum([len(p) for p in d.pieces])]) for d in docs}
    seg_doc = [pieces[i][0] for i in order]
    seg_offset = np.fromiter((starts[id(pieces[i][0])][pieces[i][1]] for i in order), np.int64, len(order))
    seg_len = lengths[order] if order else np.empty(0, np.int64)
    tokens = np.concatenate([pieces[i][2] for i in order]) if order else np.empty(0, np.uint32)
    document_indices = np.concatenate([[0], np.cumsum([len(b) for b in bins])]).astype(np.int64)
    return LongPacked(
        tokens=tokens,
        sequence_lengths=seg_len.astype(np.int32),
        document_indices=document_indices,
        seg_doc=seg_doc,
        seg_offset=seg_offset,
        stats=sequence_stats(bins, pieces, lengths),
    )


def sequence_stats(bins: list[list[int]], pieces: list, lengths: np.ndarray) -> dict[str, object]:
    """How many sequences hold a single repository, their tokens, and the length distributions."""
    single = single_tokens = 0
    seq_hist: Counter[str] = Counter()
    for b in bins:
        used = int(lengths[b].sum())
        seq_hist[_log2_bucket(used)] += 1
        if len({(pieces[i][0].source, pieces[i][0].repo) for i in b}) == 1:
            single += 1
            single_tokens += used
    doc_hist: Counter[str] = Counter()
    for d in {id(p[0]): p[0] for p in pieces}.values():
        doc_hist[_log2_bucket(d.tokens)] += 1
    return {
        "sequences": len(bins),
        "single_repo_sequences": single,
        "single_repo_tokens": single_tokens,
        "sequence_tokens_histogram": dict(seq_hist),
        "document_tokens_histogram": dict(doc_hist),
    }

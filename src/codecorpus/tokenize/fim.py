"""Fill-in-the-middle, as StarCoder2, DeepSeek-Coder and Qwen2.5-Coder train it.

A chosen document is cut at two character positions drawn uniformly from
``0..len(text)`` (bigcode Megatron-LM's ``permute``) into prefix, middle and
suffix; each piece is encoded on its own and the pieces are rearranged:

- PSM: ``<fim_prefix> prefix <fim_suffix> suffix <fim_middle> middle``
- SPM: ``<fim_prefix> <fim_suffix> suffix <fim_middle> prefix middle``
  (bigcode's SPM variant, which keeps prefix and middle contiguous, so the
  middle is still generated right after its left context)

EOS, when the set appends one, closes the rearranged document. Whether a
document is transformed, its order and its cut points come from
``blake2b(seed, salt, document id)`` alone, so the same document gets the same
FIM whatever the shard, worker or run, and different sets (``salt`` = set
name) draw independently.

Where it runs: in the set's pack job, not the tokenize stage. The tokenize
stage's tokens are shared by every output set (short, long, SFT), while FIM is
a per-set choice (rate, order share, per file inside repositories for the long
set). So a set re-encodes only the documents it rearranges (``rate`` of them),
from their text, and the shared token column stays FIM-free.
"""

from __future__ import annotations

import array
import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from codecorpus.model import RecipeError
from codecorpus.tokenize.config import FimConfig
from codecorpus.tokenize.tokenizer import Tokenizer

_U32 = 2.0**32


@dataclass(frozen=True)
class FimDraw:
    """The seeded decision for one document."""

    apply: bool
    spm: bool
    cut_a: float
    """Uniform in [0, 1): first cut as a share of the text length."""
    cut_b: float


def fim_draw(seed: int, salt: str, doc_id: str, cfg: FimConfig) -> FimDraw:
    """The FIM decision of one document, from the seed, salt and id only.

    >>> c = FimConfig(rate=1.0, spm_rate=0.0)
    >>> fim_draw(1, "s", "doc", c) == fim_draw(1, "s", "doc", c)
    True
    >>> fim_draw(1, "s", "doc", c).apply, fim_draw(1, "s", "doc", c).spm
    (True, False)
    """
    digest = hashlib.blake2b(f"{seed}\x00{salt}\x00{doc_id}".encode(), digest_size=16).digest()
    u = np.frombuffer(digest, "<u4") / _U32
    return FimDraw(bool(u[0] < cfg.rate), bool(u[1] < cfg.spm_rate), float(u[2]), float(u[3]))


def cut_points(n_chars: int, draw: FimDraw) -> tuple[int, int]:
    """Two sorted cut positions in ``0..n_chars`` (both ends included, like bigcode's randint).

    >>> cut_points(10, FimDraw(True, False, 0.95, 0.05))
    (0, 10)
    """
    a = min(int(draw.cut_a * (n_chars + 1)), n_chars)
    b = min(int(draw.cut_b * (n_chars + 1)), n_chars)
    return (a, b) if a <= b else (b, a)


def fim_token_ids(tokenizer: Tokenizer, cfg: FimConfig) -> tuple[int, int, int]:
    """(prefix, middle, suffix) special ids; the run adds missing ones to the vocabulary."""
    names = (cfg.prefix_token, cfg.middle_token, cfg.suffix_token)
    missing = [t for t in names if t not in tokenizer.special_tokens]
    if missing:
        raise RecipeError(
            f"tokenizer {tokenizer.name} lacks the FIM tokens {missing}: add them to "
            "tokenizer.added_tokens (a pipeline run does this itself for sets with fim:)"
        )
    pre, mid, suf = (tokenizer.special_tokens[t] for t in names)
    return pre, mid, suf


def rearrange(
    pieces: tuple[list[int], list[int], list[int]], spm: bool, ids: tuple[int, int, int]
) -> list[int]:
    """Token ids of one FIM document from its (prefix, middle, suffix) ids.

    >>> rearrange(([1], [2], [3]), False, (10, 11, 12))
    [10, 1, 12, 3, 11, 2]
    >>> rearrange(([1], [2], [3]), True, (10, 11, 12))
    [10, 12, 3, 11, 1, 2]
    """
    prefix, middle, suffix = pieces
    pre, mid, suf = ids
    if spm:
        return [pre, suf, *suffix, mid, *prefix, *middle]
    return [pre, *prefix, suf, *suffix, mid, *middle]


def fim_documents(
    doc_ids: Sequence[str],
    texts: Sequence[str],
    tokenizer: Tokenizer,
    cfg: FimConfig,
    seed: int,
    salt: str,
) -> tuple[dict[int, list[int]], Counter[str]]:
    """Token ids (no EOS) of the rows FIM rearranges, by row index, and the counts.

    Only the chosen rows are encoded (three pieces each, in one batch call).
    Counters: ``fim_documents``, ``fim_psm``, ``fim_spm``.
    """
    ids = fim_token_ids(tokenizer, cfg)
    rows, draws, pieces_text = [], [], []
    for row, (doc_id, text) in enumerate(zip(doc_ids, texts, strict=True)):
        draw = fim_draw(seed, salt, doc_id, cfg)
        if not draw.apply or not text:
            continue
        a, b = cut_points(len(text), draw)
        rows.append(row)
        draws.append(draw)
        pieces_text += [text[:a], text[a:b], text[b:]]
    encoded = tokenizer.encode_batch(pieces_text) if pieces_text else []
    out: dict[int, list[int]] = {}
    counts: Counter[str] = Counter()
    for k, (row, draw) in enumerate(zip(rows, draws, strict=True)):
        piece = (encoded[3 * k], encoded[3 * k + 1], encoded[3 * k + 2])
        out[row] = rearrange(piece, draw.spm, ids)
        counts["fim_spm" if draw.spm else "fim_psm"] += 1
    counts["fim_documents"] = len(rows)
    return out, counts


def with_fim(
    doc_ids: Sequence[str],
    texts: Sequence[str],
    tokens: pa.LargeListArray | pa.ChunkedArray,
    tokenizer: Tokenizer,
    cfg: FimConfig,
    seed: int,
    salt: str,
    append_eos: bool,
) -> tuple[pa.LargeListArray, Counter[str]]:
    """The ``tokens`` column with FIM applied to the rows the draw picks (EOS kept if appended)."""
    fim, counts = fim_documents(doc_ids, texts, tokenizer, cfg, seed, salt)
    if isinstance(tokens, pa.ChunkedArray):
        tokens = tokens.combine_chunks() if tokens.num_chunks else pa.array([], pa.large_list(pa.uint32()))
    if not fim:
        return tokens, counts
    offsets = tokens.offsets.to_numpy()
    values = tokens.values.to_numpy(zero_copy_only=False)
    out = array.array("I")
    lengths = np.empty(len(tokens), np.int64)
    eos = [tokenizer.eos_id] if append_eos else []
    for row in range(len(tokens)):
        if row in fim:
            ids = fim[row] + eos
            out.fromlist(ids)
            lengths[row] = len(ids)
        else:
            seg = values[offsets[row] : offsets[row + 1]]
            out.frombytes(seg.astype(np.uint32).tobytes())
            lengths[row] = len(seg)
    new_offsets = np.zeros(len(tokens) + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    flat = np.frombuffer(out, np.uint32) if len(out) else np.empty(0, np.uint32)
    return pa.LargeListArray.from_arrays(pa.array(new_offsets), pa.array(flat)), counts


def apply_to_table(
    table: pa.Table,
    cfg: FimConfig | None,
    tokenizer: Tokenizer,
    seed: int,
    salt: str,
    append_eos: bool,
) -> tuple[pa.Table, Counter[str]]:
    """A tokenized table with FIM applied to ``tokens`` and ``num_tokens`` (unchanged when ``cfg`` is None).

    What a set's pack job calls first, so packing, mixing and the manifest all
    see the set's own token counts.
    """
    from codecorpus import schema
    from codecorpus.stage import with_column

    if cfg is None or table.num_rows == 0:
        return table, Counter()
    tokens, counts = with_fim(
        table.column(schema.ID).to_pylist(), table.column(schema.TEXT).to_pylist(),
        table.column(schema.TOKENS), tokenizer, cfg, seed, salt, append_eos,
    )  # fmt: skip
    lengths = np.diff(tokens.offsets.to_numpy())
    table = with_column(table, schema.TOKENS, tokens)
    return with_column(table, schema.NUM_TOKENS, pa.array(lengths, pa.int64())), counts


def manifest_record(cfg: FimConfig | None, shard_counts: Sequence[dict[str, int] | None]) -> dict | None:
    """The ``packing.fim`` entry of a set manifest: the settings and the summed counts."""
    if cfg is None:
        return None
    total: Counter[str] = Counter({"fim_documents": 0, "fim_psm": 0, "fim_spm": 0})
    for counts in shard_counts:
        total.update(counts or {})
    return {**cfg.model_dump(mode="json"), **dict(sorted(total.items()))}

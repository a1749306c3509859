"""``codecorpus inspect``: one packed sequence decoded, with its document boundaries marked."""

from __future__ import annotations

import json
from pathlib import Path

from codecorpus import schema
from codecorpus.manifests.megatron import open_tokens, read_index, read_segments, shard_file
from codecorpus.tokenize.config import TokenizerConfig
from codecorpus.tokenize.tokenizer import load_tokenizer


def load_set_tokenizer(set_dir: Path):
    """The tokenizer a set was made with, from its manifest (paths relative to the run dir)."""
    manifest = json.loads((set_dir / schema.MANIFEST_NAME).read_text())
    cfg = dict(manifest["tokenizer"]["config"])
    if "path" in cfg and not Path(cfg["path"]).is_absolute():
        cfg["path"] = str(set_dir.parent.parent / cfg["path"])
    return load_tokenizer(TokenizerConfig(**cfg))


def render_sequence(prefix: Path | str, n: int) -> str:
    prefix = Path(prefix)
    for suffix in (schema.IDX_SUFFIX, schema.BIN_SUFFIX):
        if prefix.name.endswith(suffix):
            prefix = prefix.with_name(prefix.name[: -len(suffix)])
    index = read_index(shard_file(prefix, "idx"))
    sequences = len(index.document_indices) - 1
    if not 0 <= n < sequences:
        raise IndexError(
            f"{prefix}: sequence {n} does not exist (the shard has {sequences}: 0..{sequences - 1})"
        )
    tokens = open_tokens(prefix, index.dtype)
    segments = read_segments(prefix).to_pylist()
    tokenizer = load_set_tokenizer(prefix.parent)
    first, last = int(index.document_indices[n]), int(index.document_indices[n + 1])
    used = int(index.sequence_lengths[first:last].sum())
    lines = [f"# {prefix.name} sequence {n}: {last - first} segment(s), {used} tokens"]
    for k in range(first, last):
        seg = segments[k]
        start = int(index.sequence_pointers[k]) // index.dtype.itemsize
        ids = tokens[start : start + int(index.sequence_lengths[k])].tolist()
        lines.append(
            f"──── segment {k - first}: doc {seg[schema.SEG_DOC_ID]} [{seg[schema.LANG]}] "
            f"tokens {seg[schema.SEG_DOC_OFFSET]}..{seg[schema.SEG_DOC_OFFSET] + len(ids)} ────"
        )
        lines.append(tokenizer.decode(ids))
    lines.append("──── end of sequence ────")
    return "\n".join(lines)

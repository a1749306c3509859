"""Export a set to datatrove's tokenized-folder format, for nanotron-style launchers.

datatrove's ``DatatroveFolderDataset`` (``datatrove.utils.dataset``) reads a
folder of ``*.ds`` files: little-endian tokens (uint16 when ``token_size`` is
2, else uint32), cut into windows of ``seq_len + 1`` tokens (inputs plus the
shifted label). Beside each: ``.ds.index`` (uint64 cumulative document ends,
for position ids), ``.ds.loss`` (one bool per token) and ``.ds.metadata``
(tokenizer name, ``|``, token count).

To keep our packing, each packed sequence is written as exactly one window:
its segments, then padding (the pad id, EOS by default) up to ``seq_len + 1``
tokens. The padding run is a document of its own in ``.ds.index`` and has loss
0 in ``.ds.loss``, so window ``j`` of the export is packed sequence ``j`` of the
shard, with its document boundaries and no loss on padding.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from codecorpus import schema
from codecorpus.manifests.megatron import open_loss_mask, open_tokens, read_index, shard_file
from codecorpus.storage.atomic import atomic_write_bytes

DS_SUFFIX = ".ds"


def export_datatrove(set_dir: Path | str, out_dir: Path | str, pad_id: int | None = None) -> list[Path]:
    """Write one ``.ds`` (+ ``.index``, ``.loss``, ``.metadata``) per shard of a set; returns the ``.ds`` paths."""
    set_dir, out_dir = Path(set_dir), Path(out_dir)
    manifest = json.loads((set_dir / schema.MANIFEST_NAME).read_text())
    seq_len = int(manifest["seq_len"])
    if seq_len <= 0:
        raise ValueError(f"{set_dir}: not a pre-packed set (seq_len {seq_len}); export needs fixed sequences")
    vocab = int(manifest["tokenizer"]["vocab_size"])
    token_size = 2 if vocab <= 1 << 16 else 4
    pad = manifest["tokenizer"].get("eos_id", 0) if pad_id is None else pad_id
    written = []
    for record in manifest["shards"]:
        tokens, ends, loss = _windows(set_dir / record["prefix"], seq_len, pad, "mask" in record["files"])
        base = out_dir / f"{record['prefix']}{DS_SUFFIX}"
        dtype = "<u2" if token_size == 2 else "<u4"
        atomic_write_bytes(base, tokens.astype(dtype).tobytes())
        atomic_write_bytes(Path(f"{base}.index"), ends.astype("<u8").tobytes())
        atomic_write_bytes(Path(f"{base}.loss"), loss.astype(np.bool_).tobytes())
        name = manifest["tokenizer"].get("name", "unknown")
        atomic_write_bytes(Path(f"{base}.metadata"), f"{name}|{token_size}\n{len(tokens)}\n".encode())
        written.append(base)
    return written


def _windows(prefix: Path, seq_len: int, pad: int, has_mask: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens, cumulative document ends, loss) of one shard, one ``seq_len + 1`` window per sequence."""
    index = read_index(shard_file(prefix, "idx"))
    src = open_tokens(prefix, index.dtype)
    mask = open_loss_mask(prefix) if has_mask else None
    window = seq_len + 1
    n_seq = len(index.document_indices) - 1
    tokens = np.full(n_seq * window, pad, np.int64)
    loss = np.zeros(n_seq * window, np.uint8)
    ends: list[int] = []
    pointers = index.sequence_pointers // index.dtype.itemsize
    for j in range(n_seq):
        lo, hi = int(index.document_indices[j]), int(index.document_indices[j + 1])
        base = j * window
        used = int(index.sequence_lengths[lo:hi].sum())
        start = int(pointers[lo]) if hi > lo else 0
        tokens[base : base + used] = src[start : start + used]
        loss[base : base + used] = 1 if mask is None else mask[start : start + used]
        ends.extend((base + np.cumsum(index.sequence_lengths[lo:hi], dtype=np.int64)).tolist())
        ends.append(base + window)  # the padding (at least one token) closes the window
    return tokens, np.asarray(ends, np.uint64), loss

"""A trainer's loader over a set manifest: sharded, shuffled, resumable, numpy only.

    from codecorpus.manifests.loader import PackedLoader
    loader = PackedLoader("RUN/shards/short-8k", rank=r, world_size=w, seed=1234)
    for sample in loader:          # dict of numpy arrays
        ...                        # sample["input_ids"], ["position_ids"], ["cu_seqlens"], ["loss_mask"]
    state = loader.state_dict()    # save with the model checkpoint
    loader.load_state_dict(state)  # resume: exactly the samples an uninterrupted run gives next

A sample is one packed sequence, padded to ``seq_len`` (``pad_id``, default the
tokenizer's EOS) so every sample has the same shape. ``cu_seqlens`` lists
segment boundaries (the padding is a last segment of its own, so flash-attention
varlen kernels never attend across documents or into padding);
``position_ids`` restart at 0 in every segment; ``loss_mask`` is 1 on real
tokens (times the SFT mask from ``.mask.bin`` when the shard has one) and 0 on
padding.

Order: epoch ``e`` is a permutation of every packed sequence of the set, drawn
from ``numpy.random.default_rng([seed, e])``; rank ``r`` of ``w`` takes
positions ``r, r + w, r + 2w, ...`` of it, trimmed so every rank gets the same
count (the remainder is dropped, as DistributedSampler does with
``drop_last``). The state is just (epoch, position): resuming recomputes the
same permutation. Every shard is verified against its manifest's sizes on open
(not re-hashed; ``codecorpus manifest verify`` does that).

torch is optional: ``as_torch=True`` turns samples into tensors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codecorpus import schema
from codecorpus.manifests.megatron import open_loss_mask, open_tokens, read_index, shard_file

STATE_VERSION = 1


@dataclass(frozen=True)
class _Shard:
    tokens: np.ndarray
    pointers: np.ndarray  # token offset of each segment
    lengths: np.ndarray
    doc_index: np.ndarray
    mask: np.ndarray | None


class PackedLoader:
    """Iterate the packed sequences of one set for one data-parallel rank."""

    def __init__(
        self,
        path: Path | str,
        *,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        shuffle: bool = True,
        pad_id: int | None = None,
        as_torch: bool = False,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1} (world_size {world_size})")
        path = Path(path)
        manifest_path = path / schema.MANIFEST_NAME if path.is_dir() else path
        self.manifest = json.loads(manifest_path.read_text())
        if self.manifest.get("kind") != schema.SET_MANIFEST_KIND:
            raise ValueError(f"{manifest_path} is not a set manifest: pass RUN/shards/<set>")
        self.set_dir = manifest_path.parent
        self.seq_len = int(self.manifest["seq_len"])
        self.rank, self.world_size, self.seed, self.shuffle = rank, world_size, seed, shuffle
        self.pad_id = self.manifest["tokenizer"].get("eos_id", 0) if pad_id is None else pad_id
        self.as_torch = as_torch
        self._shards = [self._open(s) for s in self.manifest["shards"]]
        counts = np.array([len(s.doc_index) - 1 for s in self._shards], np.int64)
        self._seq_start = np.concatenate([[0], np.cumsum(counts)])
        self.total_sequences = int(self._seq_start[-1])
        self.per_rank = self.total_sequences // world_size
        self.epoch = 0
        self.position = 0  # index into this rank's slice of the epoch's order

    def _open(self, record: dict[str, Any]) -> _Shard:
        prefix = self.set_dir / record["prefix"]
        for info in record["files"].values():
            size = (self.set_dir / info["path"]).stat().st_size
            if size != info["bytes"]:
                raise ValueError(f"{info['path']}: {size} bytes, the manifest says {info['bytes']}: run "
                                 "`codecorpus manifest verify`")  # fmt: skip
        index = read_index(shard_file(prefix, "idx"))
        mask = open_loss_mask(prefix) if "mask" in record["files"] else None
        return _Shard(
            tokens=open_tokens(prefix, index.dtype),
            pointers=index.sequence_pointers // index.dtype.itemsize,
            lengths=index.sequence_lengths,
            doc_index=index.document_indices,
            mask=mask,
        )

    # --- order and state ------------------------------------------------------------

    def _order(self, epoch: int) -> np.ndarray:
        """This rank's global sequence ids for ``epoch``."""
        order = (
            np.random.default_rng([self.seed, epoch]).permutation(self.total_sequences)
            if self.shuffle
            else np.arange(self.total_sequences)
        )
        return order[self.rank : self.per_rank * self.world_size : self.world_size]

    def state_dict(self) -> dict[str, Any]:
        """Where the next sample comes from, plus what must match on resume."""
        return {
            "version": STATE_VERSION,
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "rank": self.rank,
            "world_size": self.world_size,
            "total_sequences": self.total_sequences,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("seed", "shuffle", "world_size", "total_sequences"):
            if state[key] != getattr(self, key):
                raise ValueError(
                    f"loader state has {key}={state[key]!r} but this loader has {getattr(self, key)!r}: "
                    "resume with the same set, seed, shuffle and world size"
                )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])

    def __len__(self) -> int:
        """Samples per epoch for this rank."""
        return self.per_rank

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Samples from the current state to the end of the epoch; the next iteration starts the next epoch."""
        order = self._order(self.epoch)
        while self.position < len(order):
            sample = self.sequence(int(order[self.position]))
            self.position += 1
            yield sample
        self.epoch, self.position = self.epoch + 1, 0

    # --- one sample -------------------------------------------------------------------

    def sequence(self, global_id: int) -> dict[str, Any]:
        """Packed sequence ``global_id`` of the set as a padded sample."""
        k = int(np.searchsorted(self._seq_start, global_id, side="right") - 1)
        shard, j = self._shards[k], global_id - int(self._seq_start[k])
        lo, hi = int(shard.doc_index[j]), int(shard.doc_index[j + 1])
        lengths = shard.lengths[lo:hi].astype(np.int64)
        start = int(shard.pointers[lo]) if hi > lo else 0
        used = int(lengths.sum())
        input_ids = np.full(self.seq_len, self.pad_id, np.int64)
        input_ids[:used] = shard.tokens[start : start + used]
        loss_mask = np.zeros(self.seq_len, np.uint8)
        loss_mask[:used] = 1 if shard.mask is None else shard.mask[start : start + used]
        seg_lengths = lengths if used == self.seq_len else np.append(lengths, self.seq_len - used)
        cu_seqlens = np.concatenate([[0], np.cumsum(seg_lengths)]).astype(np.int32)
        position_ids = np.arange(self.seq_len, dtype=np.int64) - np.repeat(cu_seqlens[:-1], seg_lengths)
        sample = {
            "input_ids": input_ids,
            "position_ids": position_ids,
            "cu_seqlens": cu_seqlens,
            "loss_mask": loss_mask,
            "num_tokens": used,
        }
        return _to_torch(sample) if self.as_torch else sample


def _to_torch(sample: dict[str, Any]) -> dict[str, Any]:
    try:  # torch is optional: the loader's own samples are numpy arrays
        import torch
    except ImportError:
        raise ImportError("as_torch=True needs torch: pip install torch, or leave as_torch off") from None

    return {k: torch.from_numpy(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v
            for k, v in sample.items()}  # fmt: skip

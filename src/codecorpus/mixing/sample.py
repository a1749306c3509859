"""Sampling a mixed set in the pack stage: copies per document, and one packing round per copy.

A document of group g gets ``floor(rate_g)`` copies, plus one when its hash bin
is below the group's threshold (``mixing.plan``): deterministic from the seed,
the set and the document id, whatever shard or worker it lands on. Copies are
whole documents. Round r packs every document with more than r copies, on its
own, so two copies of one document are never in the same packed sequence (a
sequence that saw a document once would otherwise learn to copy it from itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from codecorpus import schema
from codecorpus.mixing.config import MixConfig
from codecorpus.mixing.groups import doc_hashes, group_values, hash_bins
from codecorpus.mixing.plan import SetPlan, read_plans
from codecorpus.packing.config import OutputSet
from codecorpus.packing.pack import PackedShard, pack_documents
from codecorpus.storage.mirror import ensure_local


class MixInvariantError(RuntimeError):
    """The sampler produced other tokens than its plan: a bug, never bad input."""


@dataclass
class ShardMix:
    """The copies of one shard's documents, and what they add up to per group."""

    repeats: np.ndarray
    achieved: dict[str, list[int]]
    """group -> [documents in, documents kept (>= 1 copy), copies, tokens]"""

    @property
    def copies(self) -> int:
        return int(self.repeats.sum())

    @property
    def tokens(self) -> int:
        return sum(v[3] for v in self.achieved.values())


def load_set_plan(run: schema.RunPaths, set_name: str) -> SetPlan:
    try:
        plans = read_plans(ensure_local(run.mix_plan).read_bytes())
    except FileNotFoundError:
        raise MixInvariantError(f"no mixing plan at {run.mix_plan}: the pack stage writes it first") from None
    if set_name not in plans:
        raise MixInvariantError(f"{run.mix_plan} has no plan for set {set_name}")
    return plans[set_name]


def repeat_counts(table: pa.Table, plan: SetPlan, mix: MixConfig) -> tuple[np.ndarray, list[str]]:
    """Copies of every row (int64) and every row's group."""
    groups = group_values(table, mix)
    bins = hash_bins(doc_hashes(table.column(schema.ID).to_pylist(), plan.seed, plan.set))
    rules = {g.group: (g.copies_floor, g.extra_below_bin) for g in plan.groups}
    unknown = sorted(set(groups) - rules.keys())
    if unknown:
        raise MixInvariantError(f"set {plan.set}: groups {unknown} are not in the plan's scan")
    floor = np.fromiter((rules[g][0] for g in groups), np.int64, len(groups))
    below = np.fromiter((rules[g][1] for g in groups), np.int64, len(groups))
    return floor + (bins < below), groups


def shard_mix(run: schema.RunPaths, out: OutputSet, table: pa.Table) -> ShardMix | None:
    """The copies of a tokenized shard's documents in set ``out``; None for a set without a mix."""
    if out.mix is None:
        return None
    repeats, groups = repeat_counts(table, load_set_plan(run, out.name), out.mix)
    tokens = table.column(schema.NUM_TOKENS).to_numpy()
    achieved: dict[str, list[int]] = {}
    for g, n, t in zip(groups, repeats.tolist(), tokens.tolist(), strict=True):
        row = achieved.setdefault(g, [0, 0, 0, 0])
        row[0] += 1
        row[1] += n > 0
        row[2] += n
        row[3] += n * t
    return ShardMix(repeats, dict(sorted(achieved.items())))


def pack_rounds(table: pa.Table, repeats: np.ndarray, seq_len: int, dtype: npt.DTypeLike) -> PackedShard:
    """Pack round r = the documents with more than r copies; rounds concatenated in order."""
    rounds = []
    for r in range(int(repeats.max(initial=0))):
        rows = table.take(pa.array(np.flatnonzero(repeats > r), pa.int64()))
        rounds.append(pack_documents(
            rows.column(schema.ID), rows.column(schema.TOKENS), rows.column(schema.LANG),
            rows.column(schema.SOURCE), seq_len, dtype,
        ))
    if not rounds:
        empty = table.slice(0, 0)
        return pack_documents(
            empty.column(schema.ID), empty.column(schema.TOKENS), empty.column(schema.LANG),
            empty.column(schema.SOURCE), seq_len, dtype,
        )
    return concat_packed(rounds)


def concat_packed(parts: list[PackedShard]) -> PackedShard:
    """One shard of several packed shards, their sequences one after the other."""
    seg_offsets = np.cumsum([0] + [len(p.sequence_lengths) for p in parts])
    doc_indices = [parts[0].document_indices[:1]] + [
        p.document_indices[1:] + off for p, off in zip(parts, seg_offsets[:-1], strict=True)
    ]
    return PackedShard(
        tokens=np.concatenate([p.tokens for p in parts]),
        sequence_lengths=np.concatenate([p.sequence_lengths for p in parts]),
        document_indices=np.concatenate(doc_indices).astype(np.int64),
        segments=pa.concat_tables([p.segments for p in parts]),
        sequences=sum(p.sequences for p in parts),
        padding_tokens=sum(p.padding_tokens for p in parts),
        truncated_documents=sum(p.truncated_documents for p in parts),
    )


def mix_record(run: schema.RunPaths, out: OutputSet, shard_achieved: list[dict[str, list[int]] | None]) -> dict[str, Any]:
    """The set manifest's ``mix``: the plan and what the shards achieved, checked against each other.

    Planned tokens are exact (``mixing.plan``), so any difference is a sampler
    bug and raises ``MixInvariantError`` rather than producing a set whose
    manifest disagrees with its plan.
    """
    plan = load_set_plan(run, out.name)
    totals: dict[str, list[int]] = {}
    for part in shard_achieved:
        for g, vals in (part or {}).items():
            totals[g] = [a + b for a, b in zip(totals.get(g, [0, 0, 0, 0]), vals, strict=True)]
    all_tokens = sum(v[3] for v in totals.values())
    achieved = {}
    for g in plan.groups:
        docs_in, kept, copies, tokens = totals.get(g.group, [0, 0, 0, 0])
        if tokens != g.planned_tokens or copies != g.planned_copies:
            raise MixInvariantError(
                f"set {out.name}, group {g.group}: sampled {tokens} tokens / {copies} copies, "
                f"the plan says {g.planned_tokens} / {g.planned_copies}"
            )
        achieved[g.group] = {
            "documents_in": docs_in, "documents": kept, "copies": copies, "tokens": tokens,
            "share": tokens / all_tokens if all_tokens else 0.0,
            "error_vs_target": (tokens / g.target_tokens - 1.0) if g.target_tokens else 0.0,
        }
    gaps = [abs(achieved[g.group]["share"] - g.target_share) for g in plan.groups]
    return {
        "plan": plan.to_json(), "achieved": achieved, "tokens": all_tokens,
        # how far the mixture is from the plan's shares: whole documents cannot hit a
        # tiny group's target exactly, but they barely move the mixture
        "share_error_max": max(gaps, default=0.0),
        "total_variation": sum(gaps) / 2,
    }

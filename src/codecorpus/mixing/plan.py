"""Mixture plans: from the tokens each group really holds to a sampling rate per group.

    supply (tokens, docs, hash histogram per group; scanned after tokenize)
      -> requested weights   (recipe weights, "*" for the rest, or natural; min_share floor)
      -> targets             (weight x budget, each capped at max_epochs x its tokens;
                              a capped group's shortfall re-weights the rest, or shrinks the set)
      -> sampling            (every document ``floor(rate)`` copies, plus one more for documents
                              whose hash falls below the group's threshold bin)

The threshold is read off the group's token histogram over hash bins, so the
tokens the sampler will produce (``planned_tokens``) are known exactly at plan
time and the pack stage checks that it produced precisely them. Independent
Bernoulli draws would do as well on average but miss a small group's target by
several percent; a threshold on a uniform hash is the same per-document coin
(deterministic, order-free) with its bias chosen to hit the target.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from codecorpus.mixing.config import MixConfig
from codecorpus.mixing.groups import HASH_BINS
from codecorpus.model import RecipeError

REST = "*"
"""A weights key for every group the weights do not name, shared in natural proportions."""
PLAN_FORMAT = 1


@dataclass
class GroupSupply:
    """What one group holds after dedup and tokenize, with its token and document histograms."""

    tokens: int = 0
    docs: int = 0
    token_hist: np.ndarray = field(default_factory=lambda: np.zeros(HASH_BINS, np.int64))
    doc_hist: np.ndarray = field(default_factory=lambda: np.zeros(HASH_BINS, np.int64))


@dataclass(frozen=True)
class GroupPlan:
    group: str
    status: str
    """ok | capped (at its epoch cap, below its weight) | shrunk (below its weight because the set
    shrank: on_shortfall shrink) | excluded (no weight) | missing (weighted, but no tokens)"""
    available_docs: int
    available_tokens: int
    natural_share: float
    weight: float
    """Requested share (normalized recipe weight, after ``*`` and min_share)."""
    target_share: float
    """Share after fitting the caps (re-normalized, or shrunk)."""
    target_tokens: float
    rate: float
    """target / available tokens: the epochs over this group's data (below 1: a subsample)."""
    max_epochs: float
    shortfall_tokens: int
    """Tokens the requested weight asked for beyond the cap (0 when the group fit)."""
    copies_floor: int
    extra_below_bin: int
    planned_tokens: int
    planned_copies: int


@dataclass(frozen=True)
class SetPlan:
    set: str
    seed: int
    by: list[str]
    budget_tokens: int | None
    total_tokens: float
    planned_tokens: int
    groups: list[GroupPlan]
    warnings: list[str]

    def group(self, name: str) -> GroupPlan | None:
        return next((g for g in self.groups if g.group == name), None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> SetPlan:
        return SetPlan(**{**data, "groups": [GroupPlan(**g) for g in data["groups"]]})


# --- weights ---------------------------------------------------------------------------


def requested_weights(supply: dict[str, GroupSupply], mix: MixConfig) -> dict[str, float]:
    """Normalized weight per group (present or named), before the epoch caps.

    >>> s = {"a": GroupSupply(tokens=30), "b": GroupSupply(tokens=10), "c": GroupSupply(tokens=60)}
    >>> requested_weights(s, MixConfig())
    {'a': 0.3, 'b': 0.1, 'c': 0.6}
    >>> w = requested_weights(s, MixConfig(weights={"a": 0.5, "*": 0.5}))
    >>> {k: round(v, 3) for k, v in w.items()}
    {'a': 0.5, 'b': 0.071, 'c': 0.429}
    """
    natural = {g: float(s.tokens) for g, s in supply.items()}
    if mix.weights == "natural":
        raw = natural
    else:
        raw = {g: float(w) for g, w in mix.weights.items() if g != REST}
        rest = [g for g in supply if g not in raw]
        rest_tokens = sum(natural[g] for g in rest)
        for g in rest:
            share = natural[g] / rest_tokens if rest_tokens else 0.0
            raw[g] = mix.weights.get(REST, 0.0) * share
    total = sum(raw.values())
    if total <= 0:
        raise RecipeError("mix: no group with both a weight and tokens: check mix.weights and mix.by")
    weights = {g: raw[g] / total for g in sorted(raw)}
    return apply_min_share(weights, mix.min_share)


def apply_min_share(weights: dict[str, float], floor: float) -> dict[str, float]:
    """Raise every weighted group to at least ``floor``, taking the share from the larger ones.

    >>> {k: round(v, 3) for k, v in apply_min_share({"a": 0.9, "b": 0.08, "c": 0.02}, 0.05).items()}
    {'a': 0.872, 'b': 0.078, 'c': 0.05}
    """
    live = {g: w for g, w in weights.items() if w > 0}
    if floor <= 0 or not live:
        return weights
    if floor * len(live) > 1:
        raise RecipeError(
            f"mix.min_share: {floor} x {len(live)} groups is more than the whole set: "
            f"lower it to at most {1 / len(live):.4f}"
        )
    fixed: set[str] = set()
    while True:
        free = [g for g in live if g not in fixed]
        room = 1.0 - floor * len(fixed)
        scale = room / sum(live[g] for g in free)
        low = [g for g in free if live[g] * scale < floor]
        if not low:
            break
        fixed.update(low)
    out = dict(weights)
    for g in live:
        out[g] = floor if g in fixed else live[g] * scale
    return out


# --- targets -----------------------------------------------------------------------------


def _cap(supply: GroupSupply | None, group: str, mix: MixConfig) -> float:
    epochs = mix.max_epochs_by_group.get(group, mix.max_epochs)
    return epochs * (supply.tokens if supply else 0)


def _strict_error(set_name: str, group: str, weight: float, total: float, tokens: int, epochs: float) -> str:
    need = weight * total
    if tokens == 0:
        return (
            f"outputs.{set_name}.mix: group {group!r} has weight {weight:.4f} but no tokens after dedup: "
            f"remove it from mix.weights, check mix.by/mix.groups, or set strict: false"
        )
    return (
        f"outputs.{set_name}.mix: group {group!r} needs {need / tokens:.2f} epochs of its {tokens:,} tokens "
        f"for {weight:.2%} of {total:,.0f} tokens, above its max_epochs {epochs}: lower its weight to at "
        f"most {epochs * tokens / total:.4f}, raise max_epochs (or max_epochs_by_group.{group}) to "
        f"{math.ceil(need / tokens * 100) / 100}, lower budget_tokens to {int(epochs * tokens / weight):,}, "
        f"or set strict: false to cap it and re-weight the others"
    )


def fit_targets(
    weights: dict[str, float], caps: dict[str, float], total: float, mode: str
) -> tuple[dict[str, float], float]:
    """Target tokens per group within the caps, and the total they add up to.

    ``renormalize``: water-filling; a capped group keeps its cap and the tokens
    it cannot give are spread over the uncapped groups by weight (repeated until
    nothing new is capped). ``shrink``: the weights stay exact and the total
    shrinks to what the tightest group allows.

    >>> t, n = fit_targets({"a": 0.5, "b": 0.5}, {"a": 10, "b": 1000}, 100, "renormalize")
    >>> t, n
    ({'a': 10, 'b': 90.0}, 100.0)
    >>> fit_targets({"a": 0.5, "b": 0.5}, {"a": 10, "b": 1000}, 100, "shrink")
    ({'a': 10.0, 'b': 10.0}, 20.0)
    """
    live = {g: w for g, w in weights.items() if w > 0}
    if mode == "shrink":
        total = min([total, *(caps[g] / w for g, w in live.items())])
        return {g: live[g] * total for g in live}, total
    targets: dict[str, float] = {}
    free, remaining = dict(live), float(total)
    while free:
        wsum = sum(free.values())
        trial = {g: remaining * w / wsum for g, w in free.items()}
        over = [g for g in free if trial[g] > caps[g] * (1 + 1e-12)]
        if not over:
            targets.update(trial)
            break
        for g in over:
            targets[g] = caps[g]
            remaining -= caps[g]
            del free[g]
    return targets, float(sum(targets.values()))


def threshold_bin(token_hist: np.ndarray, remainder: float) -> int:
    """The bin b whose cumulative tokens below it come closest to ``remainder``.

    >>> threshold_bin(np.array([5, 5, 5, 5]), 9.0)
    2
    >>> threshold_bin(np.array([5, 5, 5, 5]), 0.0)
    0
    """
    cum = np.concatenate([[0], np.cumsum(token_hist)])
    return int(np.argmin(np.abs(cum - remainder)))


# --- the plan ------------------------------------------------------------------------------


def plan_set(set_name: str, supply: dict[str, GroupSupply], mix: MixConfig, seed: int) -> SetPlan:
    """The plan of one set. Strict sets raise ``RecipeError`` naming the group and the fix."""
    weights = requested_weights(supply, mix)
    names = sorted(set(supply) | set(weights))
    caps = {g: _cap(supply.get(g), g, mix) for g in names}
    included = sum(supply[g].tokens for g in names if g in supply and weights.get(g, 0) > 0)
    total = float(mix.budget_tokens or included)
    short = [g for g in names if weights.get(g, 0) * total > caps[g] * (1 + 1e-12)]
    if mix.strict and short:
        g = short[0]
        tokens = supply[g].tokens if g in supply else 0
        epochs = mix.max_epochs_by_group.get(g, mix.max_epochs)
        raise RecipeError(_strict_error(set_name, g, weights[g], total, tokens, epochs))
    targets, achieved_total = fit_targets(weights, caps, total, mix.on_shortfall)
    corpus = sum(s.tokens for s in supply.values())
    rows = [
        _group_plan(g, supply.get(g), weights.get(g, 0.0), targets.get(g, 0.0), (total, achieved_total), mix, corpus)
        for g in names
    ]
    plan = SetPlan(
        set=set_name, seed=seed, by=list(mix.by), budget_tokens=mix.budget_tokens,
        total_tokens=achieved_total, planned_tokens=sum(r.planned_tokens for r in rows),
        groups=rows, warnings=[],
    )
    plan.warnings.extend(plan_warnings(plan, total, mix))
    return plan


def _group_plan(
    group: str, supply: GroupSupply | None, weight: float, target: float, totals: tuple[float, float],
    mix: MixConfig, corpus_tokens: int,
) -> GroupPlan:
    """One group's row; ``totals`` is (requested total, total after fitting the caps)."""
    supply = supply or GroupSupply()
    epochs = mix.max_epochs_by_group.get(group, mix.max_epochs)
    rate = target / supply.tokens if supply.tokens else 0.0
    floor = math.floor(rate + 1e-12)
    remainder = max(0.0, target - floor * supply.tokens)
    b = threshold_bin(supply.token_hist, remainder) if supply.tokens else 0
    asked = weight * totals[0]
    if weight <= 0:
        status = "excluded"
    elif supply.tokens == 0:
        status = "missing"
    elif target < asked * (1 - 1e-9):
        status = "capped" if target >= epochs * supply.tokens * (1 - 1e-9) else "shrunk"
    else:
        status = "ok"
    return GroupPlan(
        group=group, status=status, available_docs=supply.docs, available_tokens=supply.tokens,
        natural_share=supply.tokens / corpus_tokens if corpus_tokens else 0.0, weight=weight,
        target_share=target / totals[1] if totals[1] else 0.0, target_tokens=target, rate=rate,
        max_epochs=epochs, shortfall_tokens=max(0, round(asked - target)) if weight > 0 else 0,
        copies_floor=floor, extra_below_bin=b,
        planned_tokens=floor * supply.tokens + int(supply.token_hist[:b].sum()),
        planned_copies=floor * supply.docs + int(supply.doc_hist[:b].sum()),
    )


def plan_warnings(plan: SetPlan, budget: float, mix: MixConfig) -> list[str]:
    """Human warnings: capped and missing groups, re-weighting, a budget the caps cannot reach."""
    out = []
    for g in plan.groups:
        if g.status == "capped":
            out.append(
                f"set {plan.set}: group {g.group!r} holds {g.available_tokens:,} tokens; at max_epochs "
                f"{g.max_epochs} it gives {g.target_tokens:,.0f}, {g.shortfall_tokens:,} short of its "
                f"weight {g.weight:.2%}"
            )
        elif g.status == "missing":
            out.append(f"set {plan.set}: group {g.group!r} has weight {g.weight:.2%} but no tokens")
    if any(g.status in ("capped", "missing") for g in plan.groups):
        how = (
            "the other groups were re-weighted to fill the budget"
            if mix.on_shortfall == "renormalize"
            else "the weights were kept and the set shrank"
        )
        out.append(f"set {plan.set}: {how} (on_shortfall: {mix.on_shortfall}); set strict: true to fail instead")
    if plan.total_tokens < budget * (1 - 1e-9):
        out.append(
            f"set {plan.set}: {plan.total_tokens:,.0f} tokens planned, below the budget of {budget:,.0f}: "
            "the epoch caps allow no more (raise max_epochs or lower budget_tokens)"
        )
    excluded = [g.group for g in plan.groups if g.status == "excluded" and g.available_tokens]
    if excluded:
        out.append(f"set {plan.set}: groups without weight left out: {', '.join(excluded)}")
    return out


def plans_json(plans: list[SetPlan]) -> bytes:
    body = {"format_version": PLAN_FORMAT, "sets": {p.set: p.to_json() for p in plans}}
    return (json.dumps(body, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()


def read_plans(data: bytes | str) -> dict[str, SetPlan]:
    body = json.loads(data)
    return {name: SetPlan.from_json(p) for name, p in body["sets"].items()}

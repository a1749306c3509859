"""Config of a set's target mixture (``outputs[i].mix``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from codecorpus.model import Model


def _as_tuple(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


class MixConfig(Model):
    """The target mixture of one output set (``outputs[i].mix``), planned from real token counts.

    ``by`` names the group key: one column or several (their values joined with
    ``/``), optionally mapped to named groups by ``groups``. ``weights`` are
    relative (normalized to sum 1); ``"*"`` shares its weight among the groups not
    listed, in their natural proportions; groups that get no weight are left out
    of the set. ``budget_tokens`` fixes the set's size (default: the tokens the
    included groups hold). A group never exceeds ``max_epochs`` passes over its
    data (default 4: beyond that, repeated tokens are worth little, Muennighoff
    et al. 2023); a group that falls short is capped and the other groups are
    re-weighted (``on_shortfall: renormalize``) or the whole set shrinks to keep
    the weights (``shrink``), with a warning; ``strict: true`` fails instead.
    """

    by: Annotated[tuple[str, ...], BeforeValidator(_as_tuple)] = Field(
        ("lang",), min_length=1, description="group key column(s): lang, source, kind, repo ..."
    )
    groups: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="group name -> key values (e.g. systems: [C, C++, Rust])"
    )
    other: str = Field("other", min_length=1, description="group of key values not in groups")
    weights: dict[str, float] | Literal["natural"] = Field(
        "natural", description="group -> relative weight ('*': the unlisted groups); or natural"
    )
    budget_tokens: int | None = Field(None, gt=0, description="tokens of the set; null: natural size")
    max_epochs: float = Field(4.0, gt=0, description="most passes over any group's tokens")
    max_epochs_by_group: dict[str, float] = Field(default_factory=dict)
    min_share: float = Field(0.0, ge=0, lt=1, description="floor on every included group's share")
    on_shortfall: Literal["renormalize", "shrink"] = "renormalize"
    strict: bool = Field(False, description="fail (instead of warn) when a group falls short")

    @model_validator(mode="after")
    def _valid(self) -> MixConfig:
        if isinstance(self.weights, dict):
            bad = {k: v for k, v in self.weights.items() if v < 0}
            if bad or not any(v > 0 for v in self.weights.values()):
                raise ValueError(f"mix.weights must be >= 0 with one > 0, got {self.weights}")
        seen: dict[str, str] = {}
        for group, values in self.groups.items():
            for v in values:
                if v in seen:
                    raise ValueError(f"mix.groups: {v!r} is in both {seen[v]!r} and {group!r}")
                seen[v] = group
        bad_caps = {k: v for k, v in self.max_epochs_by_group.items() if v <= 0}
        if bad_caps:
            raise ValueError(f"mix.max_epochs_by_group must be > 0, got {bad_caps}")
        return self

"""Mixture plans and sampling on in-memory tables: targets, caps, warnings, exactness, determinism."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import MixConfig, RecipeError
from codecorpus.mixing.groups import scan_groups
from codecorpus.mixing.plan import GroupSupply, plan_set
from codecorpus.mixing.sample import concat_packed, pack_rounds, repeat_counts

SEED, SET = 11, "short"


def corpus(sizes: dict[str, int], seed: int = 0) -> pa.Table:
    """Documents per language with lengths 20..400 tokens (token ids = row number, for tracing)."""
    rng = np.random.default_rng(seed)
    rows = []
    for lang, n in sizes.items():
        for i in range(n):
            length = int(rng.integers(20, 400))
            rows.append({"id": f"{lang}-{i:05d}", "lang": lang, "source": f"src{i % 3}", "num_tokens": length})
    tokens = [np.full(r["num_tokens"], k % 1000, np.uint32) for k, r in enumerate(rows)]
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in tokens])]).astype(np.int64)
    flat = np.concatenate(tokens)
    t = pa.Table.from_pylist(rows)
    return t.append_column(schema.TOKENS, pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat)))


def supply_of(*tables: pa.Table, mix: MixConfig) -> dict[str, GroupSupply]:
    out: dict[str, GroupSupply] = {}
    for t in tables:
        for r in scan_groups(t, mix, SEED, SET).to_pylist():
            s = out.setdefault(r["group"], GroupSupply())
            s.token_hist[r["bin"]] += r["tokens"]
            s.doc_hist[r["bin"]] += r["docs"]
    for s in out.values():
        s.tokens, s.docs = int(s.token_hist.sum()), int(s.doc_hist.sum())
    return out


def achieved(table: pa.Table, plan, mix: MixConfig) -> dict[str, int]:
    repeats, groups = repeat_counts(table, plan, mix)
    tokens = table.column("num_tokens").to_numpy()
    out: dict[str, int] = {}
    for g, n, t in zip(groups, repeats, tokens, strict=True):
        out[g] = out.get(g, 0) + int(n) * int(t)
    return out


def test_natural_mix_without_budget_keeps_every_document_once():
    t = corpus({"Python": 300, "C": 100})
    mix = MixConfig()
    plan = plan_set(SET, supply_of(t, mix=mix), mix, SEED)
    assert [(g.group, g.copies_floor, g.extra_below_bin, g.status) for g in plan.groups] == [
        ("C", 1, 0, "ok"), ("Python", 1, 0, "ok")]
    repeats, _ = repeat_counts(t, plan, mix)
    assert (repeats == 1).all() and plan.warnings == []


def test_budgeted_mix_is_within_one_percent_and_exactly_as_planned():
    t = corpus({"Python": 1500, "C": 600, "Go": 400})
    mix = MixConfig(weights={"Python": 0.4, "C": 0.35, "Go": 0.25}, budget_tokens=400_000)
    plan = plan_set(SET, supply_of(t, mix=mix), mix, SEED)
    got = achieved(t, plan, mix)
    for g in plan.groups:
        assert got[g.group] == g.planned_tokens  # the plan knows the sampler's output exactly
        assert abs(got[g.group] / g.target_tokens - 1) < 0.01, g
    assert abs(sum(got.values()) / 400_000 - 1) < 0.01
    # upsampled (C, Go) and downsampled (Python) groups
    rates = {g.group: g.rate for g in plan.groups}
    assert rates["Python"] < 1 < rates["Go"] and rates["C"] > 1


def test_sampling_is_deterministic_and_independent_of_sharding():
    t = corpus({"Python": 500, "C": 200})
    mix = MixConfig(weights={"Python": 1, "C": 1}, budget_tokens=150_000)
    plan = plan_set(SET, supply_of(t.slice(0, 333), t.slice(333), mix=mix), mix, SEED)
    whole, _ = repeat_counts(t, plan, mix)
    parts = np.concatenate([repeat_counts(t.slice(0, 100), plan, mix)[0], repeat_counts(t.slice(100), plan, mix)[0]])
    assert (whole == parts).all()
    assert (repeat_counts(t, plan, mix)[0] == whole).all()
    other_seed = plan_set(SET, supply_of(t, mix=mix), mix, SEED + 1)
    assert not (repeat_counts(t, other_seed, mix)[0] == whole).all()


def test_shortfall_is_capped_at_max_epochs_and_the_rest_reweighted_with_warnings():
    t = corpus({"Python": 800, "Rust": 20})
    mix = MixConfig(weights={"Python": 0.5, "Rust": 0.5}, budget_tokens=100_000, max_epochs=4)
    supply = supply_of(t, mix=mix)
    plan = plan_set(SET, supply, mix, SEED)
    rust, py = plan.group("Rust"), plan.group("Python")
    assert rust.status == "capped" and rust.rate == pytest.approx(4.0)
    assert rust.planned_tokens == 4 * supply["Rust"].tokens
    assert rust.shortfall_tokens == round(50_000 - 4 * supply["Rust"].tokens)
    assert py.target_tokens == pytest.approx(100_000 - 4 * supply["Rust"].tokens)
    assert any("'Rust'" in w and "short" in w for w in plan.warnings)
    assert any("re-weighted" in w for w in plan.warnings)
    repeats, groups = repeat_counts(t, plan, mix)
    assert repeats[np.array(groups) == "Rust"].tolist() == [4] * 20


def test_shrink_keeps_the_weights_and_strict_fails_naming_group_and_fix():
    t = corpus({"Python": 800, "Rust": 20})
    supply = supply_of(t, mix=MixConfig())
    shrink = MixConfig(weights={"Python": 0.5, "Rust": 0.5}, budget_tokens=100_000, on_shortfall="shrink")
    plan = plan_set(SET, supply, shrink, SEED)
    assert plan.group("Python").target_tokens == pytest.approx(plan.group("Rust").target_tokens)
    assert plan.total_tokens == pytest.approx(8 * supply["Rust"].tokens)
    assert any("below the budget" in w for w in plan.warnings)
    strict = MixConfig(weights={"Python": 0.5, "Rust": 0.5}, budget_tokens=100_000, strict=True)
    with pytest.raises(RecipeError, match=r"outputs\.short\.mix: group 'Rust' needs .* max_epochs"):
        plan_set(SET, supply, strict, SEED)


def test_rest_weight_groups_mapping_and_min_share():
    t = corpus({"Python": 400, "C": 100, "C++": 100, "Go": 50})
    mix = MixConfig(groups={"systems": ("C", "C++")}, weights={"systems": 0.4, "*": 0.6}, min_share=0.2)
    plan = plan_set(SET, supply_of(t, mix=mix), mix, SEED)
    shares = {g.group: g.weight for g in plan.groups}
    assert set(shares) == {"systems", "other"}  # Python and Go fall into `other`
    assert shares["systems"] == pytest.approx(0.4) and shares["other"] == pytest.approx(0.6)
    only = MixConfig(weights={"Python": 1.0})
    plan = plan_set(SET, supply_of(t, mix=only), only, SEED)
    assert {g.group: g.status for g in plan.groups} == {"C": "excluded", "C++": "excluded", "Go": "excluded", "Python": "ok"}
    assert any("left out" in w for w in plan.warnings)
    floor = MixConfig(min_share=0.2)
    plan = plan_set(SET, supply_of(t, mix=floor), floor, SEED)
    assert min(g.weight for g in plan.groups) == pytest.approx(0.2)


def test_key_combinations_and_mix_config_errors():
    t = corpus({"Python": 30})
    mix = MixConfig(by=("lang", "source"))
    assert {g.group for g in plan_set(SET, supply_of(t, mix=mix), mix, SEED).groups} == {
        "Python/src0", "Python/src1", "Python/src2"}
    with pytest.raises(ValueError, match="both"):
        MixConfig(groups={"a": ("C",), "b": ("C",)})
    with pytest.raises(ValueError, match="weights"):
        MixConfig(weights={"a": 0})


def test_pack_rounds_keep_copies_of_a_document_in_different_sequences():
    t = corpus({"Python": 40})
    repeats = np.array([3 if i % 4 == 0 else 1 for i in range(t.num_rows)])
    packed = pack_rounds(t, repeats, 1024, np.uint16)
    seg = packed.segments.to_pylist()
    assert len(packed.tokens) == int((repeats * t.column("num_tokens").to_numpy()).sum())
    di = packed.document_indices
    for j in range(len(di) - 1):
        ids = [s["doc_id"] for s in seg[di[j]:di[j + 1]] if s["doc_offset"] == 0]
        assert len(ids) == len(set(ids)), f"sequence {j} holds two copies of one document"
    assert concat_packed([packed]).tokens.tobytes() == packed.tokens.tobytes()

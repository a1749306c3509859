"""The mixing phase of the pack stage (Ray-free job bodies, like ``packing/bodies.py``).

    scan  (per mixed set x tokenized shard) -> group x hash-bin histogram of tokens and documents
    plan  (driver, once)                    -> RUN/mixing/plan.json (+ plan.parquet / plan.csv)

The scan reads only the id, ``num_tokens`` and key columns of a shard; the plan
holds one dense ``HASH_BINS`` histogram per group, so its memory depends on the
number of groups, never on the number of documents.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from codecorpus import schema
from codecorpus.mixing import groups as mg
from codecorpus.mixing.plan import GroupSupply, SetPlan, plan_set, plans_json
from codecorpus.model import RecipeError
from codecorpus.packing.config import OutputSet
from codecorpus.pipeline.bodies import (
    InvariantError,
    JobContext,
    write_marker,
)
from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.storage.parquet import parquet_schema, read_parquet, write_parquet

PHASE = "mixscan"


def scan_phase(set_name: str) -> str:
    return f"{PHASE}-{set_name}"


def scan_job(ctx: JobContext, out: OutputSet, seed: int, shard: int, in_stage: str) -> dict:
    """Histogram one tokenized shard by the set's group key and document hash bin."""
    t0 = time.perf_counter()
    path = ctx.run.part(in_stage, shard)
    mg.check_key_columns(out.mix, parquet_schema(path).names, out.name)
    columns = sorted({schema.ID, schema.NUM_TOKENS, *mg.key_columns(out.mix)})
    table = read_parquet(path, columns)
    scanned = mg.scan_groups(table, out.mix, seed, out.name)
    write_parquet(ctx.run.work_part(ctx.stage, scan_phase(out.name), 0, shard), scanned)
    stats = {"rows": table.num_rows, "seconds": round(time.perf_counter() - t0, 4)}
    write_marker(ctx, f"{scan_phase(out.name)}-{schema.shard_name(shard)}", stats)
    return stats


def gather_supply(ctx: JobContext, set_name: str, n_shards: int) -> dict[str, GroupSupply]:
    """Sum the shards' scans, one shard at a time, into dense per-group histograms."""
    supply: dict[str, GroupSupply] = {}
    for shard in range(n_shards):
        t = read_parquet(ctx.run.work_part(ctx.stage, scan_phase(set_name), 0, shard)).to_pydict()
        for g, b, d, n in zip(t[mg.GROUP], t[mg.BIN], t[mg.DOCS], t[mg.TOKENS], strict=True):
            s = supply.setdefault(g, GroupSupply())
            s.token_hist[b] += n
            s.doc_hist[b] += d
    for s in supply.values():
        s.tokens, s.docs = int(s.token_hist.sum()), int(s.doc_hist.sum())
    return dict(sorted(supply.items()))


def check_against_stats(plan_supply: dict[str, GroupSupply], upstream_stats: dict[str, Any], by: tuple[str, ...]) -> None:
    """The scan must see exactly the tokens the upstream stage counted (per language when by lang)."""
    total = sum(s.tokens for s in plan_supply.values())
    if total != upstream_stats["tokens_out"]:
        raise InvariantError(f"mix scan saw {total} tokens, the tokenize stats say {upstream_stats['tokens_out']}")
    if by == (schema.LANG,):
        langs = {k: v[2] for k, v in upstream_stats["langs_out"].items()}
        seen = {g: s.tokens for g, s in plan_supply.items()}
        if not set(seen) <= set(langs) or any(langs.get(g) != n for g, n in seen.items()):
            raise InvariantError(f"mix scan tokens per language {seen} differ from the stats {langs}")


def write_plans(run: schema.RunPaths, plans: list[SetPlan]) -> None:
    """RUN/mixing/plan.json and the same plans as one long-form table (parquet and CSV)."""
    shutil.rmtree(run.mixing_dir, ignore_errors=True)
    if not plans:
        return
    atomic_write_bytes(run.mix_plan, plans_json(plans))
    table = plan_table(plans)
    write_parquet(run.mix_plan_table(".parquet"), table)
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink)
    atomic_write_bytes(run.mix_plan_table(".csv"), sink.getvalue().to_pybytes())


PLAN_COLUMNS = (
    "group", "status", "available_docs", "available_tokens", "natural_share", "weight", "target_share",
    "target_tokens", "rate", "max_epochs", "shortfall_tokens", "planned_tokens", "planned_copies",
)


def plan_table(plans: list[SetPlan]) -> pa.Table:
    """One row per (set, group): available tokens, target, sampling rate (= epochs), shortfall."""
    rows = [
        {"set": p.set, **{c: getattr(g, c) for c in PLAN_COLUMNS}}
        for p in plans for g in p.groups
    ]
    return pa.Table.from_pylist(rows) if rows else pa.table({"set": pa.array([], pa.string())})


def format_plan(plan: SetPlan) -> str:
    """A fixed-width table of a plan for the console."""
    head = f"{'group':<24} {'available':>14} {'target':>14} {'rate':>7} {'share':>7} {'shortfall':>12}  status"
    lines = [f"mix plan for set {plan.set} (by {'/'.join(plan.by)}): {plan.planned_tokens:,} tokens", head]
    for g in plan.groups:
        lines.append(
            f"{g.group[:24]:<24} {g.available_tokens:>14,} {g.target_tokens:>14,.0f} {g.rate:>7.3f} "
            f"{g.target_share:>7.2%} {g.shortfall_tokens:>12,}  {g.status}"
        )
    return "\n".join(lines)


def mixed_sets(outputs: tuple[OutputSet, ...] | list[OutputSet]) -> list[OutputSet]:
    """The sets with a ``mix:``; only short sets sample (long sets have ``long.upsample``)."""
    mixed = [o for o in outputs if o.mix is not None]
    for out in mixed:
        if out.kind != "short":
            raise RecipeError(
                f"outputs.{out.name}.mix: mixing samples kind: short sets; remove it from this "
                f"kind: {out.kind} set (long sets weight sources with long.upsample)"
            )
    return mixed


def plan_sets(ctx: JobContext, outputs: list[OutputSet], seed: int, n_shards: int, upstream_stats: dict[str, Any]) -> list[SetPlan]:
    """Plan every mixed set from its scans; strict sets raise ``RecipeError``."""
    plans = []
    for out in outputs:
        if out.mix is None:
            continue
        supply = gather_supply(ctx, out.name, n_shards)
        check_against_stats(supply, upstream_stats, out.mix.by if not out.mix.groups else ())
        if not supply:
            raise RecipeError(f"outputs.{out.name}.mix: the tokenized corpus is empty; nothing to mix")
        plans.append(plan_set(out.name, supply, out.mix, seed))
    return plans


__all__ = ["format_plan", "plan_sets", "scan_job", "write_plans"]

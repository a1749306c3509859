"""The ingest stage: the recipe's sources -> document shards (the pretraining source)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from codecorpus import schema
from codecorpus.ingest.config import IngestConfig
from codecorpus.pipeline.spec import Job, PlanTasks, StageRun, StageSpec

if TYPE_CHECKING:
    from codecorpus.ingest import shardplan
    from codecorpus.stage import MapResult

# The functions below import their job bodies when they run (planning, jobs, on a worker):
# declaring the stage imports none of them.


def plan_sources(recipe: Any, plan_tasks: PlanTasks | None = None) -> tuple[list[shardplan.ShardPlan], str]:
    """The planned shards (a stat walk, no reads) and their hash: a changed input tree redoes
    ingest and, through the hash chain, every stage after it. Many repositories are listed
    in planning tasks (``ingest/shardplan.py``)."""
    from codecorpus.ingest import shardplan

    planned = shardplan.plan_ingest(recipe.sources, recipe.stages.ingest, plan_tasks)
    return planned.shards, planned.hash


def read_planned(shard: shardplan.ShardPlan, plan_dir: str, cfg: IngestConfig) -> MapResult:
    """Read one planned shard: its units from the plan files (or as planned inline), then every file."""
    from codecorpus.ingest import read, shardplan

    return read.read_shard(shardplan.load_units(shard.pieces, plan_dir), cfg)


def ingest_jobs(stage: StageRun) -> list[Job]:
    """One read job per planned shard; rows_in is its planned units (archives expand inside)."""
    from codecorpus.pipeline import bodies

    cfg = stage.cfg
    plan_dir = str(stage.run.plan_dir(stage.name))
    return [
        Job(schema.shard_name(i), bodies.ingest_job,
            (stage.ctx, i, functools.partial(read_planned, shard, plan_dir, cfg), shard.document_bytes, shard.units),
            reads=shard.reads(), weight=shard.document_bytes)
        for i, shard in enumerate(stage.shards)
    ]


INGEST = StageSpec("ingest", "source", IngestConfig, plan=plan_sources, source_jobs=ingest_jobs)

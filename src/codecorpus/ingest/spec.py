"""The ingest stage: the recipe's sources -> document shards (the pretraining source)."""

from __future__ import annotations

import functools
from typing import Any

from codecorpus import schema
from codecorpus.ingest import plan, read
from codecorpus.ingest.config import IngestConfig
from codecorpus.model import config_hash
from codecorpus.pipeline import tasks
from codecorpus.pipeline.spec import Job, StageRun, StageSpec


def plan_sources(recipe: Any) -> tuple[list[list[Any]], str]:
    """The planned shards (a stat walk, no reads) and their hash: a changed input tree redoes
    ingest and, through the hash chain, every stage after it."""
    shards = plan.plan_shards(recipe.sources, recipe.stages.ingest)
    return shards, config_hash([plan.plan_fingerprint(s) for s in shards])


def _location(ref: Any) -> str:
    return str(getattr(ref, "abspath", None) or getattr(ref, "location", None) or ref)


def ingest_jobs(stage: StageRun) -> list[Job]:
    """One read task per planned shard; rows_in is its planned units (archives expand inside)."""
    cfg = stage.cfg
    return [
        Job(schema.shard_name(i), tasks.ingest_task,
            (stage.task, i, functools.partial(read.read_shard, refs, cfg),
             plan.document_bytes(refs), len(refs)),
            reads=tuple(_location(r) for r in refs))
        for i, refs in enumerate(stage.shards)
    ]


INGEST = StageSpec("ingest", "source", IngestConfig, plan=plan_sources, source_jobs=ingest_jobs)

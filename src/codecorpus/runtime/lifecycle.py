"""A stage's life in a run directory: its hash, its reset, its markers, its stats.

Each stage has a hash chained from the hash before it (``stage_hashes``): a changed setting
redoes that stage and every later one. Before a stage runs, ``begin`` checks that its upstream
is complete under the current hashes and resets the stage's folder when it was made under
another hash (a sink's output sets too); it then writes the stage's hash (``_stage.json``).
A job is done when its marker holds the stage's hash (``known``): the scheduler skips it, which
is how a rerun resumes. When the stage's jobs are done, ``finish`` sums their stats, checks
conservation (rows_in = rows_out + dropped, and the bytes: ``bodies.aggregate_stats``) and
writes ``_stats.json`` with the hash and what the runtime measured (``TaskUsage``).

No Ray here: it reads and writes the run directory only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codecorpus import schema
from codecorpus.config import Recipe, RecipeError, config_hash
from codecorpus.pipeline.pipelines import enabled_specs
from codecorpus.pipeline.spec import StageSpec
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import atomic_write_bytes, remove_stale_temps
from codecorpus.storage.mirror import ensure_local

if TYPE_CHECKING:
    from codecorpus.pipeline.bodies import JobContext
    from codecorpus.runtime.scheduler import TaskUsage


def stage_hashes(recipe: Recipe, plan_hash: str) -> dict[str, str]:
    """Each enabled stage's hash, chained: a change upstream changes every hash after it."""
    prev = config_hash([s.model_dump(mode="json") for s in recipe.sources], recipe.seed, plan_hash)
    out: dict[str, str] = {}
    for spec in enabled_specs(recipe):
        parts: list[Any] = [prev, spec.name, spec.config(recipe, spec.name), *spec.hash_parts(recipe)]
        prev = out[spec.name] = config_hash(*parts)
    return out


def known(ctx: JobContext, job: str) -> dict[str, Any] | None:
    """The stats of a job whose marker holds its stage's hash (done), else None."""
    from codecorpus.pipeline import bodies

    marker = bodies.read_marker(ctx, job)
    return None if marker is None else marker["stats"]


class Lifecycle:
    """The stages of one run directory under one set of hashes."""

    def __init__(self, run: schema.RunPaths, hashes: Mapping[str, str]) -> None:
        self.run = run
        self.hashes = hashes

    def begin(self, spec: StageSpec, upstream: str | None) -> None:
        """Check the upstream is complete under the current recipe; reset the stage if it was
        made under another hash; remove temporary files a stopped run left; write the hash."""
        if upstream is not None:
            self._require_complete(spec.name, upstream)
        if self.read_meta(spec.name).get("hash") != self.hashes[spec.name]:
            store.remove_tree(self.run.stage_dir(spec.name))
            for rel in spec.output_dirs:
                store.remove_tree(self.run.root / rel)
            for rel in spec.output_files:
                store.remove_file(self.run.root / rel)
        self.remove_partial(spec)
        meta = {"hash": self.hashes[spec.name]}
        atomic_write_bytes(self.run.stage_meta(spec.name), json.dumps(meta, sort_keys=True).encode())

    def remove_partial(self, spec: StageSpec) -> None:
        """Remove the temporary files of the stage's unfinished writes on this node."""
        for directory in self._stage_dirs(spec):
            remove_stale_temps(directory)

    def finish(self, stage: str, results: Sequence[dict[str, Any]], usage: TaskUsage | None) -> dict[str, Any]:
        """Sum the output jobs' stats (conservation checked), write ``_stats.json``; returns it."""
        from codecorpus.pipeline import bodies

        memory = usage.memory.summary() if usage is not None else {}
        stats = {"stage": stage, "hash": self.hashes[stage], **bodies.aggregate_stats(list(results)), "memory": memory}
        atomic_write_bytes(self.run.stats(stage), json.dumps(stats, indent=2, sort_keys=True).encode())
        return stats

    def stats_of(self, stage: str) -> dict[str, Any]:
        return json.loads(ensure_local(self.run.stats(stage)).read_text())

    def read_meta(self, stage: str) -> dict[str, Any]:
        try:
            return json.loads(ensure_local(self.run.stage_meta(stage)).read_text())
        except (OSError, ValueError):
            return {}

    def _require_complete(self, stage: str, upstream: str) -> None:
        meta = self.read_meta(upstream)
        if meta.get("hash") != self.hashes[upstream] or not store.exists(self.run.stats(upstream)):
            raise RecipeError(
                f"stage {stage} needs stage {upstream} complete under the current recipe in {self.run.root}: "
                f"run without --only, or with --until {upstream} first"
            )

    def _stage_dirs(self, spec: StageSpec) -> tuple[Path, ...]:
        return (self.run.stage_dir(spec.name), *(self.run.root / rel for rel in spec.output_dirs))

"""Run a recipe on Ray: the specs of its pipeline in order, each a set of jobs, resumable.

The executor is generic: it knows the stage kinds of ``pipeline/spec.py`` (source, map
annotator and filter, global phases, sink), never a stage's name. It plans the run (the
source's shards and every stage's chained hash), then runs the selected stages one after
the other, each to its end before the next begins::

    PRETRAIN = (INGEST, LANGID, FILTERS, DEDUP, TOKENIZE, PACK)      pipeline/pipelines.py

Three modules do the work, each with its own contract:

- ``lifecycle``: a stage's hash, its reset when made under another hash, its upstream's check,
  the markers that make a rerun resume, its stats and the conservation check;
- ``scheduler``: a phase's jobs as Ray tasks, retried, at most ``max_tasks`` at once, skipping
  those the lifecycle knows done;
- ``progress``: the bars a phase shows.

A stage's planning code sees the run through ``StageRun`` (``pipeline/spec.py``). The report
is the CLI's business, after the run. This module, ``scheduler``, ``session`` (this process's
Ray), ``launch`` (Ray's start beside the recipe's load and plan), ``remote`` (the task wrapper
and the warm-up, all a worker imports of the runtime), ``parallel`` (independent calls, as
``codecorpus evaluate`` grades) and ``pool`` (rollout sessions as actors) are the only modules
that import ray.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from rich.console import Console

from codecorpus import schema
from codecorpus.config import Recipe, RecipeError, recipe_to_yaml
from codecorpus.pipeline.pipelines import check_stages, enabled_specs, pipeline_of
from codecorpus.pipeline.spec import MAP_KINDS, Job, StageSpec
from codecorpus.runtime import scheduler
from codecorpus.runtime.lifecycle import Lifecycle, known, stage_hashes
from codecorpus.runtime.scheduler import PlanTasks, Scheduler
from codecorpus.runtime.session import PipelineError, init_ray, stop_ray, stop_ray_in_background
from codecorpus.storage.atomic import OutputWriteError, atomic_write_bytes

if TYPE_CHECKING:
    from codecorpus.pipeline.bodies import JobContext

# codecorpus.pipeline.bodies (pyarrow.compute, numpy) is imported where it is used, once the run
# runs: ``launch.start`` imports it beside Ray's start (``remote.WARM_MODULES``), not before it.


@dataclass
class StageOutcome:
    name: str
    stats: dict[str, Any]
    seconds: float
    skipped_jobs: int = 0
    ran_jobs: int = 0
    task_seconds: float = 0.0
    """Wall seconds the stage's jobs spent inside their bodies, summed over jobs (every phase)."""
    cpu_seconds: float = 0.0
    """CPU seconds of those job bodies (the work itself, whatever else the machine runs)."""


@dataclass
class RunResult:
    run_dir: Path
    stages: list[StageOutcome] = field(default_factory=list)
    seconds: float = 0.0
    plan_seconds: float = 0.0
    ray_seconds: float = 0.0
    cpus: int = 1


class Executor:
    """Runs a recipe's stages; ``run_pipeline`` is the whole run, ``stage_run(name)`` one stage's view."""

    def __init__(self, recipe: Recipe, run_dir: Path, console: Console | None = None, quiet: bool = False,
                 max_tasks: int | None = None):
        self.recipe = recipe
        self.run = schema.RunPaths(Path(run_dir))
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.specs: dict[str, StageSpec] = {s.name: s for s in enabled_specs(recipe)}
        self.scheduler = Scheduler(max_tasks, self.console, quiet)
        self.shards: list[Any] = []
        """The source's planned shards (``plan``)."""
        self.hashes: dict[str, str] = {}
        """Every enabled stage's chained hash (``plan``)."""
        self.lifecycle = Lifecycle(self.run, self.hashes)
        self.plan_seconds = 0.0
        self.ray_seconds = 0.0
        self.ray_ready = threading.Event()
        """Set once Ray's start has returned: planning that needs tasks waits on it when it runs
        beside that start (``launch.start``)."""
        self.ray_ready.set()
        self.owns_ray = False
        """Whether ``launch.start`` started (or joined) Ray for this executor, rather than finding it running
        (a test session's): the CLI stops only a Ray its command started."""

    @property
    def max_tasks(self) -> int | None:
        return self.scheduler.max_tasks

    # --- the pipeline -------------------------------------------------------------

    def run_pipeline(self, only: str | None = None, until: str | None = None) -> RunResult:
        selected = select_stages(list(self.specs), only, until)
        result = RunResult(self.run.root, cpus=int(ray.cluster_resources().get("CPU", 1)))
        t0 = time.perf_counter()
        check_stages(self.recipe)  # a stage that cannot run fails before any work
        if not self.hashes:
            self.plan()
        result.plan_seconds, result.ray_seconds = self.plan_seconds, self.ray_seconds
        try:  # fail before any work when the run directory cannot be written at all
            atomic_write_bytes(self.run.recipe, recipe_to_yaml(self.recipe).encode())
        except OutputWriteError as err:
            raise PipelineError(str(err)) from None
        for name in selected:
            s0 = time.perf_counter()
            ran, skipped = self._run_stage(self.specs[name])
            stats = self.stats_of(name)
            usage = self.scheduler.usage.pop(name, None)
            wall, cpu = (usage.wall, usage.cpu) if usage is not None else (0.0, 0.0)
            result.stages.append(StageOutcome(name, stats, time.perf_counter() - s0, skipped, ran, wall, cpu))
        result.seconds = time.perf_counter() - t0
        return result

    def _run_stage(self, spec: StageSpec) -> tuple[int, int]:
        """Begin a stage, run its jobs by its kind, finish it. Returns (ran, skipped) output jobs."""
        self.lifecycle.begin(spec, self.upstream_of(spec.name))
        stage = self.stage_run(spec.name)
        try:
            if spec.kind == "source":
                results = stage.run_output_jobs(spec.name, spec.source_jobs(stage))
            elif spec.kind in MAP_KINDS:
                job = shard_job(stage, spec.map_fn(stage))
                results = stage.run_output_jobs(spec.name, [job(i) for i in range(stage.shard_count(stage.upstream))])
            else:
                results = spec.phases(stage)
        except PipelineError:  # a stopped run leaves no partial file on this node
            self.lifecycle.remove_partial(spec)
            raise
        self.lifecycle.finish(spec.name, results, self.scheduler.usage.get(spec.name))
        return stage.ran, stage.skipped

    def stage_run(self, name: str) -> _StageRun:
        """What a stage's planning code sees of this run (``pipeline/spec.py`` ``StageRun``)."""
        if not self.hashes:
            self.plan()
        return _StageRun(self, self.specs[name])

    def plan(self) -> None:
        """The source's shards (a stat walk, no reads) and every stage's chained hash.

        Needs no Ray: the CLI runs it while Ray starts.
        """
        t0 = time.perf_counter()
        source = next(iter(self.specs.values()))
        if source.kind != "source":
            raise RecipeError(f"the first stage of this recipe, {source.name}, reads nothing: enable its source")
        self.shards, plan_hash = source.plan(self.recipe, PlanTasks(self.run, self.ray_ready, self.max_tasks))
        self.hashes.clear()
        self.hashes.update(stage_hashes(self.recipe, plan_hash))
        self.plan_seconds = time.perf_counter() - t0

    def run_jobs(self, label: str, jobs: Sequence[Job], ctx: JobContext) -> tuple[int, int, list[dict]]:
        """Run a phase's jobs on Ray, skipping those whose marker holds the stage hash:
        (ran, skipped, their stats in job order)."""
        return self.scheduler.run_jobs(label, ctx.stage, jobs, functools.partial(known, ctx))

    # --- what a stage may ask ----------------------------------------------------

    def upstream_of(self, stage: str) -> str | None:
        spec = self.specs[stage]
        if spec.kind == "source":
            return None
        if spec.upstream is not None:
            return spec.upstream
        names = list(self.specs)
        return names[names.index(stage) - 1]

    def shard_count(self, stage: str) -> int:
        return int(self.stats_of(stage)["shards"])

    def stats_of(self, stage: str) -> dict[str, Any]:
        return self.lifecycle.stats_of(stage)


class _StageRun:
    """One stage's view of the run (``pipeline/spec.py`` ``StageRun``): its config, hash, upstream,
    and the executor's job runner."""

    def __init__(self, executor: Executor, spec: StageSpec):
        from codecorpus.pipeline.bodies import JobContext

        self._ex = executor
        self.spec = spec
        self.name = spec.name
        self.recipe = executor.recipe
        self.run = executor.run
        self.hashes = executor.hashes
        self.ctx = JobContext(executor.run, spec.name, executor.hashes[spec.name])
        self.upstream = executor.upstream_of(spec.name)
        self.shards = executor.shards
        self.quiet = executor.quiet
        self.ran = self.skipped = 0

    @property
    def cfg(self) -> Any:
        return self.spec.config(self.recipe, self.name)

    def upstream_of(self, stage: str) -> str:
        return self._ex.upstream_of(stage)

    def shard_count(self, stage: str) -> int:
        return self._ex.shard_count(stage)

    def stats_of(self, stage: str) -> dict[str, Any]:
        return self._ex.stats_of(stage)

    def run_phase(self, label: str, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        return self._ex.run_jobs(label, jobs, self.ctx)[2]

    def run_output_jobs(self, label: str, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        ran, skipped, results = self._ex.run_jobs(label, jobs, self.ctx)
        self.ran, self.skipped = self.ran + ran, self.skipped + skipped
        return results

    def call(self, point: str, fn: Callable[..., Any], *args: Any) -> Any:
        return scheduler.call(point, fn, *args)

    def say(self, text: str) -> None:
        self._ex.console.print(text, highlight=False, markup=False)

    def warn(self, text: str) -> None:
        self._ex.console.print(f"[yellow]{text}[/]", highlight=False)


def shard_job(stage: _StageRun, fn: Callable[..., Any]) -> Callable[[int], Job]:
    """A map stage's job of shard ``i``: ``fn`` over the upstream's part ``i``."""
    from codecorpus.pipeline import bodies

    def job(i: int) -> Job:
        return Job(schema.shard_name(i), bodies.map_job, (stage.ctx, i, stage.upstream, fn),
                   (str(stage.run.part(stage.upstream, i)),))

    return job


def select_stages(enabled: Sequence[str], only: str | None, until: str | None) -> list[str]:
    for flag, value in (("--only", only), ("--until", until)):
        if value is not None and value not in enabled:
            known_stages = ", ".join(enabled)
            raise RecipeError(f"{flag} {value}: not a stage of this recipe (its stages: {known_stages})")
    if only is not None:
        return [only]
    if until is not None:
        return list(enabled[: list(enabled).index(until) + 1])
    return list(enabled)


__all__ = [
    "Executor", "PipelineError", "init_ray", "pipeline_of", "select_stages", "stage_hashes",
    "stop_ray", "stop_ray_in_background",
]

"""What a stage is to the executor: a ``StageSpec``, and the jobs its work is made of.

A spec is declared once, beside the stage's code (``langid/spec.py``, ``dedup/spec.py``
...), and a pipeline is an ordered tuple of specs (``pipeline/pipelines.py``). The
executor knows the five kinds, never a stage's name:

- ``source``: makes the first shards from the recipe's sources (``plan`` +
  ``source_jobs``); one job per shard, each writing ``part-N`` and its drop log.
- ``annotator`` / ``filter``: a map over the upstream shards; ``map_fn`` returns the
  pure ``table -> MapResult`` function the executor ships to every shard. Annotators
  add columns, filters drop rows with a reason.
- ``global``: phases (shuffles) that end in one output shard per input shard;
  ``phases`` drives them through a ``StageRun`` and returns the output jobs' stats.
- ``sink``: like ``global``, but writes output sets (``shards/``, manifests) instead
  of parts; a changed sink removes those too.

A stage's hash is chained: the previous stage's hash, its name, its config, and
``hash_parts(recipe)`` (files or code it reads beyond its config). A job is a name (its
marker), a Ray-free function (its body), its arguments, and the files it reads (named in
the error when it fails); the runtime runs each job as one Ray task.

Words: a *job* is a unit of a stage's work and its *body* the function it runs (the
``bodies`` modules); a *Ray task* is how the runtime runs a job; a *task* alone is an
RL task, what the ``tasks`` part mines and the ``envs`` part verifies.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from codecorpus import schema

if TYPE_CHECKING:  # type names only: the recipe is built from the parts' configs, and declaring
    # a spec imports neither pyarrow nor MapResult's module (pyarrow.compute, numpy)
    import pyarrow as pa

    from codecorpus.config import Recipe
    from codecorpus.pipeline.bodies import JobContext
    from codecorpus.stage import MapResult

Kind = Literal["source", "annotator", "filter", "global", "sink"]
MAP_KINDS: tuple[Kind, ...] = ("annotator", "filter")


@dataclass(frozen=True)
class Job:
    """One unit of a stage's work: ``fn(*args)`` on a worker, done when its marker ``name`` holds
    the stage hash."""

    name: str
    fn: Callable[..., dict[str, Any]]
    args: tuple[Any, ...] = ()
    reads: tuple[str, ...] = ()
    """The files the job reads, for the error message when it fails."""
    weight: int | None = None
    """The bytes the job reads, where its planner knows them (else the sizes of ``reads``
    found on the driver's node): the executor starts a stage's heaviest jobs first."""

    def describe_reads(self) -> str:
        return named(self.reads, "files") if self.reads else "see the job arguments"


class StageRun(Protocol):
    """What a stage's planning code may ask of the run it is part of (the executor)."""

    recipe: Recipe
    name: str
    run: schema.RunPaths
    ctx: JobContext
    upstream: str | None
    hashes: Mapping[str, str]
    shards: Sequence[Any]
    quiet: bool

    @property
    def cfg(self) -> Any: ...

    def upstream_of(self, stage: str) -> str: ...

    def shard_count(self, stage: str) -> int: ...

    def stats_of(self, stage: str) -> dict[str, Any]: ...

    def run_phase(self, label: str, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        """Run a phase's jobs (skipping those done); their stats, in job order."""
        ...

    def run_output_jobs(self, label: str, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        """Like ``run_phase``, for the jobs that write the stage's output (counted as its ran and skipped jobs)."""
        ...

    def call(self, point: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run one function on a worker and wait for it (no marker)."""
        ...

    def say(self, text: str) -> None: ...

    def warn(self, text: str) -> None: ...


PLAN_INLINE_ENV = "CODECORPUS_PLAN_INLINE"
"""How many repositories a source stage plans on the driver before it plans them in tasks (each
stage has its default, ``plan_inline``; ``0``: always in tasks, e.g. to prove a run's bytes the
same either way)."""
MAX_PLAN_TASKS = 4096


def plan_inline(default: int) -> int:
    """The most repositories planned on the driver: ``PLAN_INLINE_ENV`` when set, else ``default``."""
    return int(os.environ.get(PLAN_INLINE_ENV) or default)


def plan_batches(items: Sequence[Any], per_task: int) -> list[Sequence[Any]]:
    """``items`` cut into planning tasks of ``per_task`` (more a task when that would make over
    ``MAX_PLAN_TASKS`` tasks), in order."""
    size = max(per_task, math.ceil(len(items) / MAX_PLAN_TASKS))
    return [items[i:i + size] for i in range(0, len(items), size)]


class PlanTasks(Protocol):
    """What a source's planning may ask of the run: its paths, and functions run as tasks.

    The tasks have no markers: a plan is made again by every run (a stat walk).
    """

    run: schema.RunPaths

    def map(self, label: str, fn: Callable[[Any], Any], items: Sequence[Any],
            describe: Callable[[Any], str] | None = None) -> list[Any]:
        """``[fn(item) for item in items]``, each call one task, results in item order.

        ``describe(item)`` names what an item holds (``named``), for the error when its task fails.
        """
        ...


def named(names: Sequence[str], noun: str) -> str:
    """Some inputs in an error message: ``/a`` alone, or ``3 repositories, /a ... /c``."""
    if len(names) == 1:
        return names[0]
    return f"{len(names)} {noun}, {names[0]} ... {names[-1]}" if names else f"no {noun}"


class Located(Protocol):
    """A planning item that names its repository: a path or URL."""

    @property
    def location(self) -> str: ...


def repositories(batch: Sequence[Located]) -> str:
    """``named`` over a planning batch's repositories: ``PlanTasks.map``'s ``describe``."""
    return named([item.location for item in batch], "repositories")


def _no_parts(recipe: Recipe) -> list[Any]:
    return []


def _default_config(recipe: Recipe, name: str) -> Any:
    return getattr(recipe.stages, name, None)


@dataclass(frozen=True)
class StageSpec:
    """One stage, declared: the executor needs nothing else to plan, run and resume it.

    A spec in a pipeline list (``pipeline/pipelines.py``) is all the registration a stage has:
    its ``config_model`` is the recipe's ``stages.<name>`` section (a field of the recipe's
    ``stages:`` model, built from the specs), its ``name`` the ``--set <name>.key=...``
    shorthand and its place in the order, its ``config_paths`` the files the recipe's load
    resolves and preflight checks; the manifest's provenance lists it when it is enabled.
    """

    name: str
    kind: Kind
    config_model: type | None
    """The frozen pydantic model of ``stages.<name>``; None: the recipe has no such key (``config``
    then gives the stage its config)."""
    map_fn: Callable[[StageRun], Callable[[pa.Table], MapResult]] | None = None
    """Map kinds: the pure shard function (configured), built once on the driver when the stage
    begins (its upstream complete), and shipped to every shard's job."""
    phases: Callable[[StageRun], list[dict[str, Any]]] | None = None
    """Global and sink kinds: run the phases, return the output jobs' stats for ``_stats.json``."""
    plan: Callable[[Recipe, PlanTasks], tuple[list[Any], str]] | None = None
    """Source kind: the shards of the recipe's sources, and the plan's hash (a stat walk, no reads);
    a large plan may list its inputs in tasks."""
    source_jobs: Callable[[StageRun], list[Job]] | None = None
    """Source kind: one job per planned shard."""
    hash_parts: Callable[[Recipe], list[Any]] = _no_parts
    """What the stage's output depends on beyond its config and the stages before it."""
    config: Callable[[Recipe, str], Any] = _default_config
    """The stage's config in a recipe (None: the stage is not enabled)."""
    config_paths: tuple[str, ...] = field(default=())
    """The files its config names, as key paths under ``stages.<name>`` (``decontam.files.*.path``;
    ``*`` is every item of a list): relative to the recipe's folder when it loads, checked to
    exist before any work (``preflight.py``)."""
    upstream: str | None = None
    """The stage whose shards it reads; None: the enabled stage before it."""
    output_dirs: tuple[str, ...] = field(default=())
    """Run-directory folders a sink owns beside its stage folder (``schema.SETS_DIR``: it writes
    output sets): removed on reset."""
    output_files: tuple[str, ...] = field(default=())
    """Run-directory files a sink owns (``manifest.json``): removed on reset."""
    check: Callable[[Recipe], None] | None = None
    """Raises RecipeError before any work when the stage cannot run (e.g. a bad ``use:``)."""

    def __post_init__(self) -> None:
        needs = {
            "source": ("plan", "source_jobs"), "annotator": ("map_fn",), "filter": ("map_fn",),
            "global": ("phases",), "sink": ("phases",),
        }[self.kind]
        missing = [k for k in needs if getattr(self, k) is None]
        if missing:
            raise TypeError(f"stage spec {self.name} (kind {self.kind}) needs {', '.join(missing)}")

    @property
    def writes_sets(self) -> bool:
        """Whether the stage writes output sets: it owns ``schema.SETS_DIR``. A set's token figures
        are its own (its manifest's), never the stage's: a document goes into every set, copies
        included."""
        return schema.SETS_DIR in self.output_dirs


Pipeline = tuple[StageSpec, ...]

"""Run a recipe on Ray: the specs of its pipeline in order, each a set of tasks, resumable.

The executor is generic: it knows the stage kinds of ``pipeline/spec.py`` (source, map
annotator and filter, global phases, sink), never a stage's name. For each enabled
spec it plans the jobs, runs them on Ray (retries, progress, per-task memory),
skips jobs whose marker holds the stage's hash, and writes the stage's stats::

    PRETRAIN = (INGEST, LANGID, FILTERS, DEDUP, TOKENIZE, PACK)      pipeline/pipelines.py

Each stage has a hash chained from the hash before it, so a changed setting
redoes that stage and every later one. The report is the CLI's business, after the
run. With ``session`` (this process's Ray), ``local_start`` (a private local Ray's lean
start), ``launch`` (Ray's start beside the recipe's load and plan) and ``remote`` (the task
wrapper and the warm-up, all a worker imports of the runtime), the only modules that import ray.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from codecorpus import schema
from codecorpus.config import STAGE_ORDER, Recipe, RecipeError, config_hash, recipe_to_yaml
from codecorpus.pipeline.pipelines import check_stages, enabled_specs, pipeline_of
from codecorpus.pipeline.spec import MAP_KINDS, Job, StageSpec
from codecorpus.runtime import memory
from codecorpus.runtime.remote import RUNTIME_KEYS, TASK_RETRIES, TASK_TIME, submit_task
from codecorpus.runtime.session import (
    PipelineError,
    in_thread,
    init_ray,
    stop_ray,
    stop_ray_in_background,
)
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import OutputWriteError, atomic_write_bytes, remove_stale_temps
from codecorpus.storage.faults import checkpoint
from codecorpus.storage.mirror import ensure_local

if TYPE_CHECKING:
    from codecorpus.pipeline.tasks import TaskContext

# codecorpus.pipeline.tasks (pyarrow.compute, numpy) is imported where it is used, once the run
# runs: ``launch.start`` imports it beside Ray's start (WARM_MODULES), not before it.

@dataclass
class StageOutcome:
    name: str
    stats: dict[str, Any]
    seconds: float
    skipped_tasks: int = 0
    ran_tasks: int = 0
    task_seconds: float = 0.0
    """Wall seconds the stage's tasks spent inside their bodies, summed over tasks (every phase)."""
    cpu_seconds: float = 0.0
    """CPU seconds of those task bodies (the work itself, whatever else the machine runs)."""


@dataclass
class RunResult:
    run_dir: Path
    stages: list[StageOutcome] = field(default_factory=list)
    seconds: float = 0.0
    plan_seconds: float = 0.0
    ray_seconds: float = 0.0
    cpus: int = 1


WARM_MODULES = ("codecorpus.pipeline.tasks", "pyarrow.parquet")
"""The shared task kinds and the Parquet reader; each stage adds its own (``StageSpec.imports``)."""


def warm_modules(specs: Iterable[StageSpec]) -> list[str]:
    """What the tasks of these stages import: the shared modules, then each stage's spec and task bodies."""
    return list(dict.fromkeys([*WARM_MODULES, *(m for spec in specs for m in spec.imports())]))


STOP_WAIT_SECONDS = 60.0
"""How long a stopping run waits for its cancelled tasks to unwind."""


def _stop(refs: list[ray.ObjectRef]) -> None:
    """Cancel tasks still running and wait for them to end.

    A cancelled task gets KeyboardInterrupt, so its writers remove their temporary files
    (``atomic_writer``); without the wait, Ray's shutdown could kill it mid-write.
    """
    for ref in refs:
        ray.cancel(ref)
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=STOP_WAIT_SECONDS)


class Executor:
    """Runs a recipe's stages; ``run_pipeline`` is the whole run, ``stage_run(name)`` one stage's view."""

    def __init__(self, recipe: Recipe, run_dir: Path, console: Console | None = None, quiet: bool = False,
                 max_tasks: int | None = None):
        self.recipe = recipe
        self.max_tasks = max_tasks
        """The most tasks the run keeps at once (None: as many as Ray's CPUs take): ``--workers`` on a
        joined cluster, whose CPUs the run shares."""
        self.run = schema.RunPaths(Path(run_dir))
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self.specs: dict[str, StageSpec] = {s.name: s for s in enabled_specs(recipe)}
        self._shards: list = []
        self._hashes: dict[str, str] = {}
        self._memory: dict[str, memory.StageMemory] = {}
        self._task_seconds: dict[str, list[float]] = {}
        self._plan_seconds = 0.0
        self.ray_seconds = 0.0
        self._prefetched: dict[str, Future[None]] = {}
        self.ray_ready = threading.Event()
        """Set once Ray's start has returned: planning that needs tasks waits on it when it runs
        beside that start (``launch.start``)."""
        self.ray_ready.set()
        self.owns_ray = False
        """Whether ``launch.start`` started (or joined) Ray for this executor, rather than finding it running
        (a test session's): the CLI stops only a Ray its command started."""

    def prefetch(self, stages: Iterable[str]) -> None:
        """Start the ``prefetch`` work of these stages (``StageSpec.prefetch``), each in its own
        daemon thread: a stage waits for its own only, and a process that ends (a failure, Ctrl-C,
        ``--until``) does not wait for any."""
        for name in stages:
            spec = self.specs[name]
            if spec.prefetch is not None and name not in self._prefetched:
                self._prefetched[name] = in_thread(f"codecorpus-prefetch-{name}", spec.prefetch, self.recipe)

    # --- the pipeline -------------------------------------------------------------

    def run_pipeline(self, only: str | None = None, until: str | None = None) -> RunResult:
        selected = select_stages(list(self.specs), only, until)
        result = RunResult(self.run.root, cpus=int(ray.cluster_resources().get("CPU", 1)))
        t0 = time.perf_counter()
        check_stages(self.recipe)  # a stage that cannot run fails before any work
        if not self._hashes:
            self.plan()
        result.plan_seconds, result.ray_seconds = self._plan_seconds, self.ray_seconds
        try:  # fail before any work when the run directory cannot be written at all
            atomic_write_bytes(self.run.recipe, recipe_to_yaml(self.recipe).encode())
        except OutputWriteError as err:
            raise PipelineError(str(err)) from None
        for name in selected:
            s0 = time.perf_counter()
            ran, skipped = self._run_stage(self.specs[name])
            stats = json.loads(ensure_local(self.run.stats(name)).read_text())
            wall, cpu = self._task_seconds.get(name, (0.0, 0.0))
            result.stages.append(StageOutcome(name, stats, time.perf_counter() - s0, skipped, ran, wall, cpu))
        result.seconds = time.perf_counter() - t0
        return result

    def _run_stage(self, spec: StageSpec) -> tuple[int, int]:
        """Plan and run one stage by its kind; write its stats. Returns (ran, skipped) output tasks."""
        from codecorpus.pipeline import tasks

        prefetched = self._prefetched.pop(spec.name, None)
        if prefetched is not None:
            prefetched.exception()  # waits; when it failed, the stage meets (and reports) the error itself
        self._require_upstream(spec)
        self._prepare_stage_dir(spec)
        stage = self.stage_run(spec.name)
        try:
            if spec.kind == "source":
                results = stage.run_tasks(spec.name, spec.source_jobs(stage))
            elif spec.kind in MAP_KINDS:
                fn = spec.map_fn(stage)
                jobs = [
                    Job(schema.shard_name(i), tasks.map_task, (stage.task, i, stage.upstream, fn),
                        (str(self.run.part(stage.upstream, i)),))
                    for i in range(stage.shard_count(stage.upstream))
                ]
                results = stage.run_tasks(spec.name, jobs)
            else:
                results = spec.phases(stage)
        except PipelineError:  # a stopped run leaves no partial file on this node
            for directory in self._stage_dirs(spec):
                remove_stale_temps(directory)
            raise
        self._write_stats(spec.name, tasks.aggregate_stats(results))
        return stage.ran, stage.skipped

    def stage_run(self, name: str) -> _StageRun:
        """What a stage's planning code sees of this run (``pipeline/spec.py`` ``StageRun``)."""
        if not self._hashes:
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
        self._shards, plan_hash = source.plan(self.recipe, _PlanTasks(self))
        self._hashes = stage_hashes(self.recipe, plan_hash)
        self._plan_seconds = time.perf_counter() - t0

    # --- machinery ----------------------------------------------------------------

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
        return json.loads(ensure_local(self.run.stats(stage)).read_text())

    def _require_upstream(self, spec: StageSpec) -> None:
        up = self.upstream_of(spec.name)
        if up is None:
            return
        meta = self._read_stage_meta(up)
        if meta.get("hash") != self._hashes[up] or not store.exists(self.run.stats(up)):
            raise RecipeError(
                f"stage {spec.name} needs stage {up} complete under the current recipe in {self.run.root}: "
                f"run without --only, or with --until {up} first"
            )

    def _prepare_stage_dir(self, spec: StageSpec) -> None:
        """Remove a stage's outputs made under another recipe (and the sets a sink owns)."""
        if self._read_stage_meta(spec.name).get("hash") != self._hashes[spec.name]:
            store.remove_tree(self.run.stage_dir(spec.name))
            for rel in spec.output_dirs:
                store.remove_tree(self.run.root / rel)
            for rel in spec.output_files:
                store.remove_file(self.run.root / rel)
        for directory in self._stage_dirs(spec):
            remove_stale_temps(directory)
        meta = {"hash": self._hashes[spec.name]}
        atomic_write_bytes(self.run.stage_meta(spec.name), json.dumps(meta, sort_keys=True).encode())

    def _stage_dirs(self, spec: StageSpec) -> tuple[Path, ...]:
        return (self.run.stage_dir(spec.name), *(self.run.root / rel for rel in spec.output_dirs))

    def _read_stage_meta(self, stage: str) -> dict[str, Any]:
        try:
            return json.loads(ensure_local(self.run.stage_meta(stage)).read_text())
        except (OSError, ValueError):
            return {}

    def _write_stats(self, stage: str, stats: dict[str, Any]) -> None:
        stats = {"stage": stage, "hash": self._hashes[stage], **stats,
                 "memory": self._memory.pop(stage, memory.StageMemory()).summary()}
        atomic_write_bytes(self.run.stats(stage), json.dumps(stats, indent=2, sort_keys=True).encode())

    def run_jobs(self, label: str, jobs: Sequence[Job], ctx: TaskContext) -> tuple[int, int, list[dict]]:
        """Run jobs on Ray, skipping those whose marker holds the stage hash.

        Results come back in job order whatever order the tasks finish in.
        """
        from codecorpus.pipeline import tasks

        results: list[dict | None] = [None] * len(jobs)
        for i, job in enumerate(jobs):
            marker = tasks.read_marker(ctx, job.name)
            if marker is not None:
                results[i] = marker["stats"]
        waiting = heaviest_first(jobs, [i for i, result in enumerate(results) if result is None])
        skipped = len(jobs) - len(waiting)
        pending: dict[ray.ObjectRef, int] = {}

        def submit() -> None:
            while waiting and (self.max_tasks is None or len(pending) < self.max_tasks):
                i = waiting.popleft()
                pending[submit_task(f"{ctx.stage}:{jobs[i].name}", jobs[i].fn, *jobs[i].args)] = i

        submit()
        with self._progress() as progress:
            bar = progress.add_task(label, total=len(jobs), completed=skipped, rate="")
            rate = _Rate()
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(done[0])
                try:
                    results[i] = ray.get(done[0])
                except ray.exceptions.RayError as err:
                    _stop(list(pending))
                    raise PipelineError(_task_failure(ctx.stage, jobs[i], err)) from None
                measured = None
                if isinstance(results[i], dict):
                    measured = results[i].pop("memory", None)
                    wall, cpu = results[i].pop(TASK_TIME, (0.0, 0.0))
                    spent = self._task_seconds.setdefault(ctx.stage, [0.0, 0.0])
                    spent[0] += wall
                    spent[1] += cpu
                    rate.add(results[i])
                self._memory.setdefault(ctx.stage, memory.StageMemory()).add(label, jobs[i].name, measured)
                checkpoint(f"after:{ctx.stage}:{jobs[i].name}")
                progress.update(bar, advance=1, rate=rate.text())
                submit()
        return len(jobs) - skipped, skipped, [r for r in results if r is not None]

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=self.console, disable=self.quiet, transient=False,
        )


class _Rate:
    """Throughput of one step's finished tasks (input MB/s and documents/s) since it started."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.bytes = self.docs = 0

    def add(self, stats: dict[str, Any]) -> None:
        self.bytes += int(stats.get("bytes_in", 0) or 0)
        self.docs += int(stats.get("rows_in", stats.get("rows", 0)) or 0)

    def text(self) -> str:
        seconds = max(time.perf_counter() - self.t0, 1e-6)
        parts = [f"{self.bytes / 1e6 / seconds:7.1f} MB/s"] if self.bytes else []
        if self.docs:
            parts.append(f"{self.docs / seconds:8,.0f} docs/s")
        return "  ".join(parts)


class _PlanTasks:
    """A source's planning tasks (``pipeline/spec.py`` ``PlanTasks``): no markers, results in order."""

    def __init__(self, executor: Executor):
        self.run = executor.run
        self._ray_ready = executor.ray_ready
        self._max_tasks = executor.max_tasks

    def map(self, label: str, fn: Callable[[Any], Any], items: Sequence[Any],
            describe: Callable[[Any], str] | None = None) -> list[Any]:
        self._ray_ready.wait()  # planning may run beside Ray's start (``launch.start``)
        if not ray.is_initialized():  # its start failed: a task now would start a default Ray
            raise PipelineError(f"planning {label} needs Ray, and Ray did not start")
        window = self._max_tasks or len(items) or 1
        in_flight: deque[ray.ObjectRef] = deque()
        results = []
        for i in range(len(items)):
            for j in range(i + len(in_flight), min(i + window, len(items))):
                in_flight.append(submit_task(f"{label}:{j}", fn, items[j]))
            try:
                result = ray.get(in_flight.popleft())
            except ray.exceptions.RayError as err:
                _stop(list(in_flight))
                held = (describe(items[i]),) if describe is not None else ()
                raise PipelineError(_task_failure("planning", Job(f"{label}:{i}", fn, reads=held), err)) from None
            if isinstance(result, dict):  # the runtime's, not the plan's
                result = {k: v for k, v in result.items() if k not in RUNTIME_KEYS}
            results.append(result)
        return results


class _StageRun:
    """One stage's view of the run: its config, hash, upstream, and the executor's job runner."""

    def __init__(self, executor: Executor, spec: StageSpec):
        self._ex = executor
        self.spec = spec
        self.name = spec.name
        self.recipe = executor.recipe
        self.run = executor.run
        self.hashes = executor._hashes
        from codecorpus.pipeline.tasks import TaskContext

        self.task = TaskContext(executor.run, spec.name, executor._hashes[spec.name])
        self.upstream = executor.upstream_of(spec.name)
        self.shards = executor._shards
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
        return self._ex.run_jobs(label, jobs, self.task)[2]

    def run_tasks(self, label: str, jobs: Sequence[Job]) -> list[dict[str, Any]]:
        ran, skipped, results = self._ex.run_jobs(label, jobs, self.task)
        self.ran, self.skipped = self.ran + ran, self.skipped + skipped
        return results

    def call(self, point: str, fn: Callable[..., Any], *args: Any) -> Any:
        return ray.get(submit_task(point, fn, *args))

    def say(self, text: str) -> None:
        self._ex.console.print(text, highlight=False, markup=False)

    def warn(self, text: str) -> None:
        self._ex.console.print(f"[yellow]{text}[/]", highlight=False)


def heaviest_first(jobs: Sequence[Job], waiting: Iterable[int]) -> deque[int]:
    """The order to start these jobs in: the heaviest first (``Job.weight``), ties in job order.

    Longest-first is the classic cure for a stage's tail: with a light task last, the
    other workers wait less for the stage's last one. Replaying the bench corpus's task
    times (``bench/e2e_vs_datatrove.py``, 2 workers), each phase's tasks in job order sum
    to 8.04 s of makespan, 7.79 s longest-first; bytes read are the proxy for time here.
    Outputs do not depend on the order: each task writes its own files and results come
    back in job order.
    """
    return deque(sorted(waiting, key=lambda i: -_weight(jobs[i])))


def _weight(job: Job) -> int:
    if job.weight is not None:
        return job.weight
    total = 0
    for read in job.reads:
        with contextlib.suppress(OSError, ValueError):
            path = store.node_path(read)
            if path.is_file():
                total += path.stat().st_size
    return total


def _task_failure(stage: str, job: Job, err: Exception) -> str:
    cause = getattr(err, "cause", None) or err
    return (
        f"stage {stage}, task {job.name} failed after {TASK_RETRIES} retries; input: {job.describe_reads()}; "
        f"error: {type(cause).__name__}: {cause}. Completed shards are kept: fix the cause and rerun "
        "the same command to resume."
    )


def stage_hashes(recipe: Recipe, plan_hash: str) -> dict[str, str]:
    """Each enabled stage's hash, chained: a change upstream changes every hash after it."""
    prev = config_hash([s.model_dump(mode="json") for s in recipe.sources], recipe.seed, plan_hash)
    out: dict[str, str] = {}
    for spec in enabled_specs(recipe):
        parts: list[Any] = [prev, spec.name, spec.config(recipe, spec.name), *spec.hash_parts(recipe)]
        prev = out[spec.name] = config_hash(*parts)
    return out


def select_stages(enabled: Sequence[str], only: str | None, until: str | None) -> list[str]:
    for flag, value in (("--only", only), ("--until", until)):
        if value is not None and value not in enabled:
            known = ", ".join(enabled)
            raise RecipeError(f"{flag} {value}: not a stage of this recipe (its stages: {known})")
    if only is not None:
        return [only]
    if until is not None:
        return list(enabled[: list(enabled).index(until) + 1])
    return list(enabled)


__all__ = [
    "STAGE_ORDER", "Executor", "PipelineError", "init_ray", "pipeline_of", "select_stages", "stage_hashes",
    "stop_ray", "stop_ray_in_background",
]

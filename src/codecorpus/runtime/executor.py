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
import itertools
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
        self._next: dict[str, str] = {}
        """The stage run after each selected stage in this run."""
        self._followers: dict[str, _Follower] = {}
        """The stages of this run prepared to start before they begin (``prepare_follower``): their
        directory is ready and their tasks may be writing there; a map stage runs its head's jobs."""
        self._early: dict[str, dict[str, ray.ObjectRef]] = {}
        """Per stage, its head jobs started before it began (``_Follower``), by job name."""
        self._early_running: set[ray.ObjectRef] = set()
        """Those of them not known to be done: they count against ``max_tasks``."""
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
        self._next = dict(itertools.pairwise(selected))
        self._followers = {}
        try:
            for name in selected:
                s0 = time.perf_counter()
                ran, skipped = self._run_stage(self.specs[name])
                stats = json.loads(ensure_local(self.run.stats(name)).read_text())
                wall, cpu = self._task_seconds.get(name, (0.0, 0.0))
                result.stages.append(StageOutcome(name, stats, time.perf_counter() - s0, skipped, ran, wall, cpu))
        except BaseException:  # a stage started early does not run on past its run
            self._stop_early()
            raise
        result.seconds = time.perf_counter() - t0
        return result

    def _run_stage(self, spec: StageSpec) -> tuple[int, int]:
        """Plan and run one stage by its kind; write its stats. Returns (ran, skipped) output tasks."""
        from codecorpus.pipeline import tasks

        prefetched = self._prefetched.pop(spec.name, None)
        if prefetched is not None:
            prefetched.exception()  # waits; when it failed, the stage meets (and reports) the error itself
        self._require_upstream(spec)
        follower = self._followers.get(spec.name)
        if follower is None:  # else its early tasks may be writing there now
            self._prepare_stage_dir(spec)
        stage = self.stage_run(spec.name)
        try:
            if spec.kind == "source":
                results = stage.run_tasks(spec.name, spec.source_jobs(stage))
            elif spec.kind in MAP_KINDS:
                job = follower.head if follower is not None else _map_head(stage, spec.map_fn(stage))
                results = stage.run_tasks(spec.name, [job(i) for i in range(stage.shard_count(stage.upstream))])
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

    def prepare_follower(self, stage: str, outputs: Sequence[Job]) -> _Follower | None:
        """The stage after ``stage`` in this run, ready to start its first phase shard by shard as
        these output tasks of ``stage`` (job ``i`` writes part ``i``) finish: its head
        (``StageSpec.head``; a map stage's map job, built here once), with the stage's directory
        prepared now, before any of its tasks write there.

        None when there is no such stage, when its head needs the whole upstream, when its
        driver-side work (``prefetch``) is not ready yet, or when building its head fails: it then
        starts when ``stage`` ends (and meets that error itself).
        """
        name = self._next.get(stage)
        if name is None or name in self._followers or self.upstream_of(name) != stage:
            return None
        if any(job.name != schema.shard_name(i) for i, job in enumerate(outputs)):
            return None
        spec = self.specs[name]
        prefetched = self._prefetched.get(name)
        if prefetched is not None and (not prefetched.done() or prefetched.exception() is not None):
            return None
        run = self.stage_run(name)
        try:
            if spec.kind in MAP_KINDS:
                head = None if spec.map_needs_upstream(self.recipe) else _map_head(run, spec.map_fn(run))
            else:
                head = spec.head(run) if spec.head is not None else None
        except Exception:  # only a head start: the stage meets the error itself when it begins
            return None
        if head is None:
            return None
        self._prepare_stage_dir(spec)
        follower = self._followers[name] = _Follower(run.task, head)
        return follower

    def run_jobs(self, label: str, jobs: Sequence[Job], ctx: TaskContext,
                 follower: _Follower | None = None) -> tuple[int, int, list[dict]]:
        """Run jobs on Ray, skipping those whose marker holds the stage hash.

        Results come back in job order whatever order the tasks finish in. A job started
        before its stage began (a ``follower``'s) is waited for, not started again. With a
        ``follower``, the next stage's head job of shard ``i`` starts as soon as job ``i`` is
        done (or at once when its marker was found), after this phase's own jobs are started;
        in a run capped by ``max_tasks``, those not started by the phase's end are left to their stage.
        """
        results, pending = self._known_results(label, jobs, ctx)
        skipped = sum(result is not None for result in results)
        running = set(pending.values())
        waiting = heaviest_first(jobs, [i for i, result in enumerate(results) if result is None and i not in running])
        done_shards = deque(i for i, result in enumerate(results) if result is not None) if follower else deque()

        def room(own: bool) -> bool:  # the next stage's early jobs count; one of the phase's own always runs
            if self.max_tasks is None or (own and not pending):
                return True
            return len(pending) + len(self._early_running) < self.max_tasks

        def submit() -> None:
            while waiting and room(own=True):
                i = waiting.popleft()
                pending[submit_task(f"{ctx.stage}:{jobs[i].name}", jobs[i].fn, *jobs[i].args)] = i
            while follower is not None and done_shards and not waiting and room(own=False):
                self._start_early(follower, done_shards.popleft())

        submit()
        with self._progress() as progress:
            bar = progress.add_task(label, total=len(jobs), completed=skipped, rate="")
            rate = _Rate()
            while pending:
                done, _ = ray.wait([*pending, *self._early_running], num_returns=1)
                if done[0] not in pending:  # a next stage's job: its stage reads it
                    self._early_running.discard(done[0])
                    submit()
                    continue
                i = pending.pop(done[0])
                try:
                    results[i] = self._collect(label, ctx.stage, jobs[i].name, done[0], rate)
                except ray.exceptions.RayError as err:
                    self._stop_early(list(pending))
                    raise PipelineError(_task_failure(ctx.stage, jobs[i], err)) from None
                if follower is not None:
                    done_shards.append(i)
                checkpoint(f"after:{ctx.stage}:{jobs[i].name}")
                progress.update(bar, advance=1, rate=rate.text())
                submit()
        return len(jobs) - skipped, skipped, [r for r in results if r is not None]

    def _known_results(self, label: str, jobs: Sequence[Job],
                       ctx: TaskContext) -> tuple[list[dict | None], dict[ray.ObjectRef, int]]:
        """The stats of the jobs whose marker holds the stage hash, and the jobs started before
        the stage began (``_Follower``), running or done: what ``run_jobs`` does not start."""
        from codecorpus.pipeline import tasks

        results: list[dict | None] = [None] * len(jobs)
        pending: dict[ray.ObjectRef, int] = {}
        started = self._early.pop(ctx.stage, {})
        for i, job in enumerate(jobs):
            ref = started.pop(job.name, None)
            if ref is not None:
                pending[ref] = i
                self._early_running.discard(ref)
                continue
            marker = tasks.read_marker(ctx, job.name)
            if marker is not None:
                results[i] = marker["stats"]
        if started:
            _stop([*started.values(), *pending])
            raise tasks.InvariantError(
                f"stage {ctx.stage} started {', '.join(sorted(started))} ahead, as its head, and its phase {label} "
                "has no such jobs: its StageSpec.head and its first phase differ")
        return results, pending

    def _collect(self, label: str, stage: str, name: str, ref: ray.ObjectRef, rate: _Rate) -> dict:
        """A finished task's stats; its time and memory, which the runtime adds, go to the stage's totals."""
        result = ray.get(ref)
        measured = None
        if isinstance(result, dict):
            measured = result.pop("memory", None)
            wall, cpu = result.pop(TASK_TIME, (0.0, 0.0))
            spent = self._task_seconds.setdefault(stage, [0.0, 0.0])
            spent[0] += wall
            spent[1] += cpu
            rate.add(result)
        self._memory.setdefault(stage, memory.StageMemory()).add(label, name, measured)
        return result

    def _start_early(self, follower: _Follower, shard: int) -> None:
        """Start the follower's head job of ``shard`` unless its marker shows it done."""
        from codecorpus.pipeline import tasks

        job = follower.head(shard)
        if tasks.read_marker(follower.ctx, job.name) is not None:
            return
        ref = submit_task(f"{follower.ctx.stage}:{job.name}", job.fn, *job.args)
        self._early.setdefault(follower.ctx.stage, {})[job.name] = ref
        self._early_running.add(ref)

    def _stop_early(self, also: Sequence[ray.ObjectRef] = ()) -> None:
        """Cancel the jobs started before their stage began, and ``also``, and wait for them all."""
        refs = [*also, *(ref for started in self._early.values() for ref in started.values())]
        self._early.clear()
        self._early_running.clear()
        _stop(refs)

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
        ran, skipped, results = self._ex.run_jobs(label, jobs, self.task, self._ex.prepare_follower(self.name, jobs))
        self.ran, self.skipped = self.ran + ran, self.skipped + skipped
        return results

    def call(self, point: str, fn: Callable[..., Any], *args: Any) -> Any:
        return ray.get(submit_task(point, fn, *args))

    def say(self, text: str) -> None:
        self._ex.console.print(text, highlight=False, markup=False)

    def warn(self, text: str) -> None:
        self._ex.console.print(f"[yellow]{text}[/]", highlight=False)


@dataclass(frozen=True)
class _Follower:
    """The next stage's head (``StageSpec.head``), started shard by shard as its upstream's
    output tasks finish: a barrier between the two stages' per-shard phases costs the
    workers the last tasks' tail and a round trip, at every stage boundary."""

    ctx: TaskContext
    head: Callable[[int], Job]


def _map_head(stage: _StageRun, fn: Callable[..., Any]) -> Callable[[int], Job]:
    """A map stage's job of shard ``i``: ``fn`` over the upstream's part ``i``."""
    from codecorpus.pipeline import tasks

    def job(i: int) -> Job:
        return Job(schema.shard_name(i), tasks.map_task, (stage.task, i, stage.upstream, fn),
                   (str(stage.run.part(stage.upstream, i)),))

    return job


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

"""The scheduler: a phase's jobs run as Ray tasks, retried, in order of weight, results in job order.

It knows jobs, never stages: what a job is (``pipeline/spec.py`` ``Job``), which jobs are done
already (a function the stage lifecycle hands it, reading their markers) and how many tasks the
run may keep at once. Each job is one task (``remote.submit_task``); Ray retries a failed one
``TASK_RETRIES`` times, and a task that still fails stops the run with a ``PipelineError``
naming the stage, the task and what it read, once the phase's other tasks are cancelled.

The runtime's measurements of each task (its body's seconds, its peak memory) come back with
its stats; the scheduler takes them out (``TaskUsage``) before the stats reach the stage.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ray
from rich.console import Console

from codecorpus import schema
from codecorpus.pipeline.spec import Job
from codecorpus.runtime import memory
from codecorpus.runtime.progress import Rate, phase_bars
from codecorpus.runtime.remote import RUNTIME_KEYS, TASK_RETRIES, TASK_TIME, submit_task
from codecorpus.runtime.session import PipelineError
from codecorpus.storage import mirror as store
from codecorpus.storage.faults import checkpoint

STOP_WAIT_SECONDS = 60.0
"""How long a stopping run waits for its cancelled tasks to unwind."""

Known = Callable[[str], "dict[str, Any] | None"]
"""A job's stats when its marker shows it done under the stage's hash (by job name), else None."""


class TaskUsage:
    """What the runtime measured of one stage's tasks: their bodies' wall and CPU seconds, summed,
    and per step the task with the largest peak memory. It describes a run, never its outputs."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.memory = memory.StageMemory()

    def take(self, step: str, task: str, result: Any) -> Any:
        """Record a finished task's measurements; its stats without them."""
        measured = None
        if isinstance(result, dict):
            measured = result.pop("memory", None)
            wall, cpu = result.pop(TASK_TIME, (0.0, 0.0))
            self.wall += wall
            self.cpu += cpu
        self.memory.add(step, task, measured)
        return result


class Scheduler:
    """Runs phases of jobs on Ray; ``usage[stage]`` holds what their tasks measured."""

    def __init__(self, max_tasks: int | None, console: Console, quiet: bool) -> None:
        self.max_tasks = max_tasks
        """The most tasks at once (None: as many as Ray's CPUs take): ``--workers`` on a joined cluster."""
        self.console = console
        self.quiet = quiet
        self.usage: dict[str, TaskUsage] = {}

    def run_jobs(self, label: str, stage: str, jobs: Sequence[Job], known: Known) -> tuple[int, int, list[dict]]:
        """Run the jobs not ``known`` to be done; returns (ran, skipped, every job's stats in job order).

        The heaviest start first (``heaviest_first``), at most ``max_tasks`` at once; results come
        back in job order whatever order the tasks finish in.
        """
        results: list[dict | None] = [known(job.name) for job in jobs]
        skipped = sum(result is not None for result in results)
        waiting = heaviest_first(jobs, [i for i, result in enumerate(results) if result is None])
        pending: dict[ray.ObjectRef, int] = {}
        cap = max(self.max_tasks or len(jobs), 1)

        def submit() -> None:
            while waiting and len(pending) < cap:
                i = waiting.popleft()
                pending[submit_task(f"{stage}:{jobs[i].name}", jobs[i].fn, *jobs[i].args)] = i

        submit()
        usage = self.usage.setdefault(stage, TaskUsage())
        with phase_bars(self.console, self.quiet) as bars:
            bar = bars.add_task(label, total=len(jobs), completed=skipped, rate="")
            rate = Rate()
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(done[0])
                try:
                    result = usage.take(label, jobs[i].name, ray.get(done[0]))
                except ray.exceptions.RayError as err:
                    stop_tasks(list(pending))
                    raise PipelineError(job_failure(stage, jobs[i], err)) from None
                if isinstance(result, dict):
                    rate.add(result)
                results[i] = result
                checkpoint(f"after:{stage}:{jobs[i].name}")
                bars.update(bar, advance=1, rate=rate.text())
                submit()
        return len(jobs) - skipped, skipped, [r for r in results if r is not None]


class PlanTasks:
    """A source's planning tasks (``pipeline/spec.py`` ``PlanTasks``): no markers, results in order.

    Planning may run beside Ray's start (``launch.start``): its tasks wait for ``ray_ready``.
    """

    def __init__(self, run: schema.RunPaths, ray_ready: threading.Event, max_tasks: int | None) -> None:
        self.run = run
        self.ray_ready = ray_ready
        self.max_tasks = max_tasks

    def map(self, label: str, fn: Callable[[Any], Any], items: Sequence[Any],
            describe: Callable[[Any], str] | None = None) -> list[Any]:
        self.ray_ready.wait()
        if not ray.is_initialized():  # its start failed: a task now would start a default Ray
            raise PipelineError(f"planning {label} needs Ray, and Ray did not start")
        window = self.max_tasks or len(items) or 1
        in_flight: deque[ray.ObjectRef] = deque()
        results = []
        for i in range(len(items)):
            for j in range(i + len(in_flight), min(i + window, len(items))):
                in_flight.append(submit_task(f"{label}:{j}", fn, items[j]))
            try:
                result = ray.get(in_flight.popleft())
            except ray.exceptions.RayError as err:
                stop_tasks(list(in_flight))
                held = (describe(items[i]),) if describe is not None else ()
                raise PipelineError(job_failure("planning", Job(f"{label}:{i}", fn, reads=held), err)) from None
            if isinstance(result, dict):  # the runtime's, not the plan's
                result = {k: v for k, v in result.items() if k not in RUNTIME_KEYS}
            results.append(result)
        return results


def call(point: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` as one task, waited for (no marker)."""
    return ray.get(submit_task(point, fn, *args))


def stop_tasks(refs: list[ray.ObjectRef]) -> None:
    """Cancel tasks still running and wait for them to end.

    A cancelled task gets KeyboardInterrupt, so its writers remove their temporary files
    (``atomic_writer``); without the wait, Ray's shutdown could kill it mid-write.
    """
    for ref in refs:
        ray.cancel(ref)
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=STOP_WAIT_SECONDS)


def heaviest_first(jobs: Sequence[Job], waiting: Iterable[int]) -> deque[int]:
    """The order to start these jobs in: the heaviest first (``Job.weight``), ties in job order.

    Longest-first is the classic cure for a phase's tail: with a light task last, the other
    workers wait less for the phase's last one. Bytes read are the proxy for time here.
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


def job_failure(stage: str, job: Job, err: Exception) -> str:
    cause = getattr(err, "cause", None) or err
    return (
        f"stage {stage}, job {job.name} failed after {TASK_RETRIES} retries; input: {job.describe_reads()}; "
        f"error: {type(cause).__name__}: {cause}. Completed shards are kept: fix the cause and rerun "
        "the same command to resume."
    )

"""Run a recipe on Ray: stages in order, each a set of shard-level tasks, resumable.

The run reads like the recipe (``Executor.run``)::

    ingest -> langid -> filters -> dedup(keys -> resolve -> apply) -> tokenize -> pack -> manifest

Each stage has a hash chained from the hash before it, so a changed setting
redoes that stage and every later one; within a stage, a task whose marker
holds the current hash is skipped. This is the only module that imports ray.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from codecorpus import schema
from codecorpus.config import STAGE_ORDER, Recipe, RecipeError, config_hash, recipe_to_yaml
from codecorpus.dedup import exact
from codecorpus.filters import stage as filters_stage
from codecorpus.ingest import plan as ingest_plan
from codecorpus.ingest import read as ingest_read
from codecorpus.langid import stage as langid_stage
from codecorpus.runtime import packtask, tasks
from codecorpus.runtime.io import atomic_write_bytes
from codecorpus.runtime.tasks import TaskContext
from codecorpus.tokenize import stage as tokenize_stage
from codecorpus.tokenize import training

DEFAULT_OBJECT_STORE_BYTES = 512 * 1024**2
TASK_RETRIES = 2
"""Retries of a failed task (a crashed worker, or an exception) before the run stops."""


class PipelineError(RuntimeError):
    """A task failed after its retries; the message names the stage, the shard and the error."""


@dataclass
class StageOutcome:
    name: str
    stats: dict[str, Any]
    seconds: float
    skipped_tasks: int = 0
    ran_tasks: int = 0


@dataclass
class RunResult:
    run_dir: Path
    stages: list[StageOutcome] = field(default_factory=list)
    seconds: float = 0.0


def init_ray(workers: int | None, address: str | None, object_store_bytes: int = DEFAULT_OBJECT_STORE_BYTES) -> None:
    """Start (or join) Ray. Local runs bind to loopback only and start no dashboard.

    An already-initialized Ray with the same CPU count is reused (tests run many
    pipelines in one process); a different one is shut down first.
    """
    if ray.is_initialized():
        if address or workers is None or int(ray.cluster_resources().get("CPU", 0)) == workers:
            return
        ray.shutdown()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        ray.init(address=address, log_to_driver=False)
        return
    ray.init(
        num_cpus=workers or os.cpu_count() or 1,
        object_store_memory=object_store_bytes,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )


@ray.remote(max_retries=TASK_RETRIES, retry_exceptions=True)
def _remote(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


class Executor:
    def __init__(self, recipe: Recipe, run_dir: Path, console: Console | None = None, quiet: bool = False):
        self.recipe = recipe
        self.run = schema.RunPaths(Path(run_dir))
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self._shards: list | None = None
        self._hashes: dict[str, str] = {}

    # --- the pipeline -------------------------------------------------------------

    def run_pipeline(self, only: str | None = None, until: str | None = None) -> RunResult:
        selected = select_stages(self.recipe.stages.enabled(), only, until)
        result = RunResult(self.run.root)
        t0 = time.perf_counter()
        # the ingest plan (a stat walk, no reads) is part of every stage's identity:
        # a changed input tree redoes ingest and, through the hash chain, all after it
        self._shards = ingest_plan.plan_shards(self.recipe.sources, self.recipe.stages.ingest)
        plan_hash = config_hash([ingest_plan.plan_fingerprint(s) for s in self._shards])
        self._hashes = stage_hashes(self.recipe, plan_hash)
        self.run.root.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(self.run.recipe, recipe_to_yaml(self.recipe).encode())
        steps = {
            "ingest": self.ingest,
            "langid": self.langid,
            "filters": self.filters,
            "dedup": self.dedup,
            "tokenize": self.tokenize,
            "pack": self.pack,
        }
        for name in selected:
            self._require_upstream(name)
            self._prepare_stage_dir(name)
            s0 = time.perf_counter()
            ran, skipped = steps[name]()
            stats = json.loads(self.run.stats(name).read_text())
            result.stages.append(StageOutcome(name, stats, time.perf_counter() - s0, skipped, ran))
        result.seconds = time.perf_counter() - t0
        return result

    def ingest(self) -> tuple[int, int]:
        shards = self._shards
        ctx = self._ctx("ingest")
        jobs = [
            (schema.shard_name(i), tasks.ingest_task, ctx, i,
             functools.partial(ingest_read.read_shard, refs), sum(r.size for r in refs if r.skip is None), len(refs))
            for i, refs in enumerate(shards)
        ]
        return self._finish_shard_stage("ingest", jobs)

    def langid(self) -> tuple[int, int]:
        return self._map_stage("langid", functools.partial(langid_stage.run, cfg=self.recipe.stages.langid))

    def filters(self) -> tuple[int, int]:
        return self._map_stage("filters", functools.partial(filters_stage.run, cfg=self.recipe.stages.filters))

    def dedup(self) -> tuple[int, int]:
        cfg = self.recipe.stages.dedup
        ctx, upstream = self._ctx("dedup"), self._upstream("dedup")
        n = self._shard_count(upstream)
        self._run_phase("dedup: keys", [
            (f"keys-{schema.shard_name(i)}", tasks.scatter_task, ctx, "keys", i, upstream,
             functools.partial(exact.keys, cfg=cfg))
            for i in range(n)
        ], ctx)
        self._run_phase("dedup: resolve", [
            (f"resolve-p{b:05d}", tasks.reduce_task, ctx, "resolve", "keys", b, n,
             functools.partial(exact.resolve, n_shards=n))
            for b in range(cfg.buckets)
        ], ctx)
        jobs = [
            (schema.shard_name(i), tasks.apply_task, ctx, i, upstream, "resolve", cfg.buckets,
             functools.partial(exact.apply, cfg=cfg))
            for i in range(n)
        ]
        return self._finish_shard_stage("dedup", jobs, label="dedup: apply")

    def tokenize(self) -> tuple[int, int]:
        tok_cfg = self.tokenizer_config()
        fn = functools.partial(tokenize_stage.run, cfg=self.recipe.stages.tokenize, tokenizer_cfg=tok_cfg)
        return self._map_stage("tokenize", fn)

    def pack(self) -> tuple[int, int]:
        ctx, upstream = self._ctx("pack"), self._upstream("pack")
        n = self._shard_count(upstream)
        tok_cfg = self.tokenizer_config()
        ran = skipped = 0
        set_stats = []
        for out in self.recipe.outputs:
            jobs = [
                (f"{out.name}-{schema.shard_name(i)}", packtask.pack_task, ctx, out, i, upstream, tok_cfg)
                for i in range(n)
            ]
            r, s, results = self._run_jobs(f"pack: {out.name}", jobs, ctx)
            ran, skipped = ran + r, skipped + s
            set_stats.extend(results)
            packtask.write_set_manifest(self.run, out, results, tok_cfg, self.recipe, self._hashes["pack"])
        packtask.write_run_manifest(self.run, self.recipe)
        # a document is counted once per stage: the first set's view is the stage's rows
        per_set = len(self.recipe.outputs)
        self._write_stats("pack", tasks.aggregate_stats(set_stats[: len(set_stats) // per_set]))
        return ran, skipped

    # --- tokenizer ----------------------------------------------------------------

    def tokenizer_config(self):
        """The recipe's tokenizer; a ``train:`` tokenizer is trained once into RUN/tokenizer/."""
        cfg = self.recipe.tokenizer
        if cfg.train is None:
            return cfg
        path = self.run.tokenizer_dir / "tokenizer.json"
        meta = self.run.tokenizer_dir / "_done"
        key = config_hash(self._hashes[self._upstream("tokenize")], cfg)
        if not (path.exists() and meta.exists() and meta.read_text() == key):
            parts = [self.run.part(self._upstream("tokenize"), i) for i in range(self._shard_count(self._upstream("tokenize")))]
            ray.get(_remote.remote(training.train_from_parts, parts, cfg.train, self.run.tokenizer_dir))
            atomic_write_bytes(meta, key.encode())
        return cfg.model_copy(update={"train": None, "path": str(path)})

    # --- machinery ----------------------------------------------------------------

    def _ctx(self, stage: str) -> TaskContext:
        return TaskContext(self.run, stage, self._hashes[stage])

    def _upstream(self, stage: str) -> str:
        enabled = self.recipe.stages.enabled()
        i = enabled.index(stage)
        if stage == "pack":
            return "tokenize"
        return enabled[i - 1]

    def _shard_count(self, stage: str) -> int:
        return int(json.loads(self.run.stats(stage).read_text())["shards"])

    def _require_upstream(self, stage: str) -> None:
        if stage == "ingest":
            return
        up = self._upstream(stage)
        meta = self._read_stage_meta(up)
        if meta.get("hash") != self._hashes[up] or not self.run.stats(up).exists():
            raise RecipeError(
                f"stage {stage} needs stage {up} complete under the current recipe in {self.run.root}: "
                f"run without --only, or with --until {up} first"
            )

    def _prepare_stage_dir(self, stage: str) -> None:
        """Remove a stage's outputs made under another recipe (and its sets, for pack)."""
        if self._read_stage_meta(stage).get("hash") != self._hashes[stage]:
            self._reset_stage(stage)
        self._write_stage_meta(stage)

    def _reset_stage(self, stage: str) -> None:
        shutil.rmtree(self.run.stage_dir(stage), ignore_errors=True)
        if stage == "pack":
            shutil.rmtree(self.run.root / "shards", ignore_errors=True)
            self.run.manifest.unlink(missing_ok=True)

    def _read_stage_meta(self, stage: str) -> dict[str, Any]:
        try:
            return json.loads((self.run.stage_dir(stage) / "_stage.json").read_text())
        except (OSError, ValueError):
            return {}

    def _write_stage_meta(self, stage: str) -> None:
        meta = {"hash": self._hashes[stage]}
        atomic_write_bytes(self.run.stage_dir(stage) / "_stage.json", json.dumps(meta, sort_keys=True).encode())

    def _map_stage(self, stage: str, fn: Callable) -> tuple[int, int]:
        ctx, upstream = self._ctx(stage), self._upstream(stage)
        jobs = [
            (schema.shard_name(i), tasks.map_task, ctx, i, upstream, fn)
            for i in range(self._shard_count(upstream))
        ]
        return self._finish_shard_stage(stage, jobs)

    def _finish_shard_stage(self, stage: str, jobs: list[tuple], label: str | None = None) -> tuple[int, int]:
        ran, skipped, results = self._run_jobs(label or stage, jobs, self._ctx(stage))
        self._write_stats(stage, tasks.aggregate_stats(results))
        return ran, skipped

    def _write_stats(self, stage: str, stats: dict[str, Any]) -> None:
        stats = {"stage": stage, "hash": self._hashes[stage], **stats}
        atomic_write_bytes(self.run.stats(stage), json.dumps(stats, indent=2, sort_keys=True).encode())

    def _run_phase(self, label: str, jobs: list[tuple], ctx: TaskContext) -> None:
        self._run_jobs(label, jobs, ctx)

    def _run_jobs(self, label: str, jobs: list[tuple], ctx: TaskContext) -> tuple[int, int, list[dict]]:
        """Run ``(task_name, fn, *args)`` jobs on Ray, skipping those already done.

        Results come back in job order whatever order the tasks finish in.
        """
        results: list[dict | None] = [None] * len(jobs)
        pending: dict[ray.ObjectRef, int] = {}
        for i, (name, fn, *args) in enumerate(jobs):
            marker = tasks.read_marker(ctx, name)
            if marker is not None:
                results[i] = marker["stats"]
            else:
                pending[_remote.options(name=f"{ctx.stage}:{name}").remote(fn, *args)] = i
        skipped = len(jobs) - len(pending)
        with self._progress() as progress:
            bar = progress.add_task(label, total=len(jobs), completed=skipped)
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                i = pending.pop(done[0])
                try:
                    results[i] = ray.get(done[0])
                except ray.exceptions.RayError as err:
                    for ref in pending:
                        ray.cancel(ref)
                    raise PipelineError(_task_failure(ctx.stage, jobs[i], err)) from None
                progress.advance(bar)
        return len(jobs) - skipped, skipped, [r for r in results if r is not None]

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.console, disable=self.quiet, transient=False,
        )


def _task_failure(stage: str, job: tuple, err: Exception) -> str:
    name = job[0]
    cause = getattr(err, "cause", None) or err
    inputs = ""
    fn = next((a for a in job[2:] if isinstance(a, functools.partial)), None)
    if fn is not None and fn.args and isinstance(fn.args[0], list) and fn.args[0]:
        first = fn.args[0][0]
        inputs = f" (inputs from {getattr(first, 'abspath', first)} ...)"
    return (
        f"stage {stage}, task {name}{inputs} failed after {TASK_RETRIES} retries: "
        f"{type(cause).__name__}: {cause}. Completed shards are kept; fix the cause and rerun the same command to resume."
    )


def stage_hashes(recipe: Recipe, plan_hash: str) -> dict[str, str]:
    """Each enabled stage's hash, chained: a change upstream changes every hash after it."""
    prev = config_hash([s.model_dump(mode="json") for s in recipe.sources], recipe.seed, plan_hash)
    out: dict[str, str] = {}
    for name in recipe.stages.enabled():
        parts: list[Any] = [prev, name, getattr(recipe.stages, name)]
        if name == "tokenize":
            parts.append(recipe.tokenizer)
        if name == "pack":
            parts.extend([recipe.tokenizer, [o.model_dump(mode="json") for o in recipe.outputs]])
        prev = out[name] = config_hash(*parts)
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


__all__ = ["STAGE_ORDER", "Executor", "PipelineError", "init_ray", "select_stages", "stage_hashes"]

"""Run a recipe on Ray: stages in order, each a set of shard-level tasks, resumable.

The run reads like the recipe (``Executor.run``)::

    ingest -> langid -> filters -> dedup(signatures -> pairs -> clusters -> members -> keep -> apply)
           -> tokenize -> pack -> manifests -> report

Each stage has a hash chained from the hash before it, so a changed setting
redoes that stage and every later one; within a stage, a task whose marker
holds the current hash is skipped. This is the only module that imports ray.
"""

from __future__ import annotations

import functools
import json
import os
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
from codecorpus.dedup import forks, near
from codecorpus.filters import decontam
from codecorpus.filters import stage as filters_stage
from codecorpus.ingest import plan as ingest_plan
from codecorpus.ingest import read as ingest_read
from codecorpus.langid import stage as langid_stage
from codecorpus.runtime import longtask, memory, mixtask, packtask, sfttask, store, tasks
from codecorpus.runtime.faults import checkpoint
from codecorpus.runtime.io import OutputWriteError, atomic_write_bytes, remove_stale_temps
from codecorpus.runtime.store import ensure_local
from codecorpus.runtime.tasks import TaskContext
from codecorpus.sft import dedup as sft_dedup
from codecorpus.sft import examples as sft_examples
from codecorpus.sft import select as sft_select
from codecorpus.sft import validate as sft_validate
from codecorpus.tokenize import stage as tokenize_stage
from codecorpus.tokenize import training
from codecorpus.tokenize.tokenizer import with_set_tokens

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
        run_store = os.environ.get(store.STORE_ENV)  # workers on other nodes need the S3 run dir
        env = {"env_vars": {store.STORE_ENV: run_store}} if run_store else None
        ray.init(address=address, log_to_driver=False, runtime_env=env)
        return
    ray.init(
        address="local",  # always a private instance: never join a cluster found in /tmp/ray (issue 5 fix)
        num_cpus=workers or os.cpu_count() or 1,
        object_store_memory=object_store_bytes,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )


@ray.remote(max_retries=TASK_RETRIES, retry_exceptions=True)
def _remote(point: str, fn: Callable[..., Any], *args: Any) -> Any:
    checkpoint(f"task:{point}")
    rss_before = memory.start_task()
    result = fn(*args)
    if isinstance(result, dict):  # which node ran it and its peak memory: for the stats, never for outputs
        node = ray.get_runtime_context().get_node_id()
        result = {**result, "node": node, "memory": memory.end_task(rss_before)}
    memory.release()
    return result


class Executor:
    def __init__(self, recipe: Recipe, run_dir: Path, console: Console | None = None, quiet: bool = False):
        self.recipe = recipe
        self.run = schema.RunPaths(Path(run_dir))
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self._shards: list | None = None
        self._hashes: dict[str, str] = {}
        self._memory: dict[str, memory.StageMemory] = {}

    # --- the pipeline -------------------------------------------------------------

    def run_pipeline(self, only: str | None = None, until: str | None = None) -> RunResult:
        selected = select_stages(self.recipe.stages.enabled(), only, until)
        result = RunResult(self.run.root)
        t0 = time.perf_counter()
        # the ingest plan (a stat walk, no reads) is part of every stage's identity:
        # a changed input tree redoes ingest and, through the hash chain, all after it
        if self.recipe.stages.sft_ingest is not None:  # issue 8: trace files, not repositories
            self._shards, plan_hash = sfttask.plan(self.recipe)
        else:
            self._shards = ingest_plan.plan_shards(self.recipe.sources, self.recipe.stages.ingest)
            plan_hash = config_hash([ingest_plan.plan_fingerprint(s) for s in self._shards])
        self._hashes = stage_hashes(self.recipe, plan_hash)
        try:  # fail before any work when the run directory cannot be written at all
            atomic_write_bytes(self.run.recipe, recipe_to_yaml(self.recipe).encode())
        except OutputWriteError as err:
            raise PipelineError(str(err)) from None
        steps = {
            "ingest": self.ingest,
            "langid": self.langid,
            "filters": self.filters,
            "dedup": self.dedup,
            "tokenize": self.tokenize,
            "pack": self.pack,
            **self._sft_steps(),
        }
        for name in selected:
            self._require_upstream(name)
            self._prepare_stage_dir(name)
            s0 = time.perf_counter()
            ran, skipped = steps[name]()
            stats = json.loads(ensure_local(self.run.stats(name)).read_text())
            result.stages.append(StageOutcome(name, stats, time.perf_counter() - s0, skipped, ran))
        result.seconds = time.perf_counter() - t0
        self._write_report()  # issue 7: RUN/report/ after every run
        return result

    def ingest(self) -> tuple[int, int]:
        shards = self._shards
        ctx = self._ctx("ingest")
        jobs = [
            (schema.shard_name(i), tasks.ingest_task, ctx, i,
             functools.partial(ingest_read.read_shard, refs, self.recipe.stages.ingest), ingest_plan.document_bytes(refs), len(refs))
            for i, refs in enumerate(shards)
        ]
        return self._finish_shard_stage("ingest", jobs)

    def langid(self) -> tuple[int, int]:
        """scan (tags + label counts, per shard) -> vote (one task) -> apply (per shard)."""
        cfg = self.recipe.stages.langid
        ctx, upstream = self._ctx("langid"), self._upstream("langid")
        n = self._shard_count(upstream)
        self._run_phase("langid: scan", [
            (f"scan-{schema.shard_name(i)}", tasks.scatter_task, ctx, "scan", i, upstream,
             functools.partial(langid_stage.scan, cfg=cfg))
            for i in range(n)
        ], ctx)
        self._run_phase("langid: vote", [
            ("vote-p00000", tasks.reduce_task, ctx, "vote", "scan", langid_stage.COUNTS_PARTITION, n,
             functools.partial(langid_stage.decide_shards, cfg=cfg, n_shards=n))
        ], ctx)
        jobs = [
            (schema.shard_name(i), tasks.apply_own_task, ctx, i, upstream, ("scan", langid_stage.TAGS_PARTITION),
             "vote", 1, functools.partial(langid_stage.apply, cfg=cfg))
            for i in range(n)
        ]
        return self._finish_shard_stage("langid", jobs, label="langid: apply")

    def filters(self) -> tuple[int, int]:
        """Heuristics, decontamination and redaction (issue 4)."""
        return self._map_stage_with_index("filters", filters_stage.run)

    def _map_stage_with_index(self, stage: str, run: Callable[..., Any]) -> tuple[int, int]:
        """A map stage that decontaminates: the benchmark n-gram index is built once here, on
        the driver, and shipped to every task inside the stage function."""
        cfg = getattr(self.recipe.stages, stage)
        index = decontam.driver_index(cfg.decontam)
        return self._map_stage(stage, functools.partial(run, cfg=cfg, index=index))

    def dedup(self) -> tuple[int, int]:
        """Exact + near-dup phases (issue 5, dedup/near.py): sig -> pairs -> clusters -> members -> keep -> apply."""
        cfg = self.recipe.stages.dedup
        ctx, upstream = self._ctx("dedup"), self._upstream("dedup")
        n, b = self._shard_count(upstream), cfg.buckets
        up_ctx = self._ctx(upstream)
        shard_rows = [tasks.read_marker(up_ctx, schema.shard_name(i))["stats"]["rows_out"] for i in range(n)]
        if cfg.forks.enabled:
            self._dedup_forks(ctx, upstream, n)
        self._run_phase("dedup: signatures", [self._dedup_sig_job(ctx, upstream, i) for i in range(n)], ctx)
        self._run_phase("dedup: pairs", [
            (f"pairs-p{p:05d}", tasks.reduce_task, ctx, "pairs", "sig", p, n, functools.partial(near.pairs, cfg=cfg))
            for p in range(b)
        ], ctx)
        self._run_phase("dedup: clusters", [
            ("clusters-p00000", tasks.stream_reduce_task, ctx, "clusters", "pairs", 0, b,
             functools.partial(near.components, shard_rows=shard_rows))
        ], ctx)
        self._run_phase("dedup: members", [
            (f"members-{schema.shard_name(i)}", tasks.scatter_side_task, ctx, "members", i, upstream, "clusters", 1,
             functools.partial(near.members, cfg=cfg))
            for i in range(n)
        ], ctx)
        self._run_phase("dedup: keep", [
            (f"keep-p{p:05d}", tasks.reduce_task, ctx, "keep", "members", p, n,
             functools.partial(near.keep, cfg=cfg, n_shards=n))
            for p in range(b)
        ], ctx)
        jobs = [
            (schema.shard_name(i), tasks.apply_task, ctx, i, upstream, "keep", b, functools.partial(near.apply, cfg=cfg))
            if not cfg.forks.enabled else
            (schema.shard_name(i), tasks.apply_sides_task, ctx, i, upstream, (("keep", b), ("fdecide", 1)),
             functools.partial(near.apply_with_forks, cfg=cfg))
            for i in range(n)
        ]
        return self._finish_shard_stage("dedup", jobs, label="dedup: apply")

    # --- issue 5: repository-level fork removal (dedup/forks.py) ----------------------

    def _dedup_forks(self, ctx: TaskContext, upstream: str, n: int) -> None:
        """fkeys (per shard) -> fcount (per hash bucket) -> fedges (per repo bucket) -> fdecide (one task)."""
        cfg = self.recipe.stages.dedup
        b = cfg.buckets
        self._run_phase("dedup: fork keys", [
            (f"fkeys-{schema.shard_name(i)}", tasks.scatter_task, ctx, "fkeys", i, upstream,
             functools.partial(forks.keys, cfg=cfg))
            for i in range(n)
        ], ctx)
        self._run_phase("dedup: fork count", [
            (f"fcount-p{p:05d}", tasks.reduce_task, ctx, "fcount", "fkeys", p, n, functools.partial(forks.count, cfg=cfg))
            for p in range(b)
        ], ctx)
        self._run_phase("dedup: fork edges", [
            (f"fedges-p{p:05d}", tasks.reduce_task, ctx, "fedges", "fcount", p, b, functools.partial(forks.edges, cfg=cfg))
            for p in range(b)
        ], ctx)
        self._run_phase("dedup: fork decide", [
            ("fdecide-p00000", tasks.reduce_task, ctx, "fdecide", "fedges", 0, b,
             functools.partial(forks.decide, cfg=cfg, n_shards=n))
        ], ctx)

    def _dedup_sig_job(self, ctx: TaskContext, upstream: str, i: int) -> tuple:
        """The signatures task of shard ``i``; with forks on it reads the removed repositories too."""
        cfg, name = self.recipe.stages.dedup, f"sig-{schema.shard_name(i)}"
        if cfg.forks.enabled:
            fn = functools.partial(near.candidates_without_forks, cfg=cfg, seed=self.recipe.seed)
            return (name, tasks.scatter_side_task, ctx, "sig", i, upstream, "fdecide", 1, fn)
        fn = functools.partial(near.candidates, cfg=cfg, seed=self.recipe.seed)
        return (name, tasks.scatter_task, ctx, "sig", i, upstream, fn)

    def tokenize(self) -> tuple[int, int]:
        tok_cfg = self.tokenizer_config()
        fn = functools.partial(tokenize_stage.run, cfg=self.recipe.stages.tokenize, tokenizer_cfg=tok_cfg)
        return self._map_stage("tokenize", fn)

    def pack(self) -> tuple[int, int]:
        ctx, upstream = self._ctx("pack"), self._upstream("pack")
        n = self._shard_count(upstream)
        tok_cfg = self.tokenizer_config()
        upstream_stats = json.loads(ensure_local(self.run.stats(upstream)).read_text())
        self._plan_mixes(ctx, upstream, n, upstream_stats)  # issue 7: RUN/mixing/plan.json, read by pack_task
        ran = skipped = 0
        set_stats = []
        seed, append_eos = self.recipe.seed, self.recipe.stages.tokenize.append_eos
        for out in self.recipe.outputs:
            if out.kind == "long":  # issue 6: a global phase over repositories
                r, s, results = self._pack_long(ctx, out, upstream, n, tok_cfg, upstream_stats["tokens_out"])
                ran, skipped = ran + r, skipped + s
                set_stats.append(results)
                continue
            jobs = [
                (f"{out.name}-{schema.shard_name(i)}", packtask.pack_task, ctx, out, i, upstream, tok_cfg,
                 seed, append_eos)
                for i in range(n)
            ]
            r, s, results = self._run_jobs(f"pack: {out.name}", jobs, ctx)
            ran, skipped = ran + r, skipped + s
            set_stats.append(results)
            emitted = self._merge_small_shards(ctx, out, results)
            packtask.write_set_manifest(self.run, out, results, emitted, tok_cfg, self.recipe)
        packtask.write_run_manifest(self.run, self.recipe)
        # a document is counted once per stage: the first set's view is the stage's rows
        self._write_stats("pack", tasks.aggregate_stats(set_stats[0]))
        return ran, skipped

    def _pack_long(
        self, ctx: TaskContext, out, upstream: str, n: int, tok_cfg, tokens: int
    ) -> tuple[int, int, list[dict]]:
        """Long-context set (issue 6): scatter files by repository -> assemble and pack each bucket."""
        buckets = longtask.bucket_count(out.long, tokens)  # issue 9: sized by tokens, so memory is bounded
        phase = longtask.scatter_phase(out)
        self._run_phase(f"pack: {out.name} scatter", [
            (f"{phase}-{schema.shard_name(i)}", tasks.scatter_task, ctx, phase, i, upstream,
             functools.partial(longtask.scatter_repositories, buckets=buckets))
            for i in range(n)
        ], ctx)
        jobs = [
            (f"{out.name}-{schema.shard_name(b)}", longtask.assemble_task, ctx, out, b, n, tok_cfg,
             self.recipe.seed, self.recipe.stages.tokenize.append_eos)
            for b in range(buckets)
        ]
        r, s, results = self._run_jobs(f"pack: {out.name}", jobs, ctx)
        emitted = self._merge_small_shards(ctx, out, results)
        longtask.write_long_set_manifest(self.run, out, results, emitted, tok_cfg, self.recipe)
        return r, s, results

    def _merge_small_shards(self, ctx: TaskContext, out, results: list[dict]) -> packtask.EmittedShards:
        """Merge each packed shard below the split floor with its neighbours (``packing/shards.py``)."""
        kept, merges = packtask.plan_merges(results)
        jobs = [(m.task(out.name), packtask.merge_task, ctx, out.name, out.seq_len, m) for m in merges]
        merged = self._run_jobs(f"merge: {out.name}", jobs, ctx)[2] if jobs else []
        return packtask.finish_merges(self.run, out.name, kept, merges, merged)

    # --- mixing and report (issue 7) -----------------------------------------------

    def _plan_mixes(self, ctx: TaskContext, upstream: str, n: int, upstream_stats: dict[str, Any]) -> None:
        """Scan the tokenized shards of every mixed set, then plan them (``runtime/mixtask``)."""
        mixed = mixtask.mixed_sets(self.recipe.outputs)
        for out in mixed:
            self._run_phase(f"pack: mix {out.name}", [
                (f"{mixtask.scan_phase(out.name)}-{schema.shard_name(i)}", mixtask.scan_task, ctx, out,
                 self.recipe.seed, i, upstream)
                for i in range(n)
            ], ctx)
        plans = mixtask.plan_sets(ctx, mixed, self.recipe.seed, n, upstream_stats)
        mixtask.write_plans(self.run, plans)
        for plan in plans:
            if not self.quiet:
                self.console.print(mixtask.format_plan(plan), highlight=False, markup=False)
            for warning in plan.warnings:
                self.console.print(f"[yellow]mix warning:[/] {warning}", highlight=False)

    def _write_report(self) -> None:
        """The audit report of what exists in the run; a failure here never loses the run."""
        from codecorpus.reports import build

        t0 = time.perf_counter()
        try:
            build.write_report(self.run.root)
        except (OSError, ValueError, KeyError, TypeError) as err:
            self.console.print(
                f"[red]report failed:[/] {type(err).__name__}: {err}; the run itself is complete: "
                f"rerun `codecorpus report {self.run.root}` once fixed", highlight=False,
            )
            return
        if not self.quiet:
            self.console.print(f"report: {self.run.report_index} ({time.perf_counter() - t0:.1f} s)")

    # --- SFT / agent traces (issue 8) -------------------------------------------------

    def _sft_steps(self) -> dict[str, Callable[[], tuple[int, int]]]:
        return {
            "sft_ingest": self.sft_ingest,
            "sft_validate": self.sft_validate,
            "sft_select": self.sft_select,
            "sft_dedup": self.sft_dedup,
            "sft_render": self.sft_render,
            "sft_pack": self.sft_pack,
        }

    def sft_ingest(self) -> tuple[int, int]:
        ctx, cfg = self._ctx("sft_ingest"), self.recipe.stages.sft_ingest
        jobs = [(schema.shard_name(i), sfttask.ingest_task, ctx, i, files, cfg) for i, files in enumerate(self._shards)]
        return self._finish_shard_stage("sft_ingest", jobs)

    def sft_validate(self) -> tuple[int, int]:
        return self._map_stage("sft_validate", functools.partial(sft_validate.run, cfg=self.recipe.stages.sft_validate))

    def sft_select(self) -> tuple[int, int]:
        """Selection, decontamination and redaction (as for ``filters``)."""
        return self._map_stage_with_index("sft_select", sft_select.run)

    def sft_dedup(self) -> tuple[int, int]:
        """bands (per shard) -> edges (per bucket) -> clusters (one task) -> apply (per shard)."""
        cfg = self.recipe.stages.sft_dedup
        ctx, upstream = self._ctx("sft_dedup"), self._upstream("sft_dedup")
        n = self._shard_count(upstream)
        self._run_phase("sft_dedup: bands", [
            (f"bands-{schema.shard_name(i)}", tasks.scatter_task, ctx, "bands", i, upstream,
             functools.partial(sft_dedup.bands, cfg=cfg, seed=self.recipe.seed))
            for i in range(n)
        ], ctx)
        self._run_phase("sft_dedup: edges", [
            (f"edges-p{b:05d}", tasks.reduce_task, ctx, "edges", "bands", b, n, functools.partial(sft_dedup.edges, cfg=cfg))
            for b in range(cfg.buckets)
        ], ctx)
        self._run_phase("sft_dedup: clusters", [
            ("clusters-p00000", tasks.reduce_task, ctx, "clusters", "edges", 0, cfg.buckets,
             functools.partial(sft_dedup.clusters, n_shards=n))
        ], ctx)
        jobs = [
            (schema.shard_name(i), tasks.apply_task, ctx, i, upstream, "clusters", 1, sft_dedup.apply)
            for i in range(n)
        ]
        return self._finish_shard_stage("sft_dedup", jobs, label="sft_dedup: apply")

    def sft_render(self) -> tuple[int, int]:
        fn = functools.partial(
            sft_examples.run, cfg=self.recipe.stages.sft_render, tokenizer_cfg=self.recipe.tokenizer,
            max_tokens=sfttask.sft_output(self.recipe).seq_len,
        )
        return self._map_stage("sft_render", fn)

    def sft_pack(self) -> tuple[int, int]:
        ctx, upstream = self._ctx("sft_pack"), self._upstream("sft_pack")
        out = sfttask.sft_output(self.recipe)
        jobs = [
            (f"{out.name}-{schema.shard_name(i)}", sfttask.pack_task, ctx, out, i, upstream, self.recipe.tokenizer)
            for i in range(self._shard_count(upstream))
        ]
        ran, skipped, results = self._run_jobs(f"sft_pack: {out.name}", jobs, ctx)
        sfttask.write_set_manifest(self.run, self.recipe, results, self._merge_small_shards(ctx, out, results))
        self._write_stats("sft_pack", tasks.aggregate_stats(results))
        return ran, skipped

    # --- tokenizer ----------------------------------------------------------------

    def tokenizer_config(self):
        """The recipe's tokenizer; a ``train:`` tokenizer is trained once into RUN/tokenizer/."""
        cfg = with_set_tokens(self.recipe.tokenizer, self.recipe.outputs)  # issue 6: FIM / marker tokens
        if cfg.train is None:
            return cfg
        path = self.run.tokenizer_dir / "tokenizer.json"
        meta = self.run.tokenizer_done
        key = config_hash(self._hashes[self._upstream("tokenize")], cfg)
        if not (ensure_local(path).exists() and ensure_local(meta).exists() and meta.read_text() == key):
            parts = [self.run.part(self._upstream("tokenize"), i) for i in range(self._shard_count(self._upstream("tokenize")))]
            ray.get(_remote.remote("tokenizer:train", training.train_from_parts, parts, cfg.train, self.run.tokenizer_dir))
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
        return int(json.loads(ensure_local(self.run.stats(stage)).read_text())["shards"])

    def _require_upstream(self, stage: str) -> None:
        if stage in ("ingest", "sft_ingest"):
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
        remove_stale_temps(self.run.stage_dir(stage))
        if stage == "pack":
            remove_stale_temps(self.run.root / "shards")
        self._write_stage_meta(stage)

    def _reset_stage(self, stage: str) -> None:
        store.remove_tree(self.run.stage_dir(stage))
        if stage in ("pack", "sft_pack"):
            store.remove_tree(self.run.root / "shards")
            store.remove_file(self.run.manifest)

    def _read_stage_meta(self, stage: str) -> dict[str, Any]:
        try:
            return json.loads(ensure_local(self.run.stage_meta(stage)).read_text())
        except (OSError, ValueError):
            return {}

    def _write_stage_meta(self, stage: str) -> None:
        meta = {"hash": self._hashes[stage]}
        atomic_write_bytes(self.run.stage_meta(stage), json.dumps(meta, sort_keys=True).encode())

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
        stats = {"stage": stage, "hash": self._hashes[stage], **stats,
                 "memory": self._memory.pop(stage, memory.StageMemory()).summary()}
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
                point = f"{ctx.stage}:{name}"
                pending[_remote.options(name=point).remote(point, fn, *args)] = i
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
                measured = results[i].pop("memory", None) if isinstance(results[i], dict) else None
                self._memory.setdefault(ctx.stage, memory.StageMemory()).add(label, jobs[i][0], measured)
                checkpoint(f"after:{ctx.stage}:{jobs[i][0]}")
                progress.advance(bar)
        return len(jobs) - skipped, skipped, [r for r in results if r is not None]

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description:<18}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.console, disable=self.quiet, transient=False,
        )


def _task_failure(stage: str, job: tuple, err: Exception) -> str:
    cause = getattr(err, "cause", None) or err
    return (
        f"stage {stage}, task {job[0]} failed after {TASK_RETRIES} retries; input: {_task_input(job)}; "
        f"error: {type(cause).__name__}: {cause}. Completed shards are kept: fix the cause and rerun "
        "the same command to resume."
    )


def _task_input(job: tuple) -> str:
    """The file(s) a failed task was reading, for the error message."""
    _, fn, ctx, *args = job
    if fn is tasks.ingest_task:
        refs = args[1].args[0]
        return f"{len(refs)} planned files, {refs[0].abspath} ... {refs[-1].abspath}" if refs else "no files"
    if fn in (tasks.map_task, tasks.apply_task):
        return str(ctx.run.part(args[1], args[0]))
    if fn is tasks.scatter_task:
        return str(ctx.run.part(args[2], args[1]))
    if fn is packtask.pack_task:
        return str(ctx.run.part(args[2], args[1]))
    if fn is tasks.reduce_task:
        return str(ctx.run.work_dir(ctx.stage, args[1]) / f"p{args[2]:05d}")
    return "see the task arguments"


def stage_hashes(recipe: Recipe, plan_hash: str) -> dict[str, str]:
    """Each enabled stage's hash, chained: a change upstream changes every hash after it."""
    prev = config_hash([s.model_dump(mode="json") for s in recipe.sources], recipe.seed, plan_hash)
    out: dict[str, str] = {}
    for name in recipe.stages.enabled():
        parts: list[Any] = [prev, name, getattr(recipe.stages, name)]
        if name == "tokenize":
            parts.append(recipe.tokenizer)
        if name == "filters" and recipe.stages.filters.decontam is not None:
            parts.append(decontam.benchmark_fingerprint(recipe.stages.filters.decontam))  # benchmark file bytes
        if name == "pack":
            parts.extend([recipe.tokenizer, [o.model_dump(mode="json") for o in recipe.outputs]])
        if name.startswith("sft_"):
            parts.extend(sfttask.stage_hash_parts(recipe, name))
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

"""Job bodies of the repository-history stages, Ray-free like ``pipeline/bodies.py``.

The specs (``tasks/spec.py``) name them in their jobs:

- :func:`commits_job`: one shard of the plan (a slice of a long history, or the small
  histories of several repositories) -> ``commits/part-N``; ``rows_in`` is every commit
  its slices listed (each a row or a drop), and one drop row per repository git cannot open;
- :func:`records_job` then :func:`merge_job`: the task candidates -> SWE-bench
  records per shard, sorted, then merged into ``tasks/tasks.jsonl`` and
  ``tasks/tasks-eval.jsonl`` one line at a time (no task holds them all);
- :func:`write_edit_manifest`: the edit set's manifest (its shards are packed by the
  SFT pack body, ``sft/bodies.py``), an SFT set manifest whose ``kind_of_set`` is ``edit``.
"""

from __future__ import annotations

import heapq
import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from codecorpus import schema
from codecorpus.manifests import manifest as mf
from codecorpus.manifests import megatron
from codecorpus.model import recipe_hash
from codecorpus.packing.bodies import EmittedShards, tokenizer_config_record
from codecorpus.pipeline.bodies import (
    JobContext,
    finish_shard,
    lang_breakdown,
    result_stats,
    write_marker,
)
from codecorpus.sft.bodies import sft_output
from codecorpus.sft.template import choose_template
from codecorpus.stage import MapResult, concat_drops
from codecorpus.storage.atomic import atomic_writer, sha256_file
from codecorpus.storage.mirror import ensure_local
from codecorpus.storage.parquet import read_parquet, write_parquet
from codecorpus.tasks import columns as C
from codecorpus.tasks import commits, swebench, unique
from codecorpus.tasks.config import CommitsConfig, TaskSetConfig
from codecorpus.tokenize.tokenizer import load_tokenizer

if TYPE_CHECKING:
    from codecorpus.config.recipe import Recipe

SPLITS = tuple(schema.TASK_FILES)  # ("train", "eval")


@dataclass(frozen=True)
class RepositoryProblem:
    """A repository of a folder or list source that cannot be mined: planned as its one drop."""

    repository: commits.Repository
    reason: str
    detail: str


def _bytes(table: pa.Table) -> int:
    return sum(table.column(schema.BYTES).to_pylist()) if table.num_rows else 0


@dataclass(frozen=True)
class CommitShard:
    """What one commits job reads: consecutive parts of the plan whose commits together fit in
    one slice (``commits_per_slice``), so that a folder of small repositories is not a job each, and
    a shard of every later stage, per repository. A long history's slice is a shard alone."""

    parts: tuple[commits.CommitSlice | RepositoryProblem, ...]


def commits_job(ctx: JobContext, shard: int, planned: CommitShard, cfg: CommitsConfig) -> dict[str, Any]:
    """Read one shard's slices in plan order (their batches gathered: at most ``commits_per_slice``
    commits in memory); a repository that cannot be read is its one drop row."""
    t0 = time.perf_counter()
    tables, drops, counters, rows_in = [], [], Counter[str](), 0
    for part in planned.parts:
        if isinstance(part, commits.CommitSlice):
            read = commits.read_slice_table(part, cfg)
            rows_in += read.counters["commits"] + read.counters[commits.METADATA_RECORDS]
        else:
            read = _problem_drop(part)
            rows_in += 1
        tables.append(read.table)
        drops.append(read.dropped)
        counters.update(read.counters)
    result = MapResult(pa.concat_tables(tables), concat_drops(drops), counters)
    bytes_in = _bytes(result.table) + _bytes(result.dropped)  # a source's input is what it read
    stats = result_stats(rows_in, bytes_in, 0, {}, result, time.perf_counter() - t0)
    return finish_shard(ctx, shard, result, stats)


def _problem_drop(problem: RepositoryProblem) -> MapResult:
    """A repository that cannot be read: no commit, one drop naming why."""
    repo = problem.repository
    drop = {
        schema.ID: schema.document_id(repo.source, repo.repo, ".", "repository"), schema.STAGE: commits.STAGE,
        schema.REASON: problem.reason, schema.LANG: schema.UNKNOWN, schema.BYTES: 0, schema.SOURCE: repo.source,
        schema.REPO: repo.repo, schema.PATH: ".", schema.DETAIL: problem.detail[:300], schema.SCORE: None,
        schema.THRESHOLD: None, schema.DUP_OF: None,
    }  # fmt: skip
    return MapResult(C.COMMIT_SCHEMA.empty_table(), pa.Table.from_pylist([drop], schema=schema.DROP_SCHEMA))


# --- task_outputs -------------------------------------------------------------------------


def records_path(run: schema.RunPaths, stage: str, split: str, shard: int) -> Path:
    return run.work_dir(stage, "records") / f"{split}-{schema.shard_name(shard)}.jsonl"


def _write_lines(path: Path, lines: Iterator[str]) -> int:
    """Write lines atomically; returns how many."""
    n = 0
    with atomic_writer(path) as f:
        for line in lines:
            f.write(line.encode())
            n += 1
    return n


def records_job(ctx: JobContext, shard: int, in_stage: str, cfg: TaskSetConfig) -> dict[str, Any]:
    """One candidates shard -> its train and evaluation records, each sorted by instance id.

    The shard's exact duplicates of tasks kept elsewhere (the decide phase's, ``tasks/unique.py``)
    are ``duplicate_task`` drops; every other candidate is a task: the time split routes, never drops.
    """
    t0 = time.perf_counter()
    candidates = read_parquet(ctx.run.part(in_stage, shard))
    dups = read_parquet(ctx.run.work_part(ctx.stage, "decide", shard, 0))
    table, dropped = unique.split_duplicates(candidates, dups)
    train, held = swebench.task_records(table, cfg)
    counts = {}
    for split, records in zip(SPLITS, (train, held), strict=True):
        lines = map(swebench.task_line, records)
        counts[split] = _write_lines(records_path(ctx.run, ctx.stage, split, shard), lines)
    result = MapResult(table, dropped, counters={f"tasks_{k}": v for k, v in counts.items()})
    stats = result_stats(candidates.num_rows, _bytes(candidates), 0, lang_breakdown(candidates), result,
                         time.perf_counter() - t0)  # fmt: skip
    write_parquet(ctx.run.dropped(ctx.stage, shard), dropped)
    write_marker(ctx, schema.shard_name(shard), stats)
    return stats


def _sort_key(line: str) -> tuple[str, str]:
    record = json.loads(line)
    return record["instance_id"], record["commit"]


def unique_ids(lines: Iterator[str]) -> Iterator[str]:
    """Sorted task lines with each instance id once: when several changes name one pull request (a
    cherry-pick, a second "(#N)"), each after the first in sha order gets its sha's 12 hex appended."""
    last = None
    for line in lines:
        record = json.loads(line)
        if record["instance_id"] == last:
            record["instance_id"] = f"{last}-{record['commit'][:12]}"
            line = swebench.task_line(record)
        else:
            last = record["instance_id"]
        yield line


def merge_job(ctx: JobContext, n_shards: int, cfg: TaskSetConfig, marker: str) -> dict[str, Any]:
    """Merge the shards' sorted records into ``tasks/`` (one line per shard in memory at a time).

    The evaluation file is written only with ``eval_after`` (without it every task is training).
    """
    t0 = time.perf_counter()
    out: dict[str, Any] = {}
    for split in SPLITS if cfg.eval_after is not None else SPLITS[:1]:
        handles = [ensure_local(records_path(ctx.run, ctx.stage, split, s)).open(encoding="utf-8") for s in range(n_shards)]
        try:
            path = ctx.run.task_file(split)
            n = _write_lines(path, unique_ids(heapq.merge(*handles, key=_sort_key)))
        finally:
            for h in handles:
                h.close()
        out[schema.TASK_FILES[split].removesuffix(".jsonl")] = {
            "path": f"{schema.TASKS_DIR}/{schema.TASK_FILES[split]}", "records": n, "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
        }  # fmt: skip
    stats = {"files": out, "seconds": round(time.perf_counter() - t0, 4)}
    write_marker(ctx, marker, stats)
    return stats


# --- the edit set's manifest ------------------------------------------------------------------


def write_edit_manifest(
    run: schema.RunPaths, recipe: Recipe, shard_stats: list[dict[str, Any]], emitted: EmittedShards
) -> Path:
    """The edit set's manifest over the emitted shards: an SFT set (loss on the target only) of
    ``edit`` examples."""
    out, tok_cfg, stages = sft_output(recipe), recipe.tokenizer, recipe.stages
    tokenizer = load_tokenizer(tok_cfg)
    template = choose_template(stages.sft_render, tok_cfg)
    manifest = mf.build_set_manifest(
        name=out.name, set_dir=run.set_dir(out.name), shards=emitted.records,
        tokenizer={**tokenizer.fingerprint(), "config": tokenizer_config_record(run, tok_cfg),
                   "chat_template_sha256": template.sha256},
        token_dtype=megatron.token_dtype(tokenizer.vocab_size).name, seq_len=out.seq_len,
        packing={"algorithm": "bfd", "truncated_documents": 0, "padding_stored": False,
                 "merged_shards": emitted.merged},
        recipe_hash=recipe_hash(recipe),
        provenance={"sources": [s.model_dump(mode="json") for s in recipe.sources], "stages": stages.enabled(),
                    "seed": recipe.seed},
    )  # fmt: skip
    totals = manifest["totals"]
    formats: dict[str, int] = {}
    for s in shard_stats:
        for k, v in s["set"]["formats"].items():
            formats[k] = formats.get(k, 0) + v
    manifest["kind_of_set"] = "edit"
    manifest["sft"] = {
        "examples": totals["segments"], "commits": totals["documents"], "loss_tokens": totals["loss_tokens"],
        "chat_template": template.record(), "render": stages.sft_render.model_dump(mode="json"),
        "edit_set": stages.edit_set.model_dump(mode="json"), "formats": dict(sorted(formats.items())),
    }  # fmt: skip
    path = run.set_manifest(out.name)
    mf.write_manifest(path, manifest)
    return path

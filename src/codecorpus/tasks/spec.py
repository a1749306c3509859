"""The repository-history stages, declared (the pipeline: ``REPO_TASKS`` in ``pipeline/pipelines.py``)::

    commits (source: one job per slice of a long history, or per group of small histories)
      -> commit_filters (filter) -> commit_dedup (keys -> groups -> clusters -> apply)   the edit set's path
      -> task_candidates (filter, reads commits)                                          the tasks' path
      -> edit_set (filter, reads commit_dedup) -> sft_render (the SFT stage: chat template, loss masks)
      -> task_outputs (sink)   tasks/tasks.jsonl, tasks/tasks-eval.jsonl (from task_candidates),
                               shards/<edit set>/ (sft_render's examples, packed), manifest.json

Two products, two sets of rules: the edit set is made of every deduplicated single commit
that passes CommitPackFT's rules; the task files of the mainline's changes as they landed (a
merge's whole pull request, a squash or rebase commit) that change tests and code, under the
candidates' own rules. Both keep the time split: a task merged (a commit committed) after
``task_outputs.eval_after`` is an evaluation task and never a training example. The repositories come from the recipe's ``type: git`` sources, found as
ingest finds them: a repository, a folder searched for repositories, or a list file.

The job bodies are in ``tasks/bodies.py``, the commits plan in ``tasks/plan.py``. Like every
spec module, this one imports them inside the functions that use them: a recipe's load imports
every spec (the stage registry), and none of the stages' dependencies.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codecorpus import schema
from codecorpus.packing.spec import merge_small_shards
from codecorpus.pipeline.spec import Job, PlanTasks, StageRun, StageSpec
from codecorpus.tasks.config import (
    CommitDedupConfig,
    CommitFiltersConfig,
    CommitsConfig,
    EditSetConfig,
    TaskCandidatesConfig,
    TaskSetConfig,
)

if TYPE_CHECKING:
    from codecorpus.tasks.bodies import CommitShard


# --- commits ---------------------------------------------------------------------------------


def plan_commits(recipe: Any, plan_tasks: PlanTasks) -> tuple[list[CommitShard], str]:
    """The shards of every repository's walk and their hash (``tasks/plan.py``)."""
    from codecorpus.tasks import plan

    return plan.plan_commits(recipe, plan_tasks)


def commit_jobs(run: StageRun) -> list[Job]:
    """One job per shard: a slice of a long history, or the small histories of several repositories."""
    from codecorpus.tasks import bodies as task_bodies
    from codecorpus.tasks.commits import CommitSlice

    jobs = []
    for i, shard in enumerate(run.shards):
        reads = [p.repository.gitdir or p.repository.repo for p in shard.parts]
        reads += [p.listing for p in shard.parts if isinstance(p, CommitSlice) and p.listing is not None]
        jobs.append(Job(schema.shard_name(i), task_bodies.commits_job, (run.ctx, i, shard, run.cfg), tuple(reads)))
    return jobs


# --- the map stages --------------------------------------------------------------------------


def filters_fn(run: StageRun) -> functools.partial:
    """CommitPackFT's rules; in ``mode: annotate`` the same function keeps every row (no drops)."""
    from codecorpus.tasks import filters

    return functools.partial(filters.run, cfg=run.cfg)


def candidates_fn(run: StageRun) -> functools.partial:
    """The tasks' own rules over the commits source's rows; the candidates read each repository (the
    commits a merge landed, the apply check) in its git directory, found as the plan found it."""
    from codecorpus.tasks import candidates, plan

    repos = plan.repository_dirs(run.recipe)
    return functools.partial(candidates.run, cfg=run.cfg, repos=repos)


def _eval_after(recipe: Any) -> Any:
    return recipe.stages.task_outputs.eval_after if recipe.stages.task_outputs is not None else None


def edit_fn(run: StageRun) -> functools.partial:
    from codecorpus.tasks import edits

    return functools.partial(edits.run_training, cfg=run.cfg, eval_after=_eval_after(run.recipe))


def edit_parts(recipe: Any) -> list[Any]:
    """The time split decides which commits may be training examples."""
    when = _eval_after(recipe)
    return [when.isoformat() if when is not None else None]


# --- commit_dedup ----------------------------------------------------------------------------


def dedup_phases(run: StageRun) -> list[dict[str, Any]]:
    """keys (per shard) -> groups (per bucket) -> clusters (one job, duplicates only) -> apply."""
    from codecorpus.pipeline import bodies
    from codecorpus.tasks import dedup

    cfg, ctx, upstream = run.cfg, run.ctx, run.upstream
    n, b = run.shard_count(upstream), cfg.buckets
    run.run_phase("commit_dedup: keys", [
        Job(f"keys-{schema.shard_name(i)}", bodies.scatter_job,
            (ctx, "keys", i, upstream, functools.partial(dedup.scatter_keys, cfg=cfg, buckets=b)),
            (str(run.run.part(upstream, i)),))
        for i in range(n)
    ])
    run.run_phase("commit_dedup: groups", [
        Job(f"groups-p{p:05d}", bodies.reduce_job, (ctx, "groups", "keys", p, n, dedup.group_keys))
        for p in range(b)
    ])
    run.run_phase("commit_dedup: clusters", [
        Job("clusters-p00000", bodies.reduce_job,
            (ctx, "clusters", "groups", 0, b, functools.partial(dedup.decide_clusters, cfg=cfg, n_shards=n)))
    ])
    return run.run_output_jobs("commit_dedup: apply", [
        Job(schema.shard_name(i), bodies.apply_own_job,
            (ctx, i, upstream, ("keys", b), "clusters", 1, dedup.apply_clusters), (str(run.run.part(upstream, i)),))
        for i in range(n)
    ])


# --- task_outputs ----------------------------------------------------------------------------


def output_phases(run: StageRun) -> list[dict[str, Any]]:
    """keys (per candidates shard) -> decide (one job: exact duplicates across repositories,
    ``tasks/unique.py``) -> records (per shard, its duplicates dropped) -> write (merge, one line
    per shard in memory); the edit set packed (per rendered shard, the SFT pack body) with its
    manifest; then the run manifest: the edit set and the task files, each with its sha256.
    The stage's rows are the tasks."""
    from codecorpus.manifests import manifest as mf
    from codecorpus.pipeline import bodies
    from codecorpus.tasks import bodies as task_bodies
    from codecorpus.tasks import unique

    cfg, ctx, upstream = run.cfg, run.ctx, run.upstream
    n = run.shard_count(upstream)
    run.run_phase("task_outputs: keys", [
        Job(f"keys-{schema.shard_name(i)}", bodies.scatter_job, (ctx, "keys", i, upstream, unique.task_keys),
            (str(run.run.part(upstream, i)),))
        for i in range(n)
    ])  # fmt: skip
    decide = functools.partial(unique.decide, n_shards=n)
    run.run_phase("task_outputs: decide", [
        Job("decide-p00000", bodies.reduce_job, (ctx, "decide", "keys", 0, n, decide))
    ])  # fmt: skip
    results = run.run_output_jobs("task_outputs: records", [
        Job(schema.shard_name(i), task_bodies.records_job, (ctx, i, upstream, cfg), (str(run.run.part(upstream, i)),))
        for i in range(n)
    ])
    merged = run.run_phase("task_outputs: write", [Job("write", task_bodies.merge_job, (ctx, n, cfg, "write"))])[0]
    sets = [_pack_edit_set(run)] if run.recipe.stages.sft_render is not None else []
    manifest = mf.build_run_manifest(run.run.root, sets, files=merged["files"])
    mf.write_run_manifest(run.run.root, manifest)
    return results


def _pack_edit_set(run: StageRun) -> Path:
    from codecorpus.sft import bodies as sft_bodies
    from codecorpus.tasks import bodies as task_bodies

    out, rendered = sft_bodies.sft_output(run.recipe), "sft_render"
    packed = run.run_phase(f"task_outputs: {out.name}", [
        Job(f"{out.name}-{schema.shard_name(i)}", sft_bodies.pack_job,
            (run.ctx, out, i, rendered, run.recipe.tokenizer), (str(run.run.part(rendered, i)),))
        for i in range(run.shard_count(rendered))
    ])
    return task_bodies.write_edit_manifest(run.run, run.recipe, packed, merge_small_shards(run, out, packed))


def output_parts(recipe: Any) -> list[Any]:
    """The edit set is packed here: the tokenizer and the output set's settings shape it."""
    return [recipe.tokenizer, [o.model_dump(mode="json") for o in recipe.outputs]]


COMMITS = StageSpec("commits", "source", CommitsConfig, plan=plan_commits, source_jobs=commit_jobs)
COMMIT_FILTERS = StageSpec("commit_filters", "filter", CommitFiltersConfig, map_fn=filters_fn)
COMMIT_DEDUP = StageSpec("commit_dedup", "global", CommitDedupConfig, phases=dedup_phases)
TASK_CANDIDATES = StageSpec(
    "task_candidates", "filter", TaskCandidatesConfig, map_fn=candidates_fn, upstream="commits"
)
EDIT_SET = StageSpec(
    "edit_set", "filter", EditSetConfig, map_fn=edit_fn, upstream="commit_dedup", hash_parts=edit_parts
)
TASK_OUTPUTS = StageSpec(
    "task_outputs", "sink", TaskSetConfig, phases=output_phases, upstream="task_candidates",
    hash_parts=output_parts, output_dirs=(schema.TASKS_DIR, schema.SETS_DIR), output_files=(schema.MANIFEST_NAME,),
)

"""The repository-history stages, declared (the pipeline: ``REPO_TASKS`` in ``pipeline/pipelines.py``)::

    commits (source: one task per slice of a long history, or per group of small histories)
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
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codecorpus import schema
from codecorpus.ingest import git
from codecorpus.ingest.config import GitSource
from codecorpus.manifests import manifest as mf
from codecorpus.model import RecipeError, config_hash
from codecorpus.packing.spec import merge_small_shards
from codecorpus.pipeline import bodies
from codecorpus.pipeline.spec import (
    Job,
    PlanTasks,
    StageRun,
    StageSpec,
    plan_batches,
    plan_inline,
    repositories,
)
from codecorpus.sft import bodies as sft_bodies
from codecorpus.storage import mirror
from codecorpus.tasks import bodies as task_bodies
from codecorpus.tasks import candidates, dedup, edits, filters, github, unique
from codecorpus.tasks.commits import CommitSlice, GitError, Repository, plan_slices
from codecorpus.tasks.config import (
    CommitDedupConfig,
    CommitFiltersConfig,
    CommitsConfig,
    EditSetConfig,
    TaskCandidatesConfig,
    TaskSetConfig,
)

log = logging.getLogger(__name__)

Part = CommitSlice | task_bodies.RepositoryProblem
"""One repository's slice, or a repository that cannot be read: what the plan lists."""


# --- commits: the plan ---------------------------------------------------------------------


def _listed(src: GitSource) -> list[git.Found]:
    form = git.source_form(src)
    found = git.find_repositories(Path(src.path)) if form == "folder" else git.listed_repositories(Path(src.path))
    named = git.name_repositories(list(found))
    if not named:
        raise RecipeError(f"sources[{src.name}].path: no git repository under {src.path}; point path at a "
                          "repository, a folder of repositories, or a list file of repository paths/URLs")  # fmt: skip
    return named


INLINE_REPOSITORIES = 500
"""Folders and lists of at most this many local repositories are planned on the driver, beside
Ray's start; more are planned in tasks (``BATCH_REPOSITORIES`` a task), ``PLAN_INLINE_ENV``
overriding. A repository's plan is two git processes; planning tasks first wait for Ray's
workers and then share the plan among the CPUs, so they pay off only for folders of several
hundred repositories, later on few CPUs than on many; the threshold lies between the two."""
BATCH_REPOSITORIES = 100


def _source_parts(src: GitSource, cfg: CommitsConfig, plan_dir: Path, plan_tasks: PlanTasks) -> list[Part]:
    """The slices of every repository of one source; a repository of a folder or list that git
    cannot open (or without the revision) is one drop, a lone repository is a recipe error.

    The repositories of a folder or list are found on the driver, and planned there when they
    are few; else in planning tasks (each repository's ``rev-parse`` and ``rev-list``: a few
    ms of git each, which on a folder of 10,000 repositories would keep the driver a minute).
    Repositories to be cloned from URLs are planned on the driver, which clones them; a slice
    read on another node clones its URL there (``Repository.url``). The parts are in the order
    of the source's repositories either way."""
    if git.source_form(src) == "repository":
        repo = Repository(src.name, git.repo_name(src), git.resolve_gitdir(src), git.url_of(src.path))
        try:
            return list(plan_slices([repo], cfg, src.revision, plan_dir))
        except GitError as err:
            raise RecipeError(f"sources[{src.name}]: {err}") from None
    found = _listed(src)
    planner = _PlanRepositories(src, cfg, str(plan_dir))
    local = [f for f in found if not git.is_url(f.location)]
    if len(local) <= plan_inline(INLINE_REPOSITORIES):
        return [part for parts in planner(found) for part in parts]
    clones = iter(planner([f for f in found if git.is_url(f.location)]))
    t0 = time.perf_counter()
    batches = plan_batches(local, BATCH_REPOSITORIES)
    planned = plan_tasks.map(f"plan-{src.name}", planner, batches, repositories)
    in_tasks = iter([parts for batch in planned for parts in batch])
    log.info("commits: planned %d repositories of %s in planning tasks (%d) in %.1f s, %d to clone on the driver",
             len(local), src.name, len(batches), time.perf_counter() - t0, len(found) - len(local))
    return [part for f in found for part in next(clones if git.is_url(f.location) else in_tasks)]


@dataclass(frozen=True)
class _PlanRepositories:
    """The slices (or the drop) of each of some repositories of one folder or list source, in order."""

    src: GitSource
    cfg: CommitsConfig
    plan_dir: str

    def __call__(self, found: Sequence[git.Found]) -> list[list[Part]]:
        out: list[list[Part]] = []
        for f in found:
            repo = Repository(self.src.name, f.name, "")
            if f.problem is not None:
                out.append([task_bodies.RepositoryProblem(repo, *f.problem)])
                continue
            try:
                gitdir = git.resolve_gitdir(self.src.model_copy(update={"path": f.location, "repo": None}))
                repo = Repository(self.src.name, f.name, gitdir, git.url_of(f.location))
                out.append(plan_slices([repo], self.cfg, self.src.revision, self.plan_dir))
            except (RecipeError, GitError) as err:
                out.append([task_bodies.RepositoryProblem(repo, "bad_repository", str(err))])
        return out


def plan_commits(recipe: Any, plan_tasks: PlanTasks) -> tuple[list[task_bodies.CommitShard], str]:
    """The shards of every repository's walk (``git rev-list``, no commit read) and their hash: a new
    commit on a branch moves its tip, and new GitHub metadata changes its files' hashes, either of
    which redoes the stages. A walk of every parent longer
    than a slice is written to the run's plan folder, from which its slices read their commits."""
    cfg = recipe.stages.commits
    meta = cfg.github_metadata
    if meta is not None and not git.is_url(meta) and not meta.startswith("s3://") and not Path(meta).is_dir():
        raise RecipeError(f"stages.commits.github_metadata: {meta} is not a folder; point it at a folder holding "
                          "owner__name.json or owner__name/*.json per repository (gh api --paginate output)")  # fmt: skip
    plan_dir = plan_tasks.run.plan_dir(COMMITS.name)
    mirror.remove_tree(plan_dir)  # walks of an older plan
    parts = [part for src in recipe.sources for part in _source_parts(src, cfg, plan_dir, plan_tasks)]
    if not parts:
        raise RecipeError("stages.commits: no commit of any repository is in the walk: widen since / until, "
                          "or check each source's revision")  # fmt: skip
    shards = _grouped(parts, cfg.commits_per_slice)
    metadata = sorted({p.repository.repo for p in parts}) if meta is not None else []
    metadata_hash = [[repo, github.fingerprint(meta, repo)] for repo in metadata]
    return shards, config_hash([[[_fingerprint(part) for part in shard.parts] for shard in shards], metadata_hash])


SHARD_PARTS = 100
"""The most repositories one commits shard reads (each costs a few git processes)."""


def _grouped(parts: list[Part], commits_per_slice: int) -> list[task_bodies.CommitShard]:
    """Consecutive parts into shards of at most ``commits_per_slice`` commits and ``SHARD_PARTS``
    parts (a repository that cannot be read counts as one): a long history's slices are a shard
    each, a folder's small histories share theirs."""
    shards, group, total = [], [], 0
    for part in parts:
        size = part.count if isinstance(part, CommitSlice) else 1
        if group and (total + size > commits_per_slice or len(group) == SHARD_PARTS):
            shards.append(task_bodies.CommitShard(tuple(group)))
            group, total = [], 0
        group.append(part)
        total += size
    return [*shards, task_bodies.CommitShard(tuple(group))] if group else shards


def _fingerprint(part: Part) -> list[Any]:
    repo = part.repository
    if isinstance(part, task_bodies.RepositoryProblem):
        return [repo.source, repo.repo, part.reason, part.detail]
    # what the slice's git is given: its first commit, or the walk file's bytes
    return [repo.source, repo.repo, part.tip, part.skip, part.count, part.start or part.walk_sha256]


def commit_jobs(run: StageRun) -> list[Job]:
    """One task per shard: a slice of a long history, or the small histories of several repositories."""
    jobs = []
    for i, shard in enumerate(run.shards):
        reads = [p.repository.gitdir or p.repository.repo for p in shard.parts]
        reads += [p.listing for p in shard.parts if isinstance(p, CommitSlice) and p.listing is not None]
        jobs.append(Job(schema.shard_name(i), task_bodies.commits_job, (run.ctx, i, shard, run.cfg), tuple(reads)))
    return jobs


# --- the map stages --------------------------------------------------------------------------


def filters_fn(run: StageRun) -> functools.partial:
    """CommitPackFT's rules; in ``mode: annotate`` the same function keeps every row (no drops)."""
    return functools.partial(filters.run, cfg=run.cfg)


def candidates_fn(run: StageRun) -> functools.partial:
    """The tasks' own rules over the commits source's rows; the candidates read each repository (the
    commits a merge landed, the apply check) in its git directory, found as the plan found it."""
    repos = repository_dirs(run.recipe)
    return functools.partial(candidates.run, cfg=run.cfg, repos=repos)


def repository_dirs(recipe: Any) -> dict[tuple[str, str], tuple[str, str]]:
    """(source, repository) -> (git directory, the URL it is a clone of, or '') of every repository
    of the recipe's git sources, found as the commits plan finds them (a URL's clone is the plan's)."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for src in recipe.sources:
        if not isinstance(src, GitSource):
            continue
        if git.source_form(src) == "repository":
            out[src.name, git.repo_name(src)] = (git.resolve_gitdir(src), git.url_of(src.path))
            continue
        for f in _listed(src):
            if f.problem is None:
                try:
                    gitdir = git.resolve_gitdir(src.model_copy(update={"path": f.location, "repo": None}))
                except RecipeError:
                    continue  # the commits stage dropped it as bad_repository
                out[src.name, f.name] = (gitdir, git.url_of(f.location))
    return out


def _eval_after(recipe: Any) -> Any:
    return recipe.stages.task_outputs.eval_after if recipe.stages.task_outputs is not None else None


def edit_fn(run: StageRun) -> functools.partial:
    return functools.partial(edits.run_training, cfg=run.cfg, eval_after=_eval_after(run.recipe))


def edit_parts(recipe: Any) -> list[Any]:
    """The time split decides which commits may be training examples."""
    when = _eval_after(recipe)
    return [when.isoformat() if when is not None else None]


# --- commit_dedup ----------------------------------------------------------------------------


def dedup_phases(run: StageRun) -> list[dict[str, Any]]:
    """keys (per shard) -> groups (per bucket) -> clusters (one task, duplicates only) -> apply."""
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
    """keys (per candidates shard) -> decide (one task: exact duplicates across repositories,
    ``tasks/unique.py``) -> records (per shard, its duplicates dropped) -> write (merge, one line
    per shard in memory); the edit set packed (per rendered shard, the SFT pack body) with its
    manifest; then the run manifest: the edit set and the task files, each with its sha256.
    The stage's rows are the tasks."""
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

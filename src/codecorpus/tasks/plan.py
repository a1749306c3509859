"""The commits source's plan: every repository of the recipe's ``type: git`` sources, walked
(``git rev-list``, no commit read) and cut into slices, the slices grouped into shards.

``tasks/spec.py`` calls it when the stage plans (``plan_commits``) and when the candidates stage
starts (``repository_dirs``), so that a recipe's load imports none of it. A folder or list of
more than ``INLINE_REPOSITORIES`` repositories is planned in planning tasks
(:class:`_PlanRepositories`, ``BATCH_REPOSITORIES`` a task); consecutive small histories share
a shard (up to ``commits_per_slice`` commits and ``SHARD_PARTS`` repositories).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codecorpus.ingest import git
from codecorpus.ingest.config import GitSource
from codecorpus.model import RecipeError, config_hash
from codecorpus.pipeline.spec import PlanTasks, plan_batches, plan_inline, repositories
from codecorpus.storage import mirror
from codecorpus.tasks import github
from codecorpus.tasks.bodies import CommitShard, RepositoryProblem
from codecorpus.tasks.commits import STAGE, CommitSlice, GitError, Repository, plan_slices
from codecorpus.tasks.config import CommitsConfig

log = logging.getLogger(__name__)

Part = CommitSlice | RepositoryProblem
"""One repository's slice, or a repository that cannot be read: what the plan lists."""


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
                out.append([RepositoryProblem(repo, *f.problem)])
                continue
            try:
                gitdir = git.resolve_gitdir(self.src.model_copy(update={"path": f.location, "repo": None}))
                repo = Repository(self.src.name, f.name, gitdir, git.url_of(f.location))
                out.append(plan_slices([repo], self.cfg, self.src.revision, self.plan_dir))
            except (RecipeError, GitError) as err:
                out.append([RepositoryProblem(repo, "bad_repository", str(err))])
        return out


def plan_commits(recipe: Any, plan_tasks: PlanTasks) -> tuple[list[CommitShard], str]:
    """The shards of every repository's walk (``git rev-list``, no commit read) and their hash: a new
    commit on a branch moves its tip, and new GitHub metadata changes its files' hashes, either of
    which redoes the stages. A walk of every parent longer
    than a slice is written to the run's plan folder, from which its slices read their commits."""
    cfg = recipe.stages.commits
    meta = cfg.github_metadata
    if meta is not None and not git.is_url(meta) and not meta.startswith("s3://") and not Path(meta).is_dir():
        raise RecipeError(f"stages.commits.github_metadata: {meta} is not a folder; point it at a folder holding "
                          "owner__name.json or owner__name/*.json per repository (gh api --paginate output)")  # fmt: skip
    plan_dir = plan_tasks.run.plan_dir(STAGE)
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


def _grouped(parts: list[Part], commits_per_slice: int) -> list[CommitShard]:
    """Consecutive parts into shards of at most ``commits_per_slice`` commits and ``SHARD_PARTS``
    parts (a repository that cannot be read counts as one): a long history's slices are a shard
    each, a folder's small histories share theirs."""
    shards, group, total = [], [], 0
    for part in parts:
        size = part.count if isinstance(part, CommitSlice) else 1
        if group and (total + size > commits_per_slice or len(group) == SHARD_PARTS):
            shards.append(CommitShard(tuple(group)))
            group, total = [], 0
        group.append(part)
        total += size
    return [*shards, CommitShard(tuple(group))] if group else shards


def _fingerprint(part: Part) -> list[Any]:
    repo = part.repository
    if isinstance(part, RepositoryProblem):
        return [repo.source, repo.repo, part.reason, part.detail]
    # what the slice's git is given: its first commit, or the walk file's bytes
    return [repo.source, repo.repo, part.tip, part.skip, part.count, part.start or part.walk_sha256]


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

"""The environment stages, declared::

    env_discover (source) -> env_verify (filter) -> task_validate (sink)

- ``env_discover``: one job per repository of the recipe's ``git`` or ``local`` sources
  (``envs/repos.py``): its versions (commits grouped by dependency-file hash) with their
  ranked install and test candidates.
- ``env_verify``: each version's candidates run in the sandbox; a verified one writes
  ``envs/<repo>@<hash>.json`` and its Dockerfile, a failed one is a drop with its verdict.
- ``task_validate``: the SWE-bench-format task candidates of ``task_validate.tasks``, one job
  per repository, validated against its verified environment and by use; then
  ``verified/tasks.jsonl`` and the RL manifest.

The job bodies are in ``envs/bodies.py`` (docs/envs.md tells what each checks); this module
imports them inside the functions that use them, so a recipe's load imports none of them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from codecorpus import schema
from codecorpus.envs.config import (
    ENV_TRACES_DIR,
    ENVS_DIR,
    VERIFIED_DIR,
    EnvDiscoverConfig,
    EnvVerifyConfig,
    TaskValidateConfig,
)
from codecorpus.model import RecipeError
from codecorpus.pipeline.spec import Job, StageRun, StageSpec
from codecorpus.pipeline.user import source_digest
from codecorpus.storage.atomic import file_digests


def plan_repositories(recipe: Any, plan_tasks: Any = None) -> tuple[list[Any], str]:
    """One shard per repository (a ``repos.RepoRef``), and the plan's hash."""
    from codecorpus.envs import repos

    return repos.plan_repositories(recipe, plan_tasks)


def discover_jobs(run: StageRun) -> list[Job]:
    from codecorpus.envs import bodies

    return [Job(schema.shard_name(i), bodies.discover_job, (run.ctx, i, ref, run.cfg), (ref.location,))
            for i, ref in enumerate(run.shards)]


def verify_fn(run: StageRun) -> functools.partial:
    from codecorpus.envs import bodies

    return functools.partial(bodies.verify_table, cfg=run.cfg, root=str(run.run.root))


def verify_parts(recipe: Any) -> list[Any]:
    """The host toolchains' versions and platform (a new Python or Node redoes verification:
    the cached installs and the specs depend on them), and the proposer's code (its source
    file's digest)."""
    from codecorpus.envs import discover, propose, toolchains

    cfg = recipe.stages.env_verify
    parts: list[Any] = [toolchains.host_versions(), discover.HOST_PLATFORM]
    if cfg.proposer:
        parts.append(source_digest(propose.resolve(cfg.proposer)))
    return parts


def check_verify(recipe: Any) -> None:
    from codecorpus.envs import propose
    from codecorpus.envs import sandbox as sb

    cfg = recipe.stages.env_verify
    if cfg.proposer:
        propose.resolve(cfg.proposer)
    if cfg.sandbox.kind == "bwrap":
        why = sb.available()
        if why:
            raise RecipeError(f"stages.env_verify: the sandbox cannot run: {why}")


def validate_phases(run: StageRun) -> list[dict[str, Any]]:
    """One job per repository, one for candidates of no repository, then the outputs."""
    from codecorpus.envs import bodies

    cfg, verify_cfg = run.cfg, run.recipe.stages.env_verify
    refs = list(run.shards)
    names = [r.name for r in refs]
    jobs = [Job(schema.shard_name(i), bodies.validate_task_job,
                (run.ctx, i, run.upstream, ref, names, cfg, verify_cfg),
                (str(run.run.part(run.upstream, i)), cfg.tasks or ""))
            for i, ref in enumerate(refs)]
    jobs.append(Job(schema.shard_name(len(refs)), bodies.unmatched_job,
                    (run.ctx, len(refs), names, cfg), (cfg.tasks or "",)))
    results = run.run_output_jobs("task_validate", jobs)
    run.call("task_validate:outputs", bodies.write_task_outputs, run.ctx, len(jobs), str(run.run.root))
    return results


def validate_parts(recipe: Any) -> list[Any]:
    """The task file's contents."""
    path = recipe.stages.task_validate.tasks
    return file_digests([path]) if path else [None]


def check_validate(recipe: Any) -> None:
    path = recipe.stages.task_validate.tasks
    if path and not Path(path).is_file():
        raise RecipeError(f"stages.task_validate.tasks: {path} does not exist: point it at a SWE-bench-format "
                          "JSONL (e.g. a repo-tasks run's tasks/tasks.jsonl)")


ENV_DISCOVER = StageSpec("env_discover", "source", EnvDiscoverConfig, plan=plan_repositories,
                         source_jobs=discover_jobs)
ENV_VERIFY = StageSpec("env_verify", "filter", EnvVerifyConfig, map_fn=verify_fn, hash_parts=verify_parts,
                       output_dirs=(ENVS_DIR, ENV_TRACES_DIR), check=check_verify)
TASK_VALIDATE = StageSpec("task_validate", "sink", TaskValidateConfig, phases=validate_phases,
                          hash_parts=validate_parts, output_dirs=(VERIFIED_DIR,),
                          output_files=(schema.MANIFEST_NAME,), check=check_validate, config_paths=("tasks",))

"""The pipelines, as ordered tuples of stage specs: they read like the recipes they run.

A recipe runs the stages of its pipeline that it enables (``stages.<name>: {...}``), in
this order, with the user's own stages (``stages.<name>: {use: ...}``) inserted after
the stage each names in ``after:``. Adding a built-in stage is one module with its spec
plus one entry here.
"""

from __future__ import annotations

from typing import Any

from codecorpus.dedup.spec import DEDUP
from codecorpus.envs.stages import ENV_DISCOVER, ENV_VERIFY, TASK_VALIDATE
from codecorpus.filters.spec import FILTERS
from codecorpus.ingest.spec import INGEST
from codecorpus.langid.spec import LANGID
from codecorpus.packing.spec import PACK
from codecorpus.pipeline.config import insert_user_stages
from codecorpus.pipeline.spec import Pipeline, StageSpec
from codecorpus.pipeline.user import user_spec
from codecorpus.sft.spec import (
    SFT_DEDUP,
    SFT_INGEST,
    SFT_PACK,
    SFT_RENDER,
    SFT_SELECT,
    SFT_VALIDATE,
)
from codecorpus.tasks.spec import (
    COMMIT_DEDUP,
    COMMIT_FILTERS,
    COMMITS,
    EDIT_SET,
    TASK_CANDIDATES,
    TASK_OUTPUTS,
)
from codecorpus.tokenize.spec import TOKENIZE

PRETRAIN: Pipeline = (INGEST, LANGID, FILTERS, DEDUP, TOKENIZE, PACK)
SFT: Pipeline = (SFT_INGEST, SFT_VALIDATE, SFT_SELECT, SFT_DEDUP, SFT_RENDER, SFT_PACK)
REPO_TASKS: Pipeline = (
    COMMITS, COMMIT_FILTERS, COMMIT_DEDUP, TASK_CANDIDATES, EDIT_SET, SFT_RENDER, TASK_OUTPUTS,
)
REPO_ENVS: Pipeline = (ENV_DISCOVER, ENV_VERIFY, TASK_VALIDATE)
PIPELINES: dict[str, Pipeline] = {
    "pretrain": PRETRAIN, "sft": SFT, "repo-tasks": REPO_TASKS, "repo-envs": REPO_ENVS,
}


def pipeline_of(recipe: Any) -> Pipeline:
    """The pipeline a recipe runs: environments when it discovers them, SFT when it ingests
    traces, repository tasks when it mines commits, else pretraining."""
    if recipe.stages.env_discover is not None:
        return REPO_ENVS
    if recipe.stages.sft_ingest is not None:
        return SFT
    return REPO_TASKS if recipe.stages.commits is not None else PRETRAIN


def enabled_specs(recipe: Any) -> list[StageSpec]:
    """The stages a recipe runs, in order: the ones of its pipeline it enables (a config in the
    recipe), with its own stages placed after the ones they name."""
    builtin = [spec for spec in pipeline_of(recipe) if spec.config(recipe, spec.name) is not None]
    user = recipe.stages.user_stages()
    by_name = {spec.name: spec for spec in builtin}
    by_name.update({name: user_spec(name, cfg) for name, cfg in user.items()})
    return [by_name[name] for name in insert_user_stages([s.name for s in builtin], user)]


def check_stages(recipe: Any) -> None:
    """Raise RecipeError before any work when an enabled stage cannot run (a bad ``use:``)."""
    for spec in enabled_specs(recipe):
        if spec.check is not None:
            spec.check(recipe)

"""The pipelines, as ordered tuples of stage specs: they read like the recipes they run.

A recipe runs the stages of its pipeline that it enables (``stages.<name>: {...}``), in
this order, with the user's own stages (``stages.<name>: {use: ...}``) inserted after
the stage each names in ``after:``. Adding a built-in stage is one module with its spec
plus one entry here: these lists are the only list of stages (``registered``), from which
the recipe's ``stages:`` model, the order, the ``--set`` shorthands, preflight's path
checks and the manifests' provenance are derived.

Each pipeline's spec modules are imported when the pipeline is first asked for; a recipe's
load asks for all four (``registered``). A spec module imports its stages' job bodies inside
the functions that use them, so that imports the parts' configs and specs, not the stages'
dependencies.
"""

from __future__ import annotations

import itertools
from typing import Any

from codecorpus.pipeline.config import insert_user_stages
from codecorpus.pipeline.spec import Pipeline, StageSpec


def _pretrain() -> Pipeline:
    from codecorpus.dedup.spec import DEDUP
    from codecorpus.filters.spec import FILTERS
    from codecorpus.ingest.spec import INGEST
    from codecorpus.langid.spec import LANGID
    from codecorpus.packing.spec import PACK
    from codecorpus.tokenize.spec import TOKENIZE

    return (INGEST, LANGID, FILTERS, DEDUP, TOKENIZE, PACK)


def _sft() -> Pipeline:
    from codecorpus.sft import spec as sft

    return (sft.SFT_INGEST, sft.SFT_VALIDATE, sft.SFT_SELECT, sft.SFT_DEDUP, sft.SFT_RENDER, sft.SFT_PACK)


def _repo_tasks() -> Pipeline:
    from codecorpus.sft.spec import SFT_RENDER
    from codecorpus.tasks import spec as tasks

    return (tasks.COMMITS, tasks.COMMIT_FILTERS, tasks.COMMIT_DEDUP, tasks.TASK_CANDIDATES, tasks.EDIT_SET,
            SFT_RENDER, tasks.TASK_OUTPUTS)  # fmt: skip


def _repo_envs() -> Pipeline:
    from codecorpus.envs.spec import ENV_DISCOVER, ENV_VERIFY, TASK_VALIDATE

    return (ENV_DISCOVER, ENV_VERIFY, TASK_VALIDATE)


_PIPELINES = {"PRETRAIN": _pretrain, "SFT": _sft, "REPO_TASKS": _repo_tasks, "REPO_ENVS": _repo_envs}
"""The pipelines by module attribute: ``PRETRAIN`` is ``_pretrain()``, made once."""
_KEYS = {"pretrain": "PRETRAIN", "sft": "SFT", "repo-tasks": "REPO_TASKS", "repo-envs": "REPO_ENVS"}


def __getattr__(name: str) -> Any:
    """``PRETRAIN``, ``SFT``, ``REPO_TASKS``, ``REPO_ENVS`` and ``PIPELINES`` (all four by name), made on first use."""
    if name in _PIPELINES:
        globals()[name] = pipeline = _PIPELINES[name]()
        return pipeline
    if name == "PIPELINES":
        return {key: _pipeline(attr) for key, attr in _KEYS.items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _pipeline(attr: str) -> Pipeline:
    """The pipeline ``attr`` names, as set on this module (a test may replace one) or made now."""
    return globals()[attr] if attr in globals() else __getattr__(attr)


def registered() -> Pipeline:
    """Every stage of the pipelines, once, in pipeline order (``REPO_TASKS`` reuses ``sft_render``):
    the one list of stages. The recipe's ``stages:`` model, the stage order, the ``--set``
    shorthands, preflight's path checks and the manifests' provenance are derived from it."""
    specs: dict[str, StageSpec] = {}
    for attr in _KEYS.values():
        for spec in _pipeline(attr):
            specs.setdefault(spec.name, spec)
    return tuple(specs.values())


def stage_order() -> tuple[str, ...]:
    """The built-in stage names in run order (``registered``)."""
    return tuple(spec.name for spec in registered())


def pipeline_stages(key: str) -> tuple[str, ...]:
    """The stage names of one pipeline (``pretrain``, ``sft``, ``repo-tasks``, ``repo-envs``)."""
    return tuple(spec.name for spec in _pipeline(_KEYS[key]))


def set_stages() -> frozenset[str]:
    """The stages that write output sets (``StageSpec.writes_sets``): the run summary and the
    report show their tokens per set."""
    return frozenset(spec.name for spec in registered() if spec.writes_sets)


def user_stage_anchors() -> tuple[str, ...]:
    """The built-in stages a user's own stage may follow: the pretraining stages before tokenize,
    whose rows are documents (a stage added there is an anchor with no other edit)."""
    from codecorpus.tokenize.spec import TOKENIZE

    return tuple(itertools.takewhile(lambda name: name != TOKENIZE.name, pipeline_stages("pretrain")))


def pipeline_of(recipe: Any) -> Pipeline:
    """The pipeline a recipe runs: the one whose source stage it enables (environments when it
    discovers them, SFT when it ingests traces, repository tasks when it mines commits), else
    pretraining."""
    for attr in ("REPO_ENVS", "SFT", "REPO_TASKS"):
        source = _pipeline(attr)[0]
        if source.config(recipe, source.name) is not None:
            return _pipeline(attr)
    return _pipeline("PRETRAIN")


def enabled_specs(recipe: Any) -> list[StageSpec]:
    """The stages a recipe runs, in order: the ones of its pipeline it enables (a config in the
    recipe), with its own stages placed after the ones they name."""
    builtin = _enabled_builtin(recipe)
    user = recipe.stages.user_stages()
    by_name = {spec.name: spec for spec in builtin}
    if user:  # only then: the user-stage checks import pyarrow.compute
        from codecorpus.pipeline.user import user_spec

        by_name.update({name: user_spec(name, cfg) for name, cfg in user.items()})
    return [by_name[name] for name in insert_user_stages([s.name for s in builtin], user)]


def enabled_stage_names(recipe: Any) -> list[str]:
    """The names of the stages a recipe runs, in ``enabled_specs``' order, without importing a
    user stage's code: the order a run's report lists its stages in. (The recipe's ``stages:``
    keys follow ``registered``, every pipeline's list in turn, not the pipeline this recipe runs.)"""
    return insert_user_stages([spec.name for spec in _enabled_builtin(recipe)], recipe.stages.user_stages())


def _enabled_builtin(recipe: Any) -> list[StageSpec]:
    return [spec for spec in pipeline_of(recipe) if spec.config(recipe, spec.name) is not None]


def check_stages(recipe: Any) -> None:
    """Raise RecipeError before any work when an enabled stage cannot run (a bad ``use:``)."""
    for spec in enabled_specs(recipe):
        if spec.check is not None:
            spec.check(recipe)

"""The recipe's composition: the ``Recipe`` model, its ``stages:`` model built from the stage specs,
and the checks that tie a recipe's stages together.

A recipe reads top to bottom like the pipeline it runs::

    sources:  [{type: local, path: repos/, name: mine}]
    stages:   {ingest: {}, langid: {}, filters: {}, dedup: {}, tokenize: {}, pack: {}}
    tokenizer: {builtin: qwen2.5}
    outputs:  [{name: short-8k, seq_len: 8192}]

Each part's config model sits with its part (``ingest/config.py``, ``filters/config.py``
...) and its stage spec names it (``config_model``). The ``stages:`` model has one field per
stage of the pipeline lists (``pipeline/pipelines.py``, the one list of stages), made from
the specs when a recipe is first loaded (``recipe_model``): a stage added to a pipeline list
is a recipe key with no other edit. No algorithm code lives here.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, ClassVar

import yaml
from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    model_serializer,
    model_validator,
)

from codecorpus.ingest.config import (
    ArchiveSource,
    DocsSource,
    GitSource,
    LocalSource,
    PythonEnvSource,
    RecordsSource,
    S3Source,
)
from codecorpus.model import Model, recipe_hash
from codecorpus.packing.config import OutputSet
from codecorpus.pipeline.config import UserStageConfig, insert_user_stages
from codecorpus.sft.config import TracesSource
from codecorpus.tokenize.config import TokenizerConfig

Source = Annotated[
    LocalSource | PythonEnvSource | TracesSource
    | GitSource | ArchiveSource | S3Source | RecordsSource | DocsSource,
    Field(discriminator="type"),
]


class StagesConfig(Model):
    """Stages in pipeline order; a stage left out does not run.

    The built-in stages are the fields of the subclass ``stages_model`` makes from the stage
    specs, one ``<name>: <config_model> | None`` each, in ``stage_order``. Any other key is a
    stage of the user's own (``{use: "pkg.mod:fn", kind, after, config}``,
    ``pipeline/config.py``), placed after the stage it names.
    """

    model_config = ConfigDict(extra="allow", frozen=True)
    stage_order: ClassVar[tuple[str, ...]] = ()
    """The built-in stage names, in run order (the specs' order)."""

    @model_validator(mode="after")
    def _user_stages(self) -> StagesConfig:
        extra = self.__pydantic_extra__ or {}
        for name, value in extra.items():
            if not isinstance(value, dict | UserStageConfig) or (isinstance(value, dict) and "use" not in value):
                raise ValueError(
                    f"stages.{name}: unknown stage: remove it or check its spelling against docs/recipes.md "
                    f"(built-in stages: {', '.join(self.stage_order)}); a stage of your own needs "
                    "`use: 'pkg.module:function'`, `kind: annotator|filter` and `after: <stage>`"
                )
            if not name.isidentifier():
                raise ValueError(f"stages.{name}: a stage name is letters, digits and _ (it names a folder)")
            extra[name] = value if isinstance(value, UserStageConfig) else _user_stage(name, value)
        return self

    @model_serializer(mode="wrap")
    def _in_run_order(self, handler: Any) -> dict[str, Any]:
        """User stages are dumped right after the stage they follow, so the resolved recipe
        (and the report, which lists stages in its order) reads in run order."""
        data = handler(self)
        user = self.user_stages()
        if not user or not isinstance(data, dict):
            return data
        order = self.enabled()
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key in user:
                continue
            out[key] = value
            i = order.index(key) + 1 if key in order else len(order)
            while i < len(order) and order[i] in user:
                out[order[i]] = data[order[i]]
                i += 1
        return out

    def user_stages(self) -> dict[str, UserStageConfig]:
        """The user's own stages, in recipe order."""
        return dict(self.__pydantic_extra__ or {})

    def enabled(self) -> list[str]:
        builtin = [name for name in self.stage_order if getattr(self, name, None) is not None]
        return insert_user_stages(builtin, self.user_stages())


def _user_stage(name: str, value: dict[str, Any]) -> UserStageConfig:
    try:
        return UserStageConfig.model_validate(value)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or name}: {e['msg']}" for e in err.errors())
        raise ValueError(f"stages.{name}: {problems}") from None


def _check_user_stages(recipe: Recipe) -> None:
    """User stages follow a stage that runs, between ingest and tokenize, in a pretraining recipe."""
    user = recipe.stages.user_stages()
    if not user:
        return
    if recipe.stages.sft_ingest is not None:
        raise ValueError(f"stages {sorted(user)}: stages of your own run in pretraining recipes only")
    placed = recipe.stages.enabled()
    allowed = [s for s in _user_stage_anchors() if getattr(recipe.stages, s, None) is not None]
    for name, cfg in user.items():
        if cfg.after == name or name not in placed or (cfg.after not in allowed and cfg.after not in user):
            raise ValueError(
                f"stages.{name}.after: {cfg.after!r} is not a stage this recipe runs before tokenize: "
                f"use one of {allowed + [u for u in user if u != name]}"
            )


class Recipe(Model):
    """A recipe. This class names the type; a recipe is validated by ``recipe_model()``, its
    subclass whose ``stages`` is the model of the registered stages (``load_recipe_data``)."""

    name: str = "run"
    seed: int = 0
    out: str = Field("runs/run", description="run directory (local path)")
    workers: int | None = Field(None, ge=1, description="local Ray CPUs (default: all cores); on a joined cluster, the run's tasks at once")
    sources: tuple[Source, ...] = Field(min_length=1)
    stages: StagesConfig
    tokenizer: TokenizerConfig | None = None
    outputs: tuple[OutputSet, ...] = ()

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Recipe:
        """``Recipe.model_validate(data)`` validates with ``recipe_model()``, whose ``stages`` are
        the registered stages (this class's own ``stages`` knows none of them)."""
        if cls is Recipe:
            return recipe_model().model_validate(obj, **kwargs)
        return super().model_validate(obj, **kwargs)

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"sources: names must be unique, got {names}")
        _check_user_stages(self)
        _check_pipeline_start(self)
        if self.stages.tokenize is not None and self.tokenizer is None:
            raise ValueError("stages.tokenize needs a tokenizer: add a `tokenizer:` section")
        if self.stages.pack is not None:
            if self.stages.tokenize is None:
                raise ValueError("stages.pack needs stages.tokenize before it")
            if not self.outputs:
                raise ValueError("stages.pack needs `outputs:` (e.g. [{name: short-8k, seq_len: 8192}])")
        set_names = [o.name for o in self.outputs]
        if len(set(set_names)) != len(set_names):
            raise ValueError(f"outputs: names must be unique, got {set_names}")
        # per-source upsampling names real sources
        for o in self.outputs:
            unknown = sorted(set(o.long.upsample) - set(names)) if o.long else []
            if unknown:
                raise ValueError(
                    f"outputs {o.name}: long.upsample names unknown sources {unknown}: use one of {names}"
                )
        return self


def _check_env_recipe(recipe: Recipe) -> None:
    """An environments recipe: repository sources, only the env stages, each after the one it needs."""
    stages = recipe.stages
    bad = [s.name for s in recipe.sources if not isinstance(s, GitSource | LocalSource)]
    if bad:
        raise ValueError(f"sources {bad}: an environments recipe (stages.env_discover) reads `git` or `local` sources")
    envs = _pipeline_stages("repo-envs")
    other = [n for n in stages.enabled() if n not in envs]
    if other:
        raise ValueError(f"stages {other}: an environments recipe runs only {list(envs)}")
    if stages.task_validate is not None and stages.env_verify is None:
        raise ValueError("stages.task_validate needs stages.env_verify before it")


def _check_pipeline_start(recipe: Recipe) -> None:
    """The recipe's pipeline, by the source stage it enables, is complete enough to run."""
    stages = recipe.stages
    if stages.sft_ingest is not None or any(isinstance(s, TracesSource) for s in recipe.sources):
        _check_sft_recipe(recipe)
    elif stages.commits is not None:
        _check_tasks_recipe(recipe)
    elif stages.env_discover is not None:
        _check_env_recipe(recipe)
    elif stages.ingest is None:
        raise ValueError("stages.ingest is required: every pipeline starts by ingesting")


def _check_sft_recipe(recipe: Recipe) -> None:
    """An SFT recipe: trace sources only, the SFT stages in a usable chain, one sft output."""
    stages = recipe.stages
    if any(not isinstance(s, TracesSource) for s in recipe.sources):
        raise ValueError("an SFT recipe (stages.sft_ingest) takes only `type: traces` sources")
    if stages.sft_ingest is None:
        raise ValueError("`type: traces` sources need stages.sft_ingest (see pipelines/sft-traces.yaml)")
    sft = _pipeline_stages("sft")
    other = [n for n in stages.enabled() if n not in sft]
    if other:
        raise ValueError(f"stages {other} are pretraining stages: an SFT recipe runs only {list(sft)}")
    if stages.sft_render is not None and stages.sft_validate is None:
        raise ValueError("stages.sft_render needs stages.sft_validate before it")
    if stages.sft_pack is not None and stages.sft_render is None:
        raise ValueError("stages.sft_pack needs stages.sft_render before it")
    _check_sft_recipe_output(recipe)


def _check_tasks_recipe(recipe: Recipe) -> None:
    """A repository-history recipe: git sources, and an edit set rendered before it is packed."""
    stages = recipe.stages
    if any(not isinstance(s, GitSource) for s in recipe.sources):
        raise ValueError("a repository-history recipe (stages.commits) takes only `type: git` sources")
    tasks = _pipeline_stages("repo-tasks")
    other = [n for n in stages.enabled() if n not in tasks]
    if other:
        raise ValueError(f"stages {other} do not run on commits: a stages.commits recipe runs "
                         f"{[n for n in tasks if n != 'sft_render']} and sft_render for the edit set "
                         "(task_outputs packs it)")
    if stages.sft_render is not None and stages.edit_set is None:
        raise ValueError("stages.sft_render needs stages.edit_set before it")
    _check_sft_recipe_output(recipe)


def _check_sft_recipe_output(recipe: Recipe) -> None:
    if recipe.stages.sft_render is not None and recipe.tokenizer is None:
        raise ValueError("stages.sft_render needs a tokenizer: add a `tokenizer:` section")
    sft_sets = [o for o in recipe.outputs if o.kind == "sft"]
    if recipe.stages.sft_render is not None and (len(sft_sets) != 1 or len(recipe.outputs) != 1):
        raise ValueError(
            "an SFT recipe needs exactly one output `{name: sft, kind: sft, seq_len: N}`: "
            "its seq_len bounds every example and splits longer traces"
        )


def _pipeline_stages(key: str) -> tuple[str, ...]:
    from codecorpus.pipeline.pipelines import pipeline_stages

    return pipeline_stages(key)


def _user_stage_anchors() -> tuple[str, ...]:
    from codecorpus.pipeline.pipelines import user_stage_anchors

    return user_stage_anchors()


# --- the models of the registered stages ------------------------------------------------


def recipe_model() -> type[Recipe]:
    """The recipe model of the stages the pipeline lists hold now: ``Recipe`` with a ``stages``
    field of ``stages_model()``. Made once per list of (name, config model) pairs."""
    from codecorpus.pipeline.pipelines import registered

    return _recipe_model(tuple((s.name, s.config_model) for s in registered()))


def stages_model() -> type[StagesConfig]:
    """The recipe's ``stages:`` model: a field per registered stage with a config model."""
    return recipe_model().model_fields["stages"].annotation


@functools.lru_cache(maxsize=8)
def _recipe_model(stages: tuple[tuple[str, type | None], ...]) -> type[Recipe]:
    fields: dict[str, Any] = {name: (model | None, None) for name, model in stages if model is not None}
    stages_cls = create_model("StagesOfRecipe", __base__=StagesConfig, __module__=__name__, **fields)
    stages_cls.stage_order = tuple(name for name, _ in stages)
    recipe_cls = create_model("RecipeOfStages", __base__=Recipe, __module__=__name__, stages=(stages_cls, ...))
    recipe_cls.__doc__ = Recipe.__doc__
    return recipe_cls


def __getattr__(name: str) -> Any:
    """The current models by the names their classes carry (pickle finds a recipe's class so)."""
    if name == "RecipeOfStages":
        return recipe_model()
    if name == "StagesOfRecipe":
        return stages_model()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def recipe_to_yaml(recipe: Recipe) -> str:
    return yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)


__all__ = ["Recipe", "Source", "StagesConfig", "recipe_hash", "recipe_model", "recipe_to_yaml", "stages_model"]

"""The recipe: pydantic models validated when a YAML recipe loads.

A recipe reads top to bottom like the pipeline it runs::

    sources:  [{type: local, path: repos/, name: mine}]
    stages:   {ingest: {}, langid: {}, filters: {}, dedup: {}, tokenize: {}, pack: {}}
    tokenizer: {builtin: qwen2.5}
    outputs:  [{name: short-8k, seq_len: 8192}]

Each part's config model sits with its part (``ingest/config.py``, ``filters/config.py``
...); this module composes them into the ``Recipe`` and re-exports them, so
``from codecorpus.config import FiltersConfig`` keeps working. Errors name the key path
and the fix (``RecipeError``). No algorithm code lives here.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import ConfigDict, Field, ValidationError, model_serializer, model_validator

from codecorpus.dedup.config import DedupConfig, ForksConfig
from codecorpus.envs.config import (
    ENV_STAGE_ORDER,
    EnvDiscoverConfig,
    EnvVerifyConfig,
    TaskValidateConfig,
)
from codecorpus.filters.config import (
    BenchmarkFile,
    DecontamConfig,
    FiltersConfig,
    RedactConfig,
    RuleConfig,
)
from codecorpus.ingest.config import (
    ArchiveSource,
    DocsSource,
    GitSource,
    IngestConfig,
    LocalSource,
    PythonEnvSource,
    RecordColumns,
    RecordsSource,
    RepoOptions,
    S3Options,
    S3Source,
    git_list_entries,
    is_git_url,
)
from codecorpus.langid.config import LangidConfig
from codecorpus.mixing.config import MixConfig
from codecorpus.model import Model, RecipeError, config_hash
from codecorpus.packing.config import DEFAULT_SEQ_LEN, LongContextConfig, OutputSet, PackConfig
from codecorpus.pipeline.config import USER_STAGE_ANCHORS, UserStageConfig, insert_user_stages
from codecorpus.recipe_file import parse_override, read_recipe_file
from codecorpus.sft.config import (
    SftDedupConfig,
    SftIngestConfig,
    SftPackConfig,
    SftRenderConfig,
    SftSelectConfig,
    SftValidateConfig,
    TracesSource,
)
from codecorpus.tasks.config import (
    CommitDedupConfig,
    CommitFiltersConfig,
    CommitsConfig,
    EditSetConfig,
    TaskCandidatesConfig,
    TaskSetConfig,
)
from codecorpus.tokenize.config import (
    FimConfig,
    TokenizeConfig,
    TokenizerConfig,
    TrainTokenizerConfig,
)

STAGE_ORDER = ("ingest", "langid", "filters", "dedup", "tokenize", "pack")
# SFT / agent-trace pipeline: its own chain of stages, after the pretraining ones
SFT_STAGE_ORDER = ("sft_ingest", "sft_validate", "sft_select", "sft_dedup", "sft_render", "sft_pack")
# repository history -> tasks: its own chain; the edit set is rendered by the SFT stage sft_render
TASKS_STAGE_ORDER = ("commits", "commit_filters", "commit_dedup", "task_candidates", "edit_set", "task_outputs")
STAGE_ORDER = STAGE_ORDER + SFT_STAGE_ORDER + TASKS_STAGE_ORDER + ENV_STAGE_ORDER


Source = Annotated[
    LocalSource | PythonEnvSource | TracesSource
    | GitSource | ArchiveSource | S3Source | RecordsSource | DocsSource,
    Field(discriminator="type"),
]



class StagesConfig(Model):
    """Stages in pipeline order; a stage left out does not run.

    Any other key is a stage of the user's own (``{use: "pkg.mod:fn", kind, after, config}``,
    ``pipeline/config.py``), placed after the stage it names.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    ingest: IngestConfig | None = None
    langid: LangidConfig | None = None
    filters: FiltersConfig | None = None
    dedup: DedupConfig | None = None
    tokenize: TokenizeConfig | None = None
    pack: PackConfig | None = None
    # SFT / agent-trace stages
    sft_ingest: SftIngestConfig | None = None
    sft_validate: SftValidateConfig | None = None
    sft_select: SftSelectConfig | None = None
    sft_dedup: SftDedupConfig | None = None
    sft_render: SftRenderConfig | None = None
    sft_pack: SftPackConfig | None = None
    # repository-history stages (``tasks/spec.py``)
    commits: CommitsConfig | None = None
    commit_filters: CommitFiltersConfig | None = None
    commit_dedup: CommitDedupConfig | None = None
    task_candidates: TaskCandidatesConfig | None = None
    edit_set: EditSetConfig | None = None
    task_outputs: TaskSetConfig | None = None
    # environments and verified tasks (envs/)
    env_discover: EnvDiscoverConfig | None = None
    env_verify: EnvVerifyConfig | None = None
    task_validate: TaskValidateConfig | None = None

    @model_validator(mode="after")
    def _user_stages(self) -> StagesConfig:
        extra = self.__pydantic_extra__ or {}
        for name, value in extra.items():
            if not isinstance(value, dict | UserStageConfig) or (isinstance(value, dict) and "use" not in value):
                raise ValueError(
                    f"stages.{name}: unknown stage: remove it or check its spelling against the README "
                    f"(built-in stages: {', '.join(STAGE_ORDER)}); a stage of your own needs "
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
        builtin = [name for name in STAGE_ORDER if getattr(self, name) is not None]
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
    allowed = [s for s in USER_STAGE_ANCHORS if getattr(recipe.stages, s) is not None]
    for name, cfg in user.items():
        if cfg.after == name or name not in placed or (cfg.after not in allowed and cfg.after not in user):
            raise ValueError(
                f"stages.{name}.after: {cfg.after!r} is not a stage this recipe runs before tokenize: "
                f"use one of {allowed + [u for u in user if u != name]}"
            )


class Recipe(Model):
    name: str = "run"
    seed: int = 0
    out: str = Field("runs/run", description="run directory (local path)")
    workers: int | None = Field(None, ge=1, description="local Ray CPUs (default: all cores); on a joined cluster, the run's tasks at once")
    sources: tuple[Source, ...] = Field(min_length=1)
    stages: StagesConfig
    tokenizer: TokenizerConfig | None = None
    outputs: tuple[OutputSet, ...] = ()

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
    other = [n for n in stages.enabled() if n not in ENV_STAGE_ORDER]
    if other:
        raise ValueError(f"stages {other}: an environments recipe runs only {list(ENV_STAGE_ORDER)}")
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
    other = [n for n in stages.enabled() if n not in SFT_STAGE_ORDER]
    if other:
        raise ValueError(f"stages {other} are pretraining stages: an SFT recipe runs only {list(SFT_STAGE_ORDER)}")
    for stage, needs in (("sft_render", "sft_validate"), ("sft_pack", "sft_render")):
        if getattr(stages, stage) is not None and getattr(stages, needs) is None:
            raise ValueError(f"stages.{stage} needs stages.{needs} before it")
    _check_sft_recipe_output(recipe)


def _check_tasks_recipe(recipe: Recipe) -> None:
    """A repository-history recipe: git sources, and an edit set rendered before it is packed."""
    stages = recipe.stages
    if any(not isinstance(s, GitSource) for s in recipe.sources):
        raise ValueError("a repository-history recipe (stages.commits) takes only `type: git` sources")
    other = [n for n in stages.enabled() if n not in (*TASKS_STAGE_ORDER, "sft_render")]
    if other:
        raise ValueError(f"stages {other} do not run on commits: a stages.commits recipe runs "
                         f"{list(TASKS_STAGE_ORDER)} and sft_render for the edit set (task_outputs packs it)")
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


# --- loading -------------------------------------------------------------------------


def _format_validation_error(
    err: ValidationError, origin: str, data: Any = None, overrides: dict[tuple[str, ...], str] | None = None
) -> str:
    """One line per real problem: ``key.path: what is wrong (got value)``.

    Key paths index list items (``sources.0.path``) and leave out pydantic's
    internal steps (the discriminator tag of a source, validator names). An
    error that only follows from another one (an empty list once its items
    failed) is not repeated. An error under a ``--set`` override names the
    override, not the recipe file.
    """
    errors = err.errors()
    locs = [_clean_loc(e["loc"], data) for e in errors]
    lines: list[str] = []
    for e, loc in zip(errors, locs, strict=True):
        if e["type"] == "too_short" and any(o[: len(loc)] == loc and len(o) > len(loc) for o in locs):
            continue  # the list is empty only because its items failed: they are reported
        key, msg = _explain(e, loc)
        value = e.get("input")
        shown = "" if isinstance(value, (dict, list, tuple)) or value is None else f" (got {_short(value)})"
        line = f"{key or '<top>'}: {msg}{shown}"
        override = _override_for(loc, overrides or {})
        lines.append(f"--set {override}: {line}" if override else line)
    head = f"invalid recipe {origin}:"
    if overrides and all(line.startswith("--set ") for line in lines):
        head = "invalid --set override:"
    return "\n".join([head, *(f"  {line}" for line in dict.fromkeys(lines))])


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[str, ...]:
    """Drop the parts of a pydantic location that are not keys of the recipe."""
    out: list[str] = []
    node = data
    for part in loc:
        text = str(part)
        if text.startswith(("function-", "tagged-union[", "union[")):
            continue
        if isinstance(node, dict) and isinstance(part, str) and part not in node and node.get("type") == part:
            continue  # the discriminator tag of a source: not a key the user wrote
        out.append(text)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, (list, tuple)) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _explain(e: dict[str, Any], loc: tuple[str, ...]) -> tuple[str, str]:
    key, kind = ".".join(loc), e["type"]
    if kind == "extra_forbidden":
        return key, "unknown key: remove it or check its spelling against the README"
    if kind == "missing":
        return key, "required key is missing: add it"
    if kind == "union_tag_not_found":
        return f"{key}.type", f"required key is missing: set it to one of {_expected_tags(e)}"
    if kind == "union_tag_invalid":
        return f"{key}.type", f"unknown type {e['ctx'].get('tag')!r}: use one of {_expected_tags(e)}"
    msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return key, msg


def _expected_tags(e: dict[str, Any]) -> str:
    tags = (e.get("ctx") or {}).get("expected_tags")
    return tags.replace("'", "") if tags else ", ".join(source_types())


def source_types() -> list[str]:
    """The ``type:`` values a source may have, in the order of the ``Source`` union."""
    members = typing.get_args(typing.get_args(Source)[0])
    return [tag for m in members for tag in typing.get_args(m.model_fields["type"].annotation)]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _override_for(loc: tuple[str, ...], overrides: dict[tuple[str, ...], str]) -> str | None:
    """The ``--set`` text whose key path is, or contains, ``loc``."""
    for path, text in overrides.items():
        n = min(len(path), len(loc))
        if path[:n] == loc[:n]:
            return text
    return None


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides. A first key that names a stage means ``stages.<stage>``."""
    for text in overrides:
        path, value = parse_override(text)
        if path[0] in STAGE_ORDER:
            path = ["stages", *path]
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise RecipeError(f"--set {text!r}: {part} is not a section")
            node = child
        node[path[-1]] = value
    return data


def override_paths(overrides: list[str]) -> dict[tuple[str, ...], str]:
    """Each ``--set`` text by the recipe key path it sets (stage names expanded)."""
    out: dict[tuple[str, ...], str] = {}
    for text in overrides:
        path, _ = parse_override(text)
        out[tuple(["stages", *path] if path[0] in STAGE_ORDER else path)] = text
    return out


def load_recipe_data(
    data: dict[str, Any], origin: str = "<dict>", overrides: list[str] | None = None
) -> Recipe:
    try:
        return Recipe.model_validate(data)
    except ValidationError as err:
        message = _format_validation_error(err, origin, data, override_paths(overrides or []))
        raise RecipeError(message) from None


def load_recipe(path: str | Path, overrides: list[str] | None = None, data: dict[str, Any] | None = None) -> Recipe:
    """The recipe at ``path``, ``--set`` overrides applied, validated. ``data`` is the file
    as ``read_recipe_file`` read it already (the run command reads it before Ray starts)."""
    path = Path(path)
    data = read_recipe_file(path) if data is None else data
    data = apply_overrides(data, overrides or [])
    _resolve_relative_paths(data, path.parent)
    return load_recipe_data(data, str(path), overrides)


def _resolve_relative_paths(data: dict[str, Any], base: Path) -> None:
    """Source and tokenizer paths in a recipe are relative to the recipe's folder."""
    for src in data.get("sources") or []:
        if isinstance(src, dict) and isinstance(src.get("path"), str) and "://" not in src["path"]:
            src["path"] = str((base / src["path"]).resolve()) if not Path(src["path"]).is_absolute() else src["path"]
    tok = data.get("tokenizer")
    if isinstance(tok, dict) and isinstance(tok.get("path"), str) and not Path(tok["path"]).is_absolute():
        tok["path"] = str((base / tok["path"]).resolve())
    _resolve_benchmark_paths(data, base)
    _resolve_sft_paths(data, base)
    validate = (data.get("stages") or {}).get("task_validate")
    if isinstance(validate, dict) and isinstance(validate.get("tasks"), str) and not Path(validate["tasks"]).is_absolute():
        validate["tasks"] = str((base / validate["tasks"]).resolve())


def _resolve_sft_paths(data: dict[str, Any], base: Path) -> None:
    """SFT decontamination files and the chat template file are relative to the recipe."""
    stages = data.get("stages") or {}

    def resolve(p: Any) -> Any:
        return str((base / p).resolve()) if isinstance(p, str) and not Path(p).is_absolute() else p

    select = stages.get("sft_select")
    if isinstance(select, dict):
        if isinstance(select.get("decontam_task_ids"), list):
            select["decontam_task_ids"] = [resolve(p) for p in select["decontam_task_ids"]]
        decontam = select.get("decontam")
        for f in (decontam.get("files") or []) if isinstance(decontam, dict) else []:
            if isinstance(f, dict):
                f["path"] = resolve(f.get("path"))
    render = stages.get("sft_render")
    if isinstance(render, dict) and render.get("chat_template"):
        render["chat_template"] = resolve(render["chat_template"])


def _resolve_benchmark_paths(data: dict[str, Any], base: Path) -> None:
    """Decontamination benchmark files (stages.filters.decontam.files) are relative to the recipe."""
    filters = (data.get("stages") or {}).get("filters")
    decontam = filters.get("decontam") if isinstance(filters, dict) else None
    for f in (decontam.get("files") or []) if isinstance(decontam, dict) else []:
        if isinstance(f, dict) and isinstance(f.get("path"), str) and not Path(f["path"]).is_absolute():
            f["path"] = str((base / f["path"]).resolve())


def recipe_to_yaml(recipe: Recipe) -> str:
    return yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)


def recipe_hash(recipe: Recipe) -> str:
    """Identity of what a recipe produces: everything but where and how wide it runs, and
    the stages it leaves out (so a stage added to codecorpus changes no other recipe's hash)."""
    data = recipe.model_dump(mode="json", exclude={"out", "workers"})
    data["stages"] = {name: cfg for name, cfg in data["stages"].items() if cfg is not None}
    return config_hash(data)


__all__ = [
    "DEFAULT_SEQ_LEN", "SFT_STAGE_ORDER", "STAGE_ORDER", "ArchiveSource", "BenchmarkFile", "DecontamConfig",
    "DedupConfig", "DocsSource", "FiltersConfig", "FimConfig", "ForksConfig", "GitSource", "IngestConfig",
    "LangidConfig", "LocalSource", "LongContextConfig", "MixConfig", "Model", "OutputSet", "PackConfig",
    "PythonEnvSource", "Recipe", "RecipeError", "RecordColumns", "RecordsSource", "RedactConfig", "RepoOptions",
    "RuleConfig", "S3Options", "S3Source", "SftDedupConfig", "SftIngestConfig", "SftPackConfig", "SftRenderConfig",
    "SftSelectConfig", "SftValidateConfig", "Source", "StagesConfig", "TokenizeConfig", "TokenizerConfig",
    "TracesSource", "TrainTokenizerConfig", "UserStageConfig", "apply_overrides", "config_hash", "git_list_entries", "is_git_url", "load_recipe", "load_recipe_data",
    "parse_override", "recipe_hash", "recipe_to_yaml",
]

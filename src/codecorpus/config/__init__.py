"""The recipe: pydantic models validated when a YAML recipe loads.

    recipe.py  composition: ``Recipe``, its ``stages:`` model made from the stage specs, the
               checks that tie a recipe's stages together
    load.py    loading: the file, ``--set`` overrides, relative paths, validation
    errors.py  validation errors as the user reads them: the key path and the fix

Each part's config model sits with its part (``ingest/config.py``, ``filters/config.py``
...); this package re-exports them, so ``from codecorpus.config import FiltersConfig`` keeps
working, but a part imports its own config module (the import-graph test's layers: the
recipe stands above the parts). ``STAGE_ORDER`` and ``SFT_STAGE_ORDER`` are read from the
pipeline lists when asked for.
"""

from __future__ import annotations

from typing import Any

from codecorpus.config.errors import source_types
from codecorpus.config.load import apply_overrides, load_recipe, load_recipe_data, override_paths
from codecorpus.config.recipe import (
    Recipe,
    Source,
    StagesConfig,
    recipe_model,
    recipe_to_yaml,
    stages_model,
)
from codecorpus.dedup.config import DedupConfig, ForksConfig
from codecorpus.envs.config import EnvDiscoverConfig, EnvVerifyConfig, TaskValidateConfig
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
from codecorpus.model import Model, RecipeError, config_hash, recipe_hash
from codecorpus.packing.config import DEFAULT_SEQ_LEN, LongContextConfig, OutputSet, PackConfig
from codecorpus.pipeline.config import UserStageConfig
from codecorpus.recipe_file import parse_override
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


def __getattr__(name: str) -> Any:
    """``STAGE_ORDER`` (every built-in stage, in run order) and ``SFT_STAGE_ORDER``, from the
    pipeline lists as they are now."""
    from codecorpus.pipeline import pipelines

    if name == "STAGE_ORDER":
        return pipelines.stage_order()
    if name == "SFT_STAGE_ORDER":
        return pipelines.pipeline_stages("sft")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_SEQ_LEN", "SFT_STAGE_ORDER", "STAGE_ORDER", "ArchiveSource", "BenchmarkFile", "CommitDedupConfig",
    "CommitFiltersConfig", "CommitsConfig", "DecontamConfig", "DedupConfig", "DocsSource", "EditSetConfig",
    "EnvDiscoverConfig", "EnvVerifyConfig", "FiltersConfig", "FimConfig", "ForksConfig", "GitSource",
    "IngestConfig", "LangidConfig", "LocalSource", "LongContextConfig", "MixConfig", "Model", "OutputSet",
    "PackConfig", "PythonEnvSource", "Recipe", "RecipeError", "RecordColumns", "RecordsSource", "RedactConfig",
    "RepoOptions", "RuleConfig", "S3Options", "S3Source", "SftDedupConfig", "SftIngestConfig", "SftPackConfig",
    "SftRenderConfig", "SftSelectConfig", "SftValidateConfig", "Source", "StagesConfig", "TaskCandidatesConfig",
    "TaskSetConfig", "TaskValidateConfig", "TokenizeConfig", "TokenizerConfig", "TracesSource",
    "TrainTokenizerConfig", "UserStageConfig", "apply_overrides", "config_hash", "git_list_entries", "is_git_url",
    "load_recipe", "load_recipe_data", "override_paths", "parse_override", "recipe_hash", "recipe_model",
    "recipe_to_yaml", "source_types", "stages_model",
]

"""The recipe: pydantic models validated when a YAML recipe loads.

A recipe reads top to bottom like the pipeline it runs::

    sources:  [{type: local, path: repos/, name: mine}]
    stages:   {ingest: {}, langid: {}, filters: {}, dedup: {}, tokenize: {}, pack: {}}
    tokenizer: {builtin: qwen2.5}
    outputs:  [{name: short-8k, seq_len: 8192}]

Errors name the key path and the fix (``RecipeError``). No algorithm code lives here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

STAGE_ORDER = ("ingest", "langid", "filters", "dedup", "tokenize", "pack")


class RecipeError(ValueError):
    """A recipe that cannot run; the message names the key and the fix."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- sources -------------------------------------------------------------------------


class LocalSource(Model):
    """A directory of repositories, or one repository."""

    type: Literal["local"]
    name: str = Field(min_length=1)
    path: str
    layout: Literal["auto", "repos", "repo"] = Field(
        "auto",
        description="repos: every subdirectory is a repository; repo: the directory is one; "
        "auto: one repository if it has .git or files at its top, else repos",
    )
    license: str = "unknown"


class PythonEnvSource(Model):
    """The embedded default corpus: the standard library and installed distributions.

    Each distribution (and the standard library) is one repository. ``distributions``
    names them; ``all_distributions`` takes every installed one (the scale-up switch).
    """

    type: Literal["python-env"]
    name: str = "pyenv"
    stdlib: bool = True
    stdlib_tests: bool = True
    distributions: tuple[str, ...] = ()
    all_distributions: bool = False


Source = Annotated[LocalSource | PythonEnvSource, Field(discriminator="type")]


# --- stages --------------------------------------------------------------------------


class IngestConfig(Model):
    max_file_bytes: int = Field(1_000_000, gt=0, description="larger files are dropped (too_large)")
    shard_bytes: int = Field(8_000_000, gt=0, description="target input bytes per shard")
    skip_dirs: tuple[str, ...] = Field(
        (".git", ".hg", ".svn", "__pycache__"),
        description="directories logged as one skipped_dir drop each and not descended into",
    )


class LangidConfig(Model):
    shebang: bool = Field(True, description="read #! lines of files without a known extension")


class FiltersConfig(Model):
    """StarCoder's three basic code filters (thresholds as in bigcode-dataset)."""

    max_line_len: int = Field(1000, gt=0, description="drop if the longest line is longer")
    max_mean_line_len: float = Field(100.0, gt=0, description="drop if mean line length is above")
    min_alnum_frac: float = Field(0.25, ge=0, le=1, description="drop if alphanumeric share is below")
    exempt_langs: tuple[str, ...] = Field(
        (), description="languages the line-length filters skip (e.g. data formats)"
    )


class DedupConfig(Model):
    exact: bool = True
    buckets: int = Field(16, gt=0, description="hash partitions of the exact-dedup shuffle")


class TokenizeConfig(Model):
    batch_size: int = Field(256, gt=0)
    append_eos: bool = True


class PackConfig(Model):
    algorithm: Literal["bfd"] = "bfd"


class StagesConfig(Model):
    """Stages in pipeline order; a stage left out does not run."""

    ingest: IngestConfig | None = None
    langid: LangidConfig | None = None
    filters: FiltersConfig | None = None
    dedup: DedupConfig | None = None
    tokenize: TokenizeConfig | None = None
    pack: PackConfig | None = None

    def enabled(self) -> list[str]:
        return [name for name in STAGE_ORDER if getattr(self, name) is not None]


# --- tokenizer and outputs ----------------------------------------------------------


class TrainTokenizerConfig(Model):
    vocab_size: int = Field(16384, ge=512, le=1_000_000)
    sample_bytes: int = Field(20_000_000, gt=0, description="corpus bytes to train on")
    min_frequency: int = Field(2, ge=1)


class TokenizerConfig(Model):
    """Exactly one of: builtin, path, train."""

    builtin: Literal["qwen2.5", "gpt2"] | None = Field(
        None, description="a vocabulary shipped by an installed package (no download)"
    )
    path: str | None = Field(None, description="a tokenizer.json or a .tiktoken BPE file")
    pat_str: str | None = Field(None, description="pre-tokenizer regex for a .tiktoken file")
    special_tokens: tuple[str, ...] = Field(
        ("<|endoftext|>",), description="special tokens appended after a .tiktoken vocabulary"
    )
    eos: str | None = Field(None, description="EOS token text; default: the tokenizer's own")
    train: TrainTokenizerConfig | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> TokenizerConfig:
        chosen = [k for k in ("builtin", "path", "train") if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "set exactly one of tokenizer.builtin (qwen2.5|gpt2), tokenizer.path "
                f"(tokenizer.json or .tiktoken) or tokenizer.train; got {chosen or 'none'}"
            )
        return self


class OutputSet(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    kind: Literal["short"] = "short"
    seq_len: int = Field(8192, ge=16, le=1 << 24)


class Recipe(Model):
    name: str = "run"
    seed: int = 0
    out: str = Field("runs/run", description="run directory (local path)")
    workers: int | None = Field(None, ge=1, description="Ray CPUs; default: all cores")
    sources: tuple[Source, ...] = Field(min_length=1)
    stages: StagesConfig
    tokenizer: TokenizerConfig | None = None
    outputs: tuple[OutputSet, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        names = [s.name for s in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"sources: names must be unique, got {names}")
        if self.stages.ingest is None:
            raise ValueError("stages.ingest is required: every pipeline starts by ingesting")
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
        return self


# --- loading -------------------------------------------------------------------------


def _format_validation_error(err: ValidationError, origin: str) -> str:
    lines = [f"invalid recipe {origin}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"] if not str(p).startswith("function-after"))
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key: remove it or check its spelling against the README"
        elif e["type"] == "missing":
            msg = "required key is missing: add it"
        value = e.get("input")
        shown = "" if isinstance(value, dict) or value is None else f" (got {value!r})"
        lines.append(f"  {loc or '<top>'}: {msg}{shown}")
    return "\n".join(lines)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``stage.key=value`` -> (path, YAML-parsed value).

    >>> parse_override("stages.filters.max_line_len=2000")
    (['stages', 'filters', 'max_line_len'], 2000)
    """
    if "=" not in text:
        raise RecipeError(f"--set {text!r}: expected KEY.PATH=VALUE, e.g. filters.max_line_len=2000")
    key, _, raw = text.partition("=")
    return key.strip().split("."), yaml.safe_load(raw) if raw.strip() else None


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


def load_recipe_data(data: dict[str, Any], origin: str = "<dict>") -> Recipe:
    try:
        return Recipe.model_validate(data)
    except ValidationError as err:
        raise RecipeError(_format_validation_error(err, origin)) from None


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> Recipe:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecipeError(f"no recipe at {path}: pass a YAML file such as pipelines/quickstart.yaml") from None
    except yaml.YAMLError as err:
        raise RecipeError(f"recipe {path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"recipe {path} must be a YAML mapping with sources:, stages:, ...")
    data = apply_overrides(data, overrides or [])
    _resolve_relative_paths(data, path.parent)
    return load_recipe_data(data, str(path))


def _resolve_relative_paths(data: dict[str, Any], base: Path) -> None:
    """Source and tokenizer paths in a recipe are relative to the recipe's folder."""
    for src in data.get("sources") or []:
        if isinstance(src, dict) and isinstance(src.get("path"), str) and "://" not in src["path"]:
            src["path"] = str((base / src["path"]).resolve()) if not Path(src["path"]).is_absolute() else src["path"]
    tok = data.get("tokenizer")
    if isinstance(tok, dict) and isinstance(tok.get("path"), str) and not Path(tok["path"]).is_absolute():
        tok["path"] = str((base / tok["path"]).resolve())


def recipe_to_yaml(recipe: Recipe) -> str:
    return yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False)


def recipe_hash(recipe: Recipe) -> str:
    """Identity of what a recipe produces: everything but where and how wide it runs."""
    return config_hash(recipe.model_dump(mode="json", exclude={"out", "workers"}))


def config_hash(*parts: Any) -> str:
    """sha256 over the canonical JSON of config models and strings (stage invalidation key)."""
    h = hashlib.sha256()
    for part in parts:
        obj = part.model_dump(mode="json") if isinstance(part, BaseModel) else part
        h.update(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())
        h.update(b"\x00")
    return h.hexdigest()

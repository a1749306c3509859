"""A recipe file read as YAML data, before its models validate it.

The first step of ``config.load_recipe``, and all a run command needs before Ray starts:
the local Ray's CPUs (``workers``) and whether the run directory is on S3 (``out``). A leaf
that imports yaml alone (Ray imports it too), not the recipe's pydantic models, so the
command can start Ray's processes before it imports them (``runtime/launch.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class RecipeError(ValueError):
    """A recipe that cannot run; the message names the key and the fix."""


def read_recipe_file(path: str | Path) -> dict[str, Any]:
    """The recipe at ``path`` as a YAML mapping, not yet validated."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecipeError(f"no recipe at {path}: pass a YAML file such as pipelines/quickstart.yaml") from None
    except yaml.YAMLError as err:
        raise RecipeError(f"recipe {path} is not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise RecipeError(f"recipe {path} must be a YAML mapping with sources:, stages:, ...")
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """``stage.key=value`` -> (path, YAML-parsed value).

    >>> parse_override("stages.filters.max_line_len=2000")
    (['stages', 'filters', 'max_line_len'], 2000)
    """
    if "=" not in text:
        raise RecipeError(f"--set {text!r}: expected KEY.PATH=VALUE, e.g. filters.max_line_len=2000")
    key, _, raw = text.partition("=")
    return key.strip().split("."), yaml.safe_load(raw) if raw.strip() else None


@dataclass(frozen=True)
class LocalStart:
    """What a local run's Ray start takes from the recipe, read before the recipe validates."""

    cpus: int | None
    """The recipe's ``workers`` (None: all cores)."""
    out: str | None
    """The recipe's ``out`` (None: the model's default, a local path). An S3 one must be known
    before Ray starts: its workers inherit the store's setting from the driver (``storage/mirror.py``)."""


def local_start_settings(data: dict[str, Any], overrides: list[str]) -> LocalStart | None:
    """The recipe's top-level ``workers`` and ``out``, ``--set`` overrides applied as
    ``config.apply_overrides`` applies them; None when either is not what validation keeps
    as is (a plain int of at least 1, a string), so the caller validates first."""
    values = {key: data[key] for key in ("workers", "out") if key in data}
    for text in overrides:
        path, value = parse_override(text)
        if len(path) == 1 and path[0] in ("workers", "out"):
            values[path[0]] = value
    cpus, out = values.get("workers"), values.get("out")
    plain_cpus = cpus is None or (type(cpus) is int and cpus >= 1)  # ``workers: null`` is the model's default
    plain_out = "out" not in values or isinstance(out, str)  # ``out: null`` is refused by validation
    return LocalStart(cpus, out) if plain_cpus and plain_out else None

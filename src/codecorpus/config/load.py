"""A recipe's load: the YAML file, its ``--set`` overrides, its relative paths, its validation.

    load_recipe(path, overrides)  ->  read_recipe_file -> apply_overrides -> resolve_relative_paths
                                      -> load_recipe_data (the registry's recipe model)

The stage names a ``--set`` may start with and the files a stage's config names come from
the stage specs (``pipeline/pipelines.py``), like the recipe's ``stages:`` model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from codecorpus.config.errors import format_validation_error
from codecorpus.config.recipe import Recipe, recipe_model
from codecorpus.model import RecipeError
from codecorpus.recipe_file import parse_override, read_recipe_file


def _stage_names() -> tuple[str, ...]:
    from codecorpus.pipeline.pipelines import stage_order

    return stage_order()


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides. A first key that names a stage means ``stages.<stage>``."""
    stages = _stage_names() if overrides else ()
    for text in overrides:
        path, value = parse_override(text)
        if path[0] in stages:
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
    stages = _stage_names() if overrides else ()
    out: dict[tuple[str, ...], str] = {}
    for text in overrides:
        path, _ = parse_override(text)
        out[tuple(["stages", *path] if path[0] in stages else path)] = text
    return out


def load_recipe_data(
    data: dict[str, Any], origin: str = "<dict>", overrides: list[str] | None = None
) -> Recipe:
    """``data`` validated by the recipe model of the registered stages (``recipe_model``)."""
    try:
        return recipe_model().model_validate(data)
    except ValidationError as err:
        message = format_validation_error(err, origin, data, override_paths(overrides or []))
        raise RecipeError(message) from None


def load_recipe(path: str | Path, overrides: list[str] | None = None, data: dict[str, Any] | None = None) -> Recipe:
    """The recipe at ``path``, ``--set`` overrides applied, validated. ``data`` is the file
    as ``read_recipe_file`` read it already (the run command reads it before Ray starts)."""
    path = Path(path)
    data = read_recipe_file(path) if data is None else data
    data = apply_overrides(data, overrides or [])
    resolve_relative_paths(data, path.parent)
    return load_recipe_data(data, str(path), overrides)


def resolve_relative_paths(data: dict[str, Any], base: Path) -> None:
    """The paths a recipe names are relative to the recipe's folder: each source's ``path``, the
    tokenizer's, and the files each stage's config names (its spec's ``config_paths``)."""
    for src in data.get("sources") or []:
        if isinstance(src, dict) and isinstance(src.get("path"), str) and "://" not in src["path"]:
            src["path"] = str((base / src["path"]).resolve()) if not Path(src["path"]).is_absolute() else src["path"]
    tok = data.get("tokenizer")
    if isinstance(tok, dict) and isinstance(tok.get("path"), str) and not Path(tok["path"]).is_absolute():
        tok["path"] = str((base / tok["path"]).resolve())
    stages = data.get("stages")
    if not isinstance(stages, dict):
        return
    from codecorpus.pipeline.pipelines import registered

    for spec in registered():
        for key in spec.config_paths:
            for node, item, _, value in config_path_items(stages.get(spec.name), key):
                if isinstance(value, str) and value and "://" not in value and not Path(value).is_absolute():
                    node[item] = str((base / value).resolve())


def config_path_items(config: Any, key: str) -> Iterator[tuple[Any, Any, str, Any]]:
    """Where a ``config_paths`` key (``decontam.files.*.path``) is set in a stage's config, a dict
    or a model: ``(container, key or index, dotted key with list indices, value)`` for each value.

    >>> list(config_path_items({"files": [{"path": "a"}, {}]}, "files.*.path"))
    [({'path': 'a'}, 'path', 'files.0.path', 'a')]
    """
    yield from _items(config, key.split("."), [])


def _items(node: Any, parts: list[str], seen: list[str]) -> Iterator[tuple[Any, Any, str, Any]]:
    if node is None:
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        children = list(enumerate(node)) if isinstance(node, list | tuple) else []
    elif isinstance(node, dict):
        children = [(head, node[head])] if head in node else []
    else:
        children = [(head, getattr(node, head))] if hasattr(node, head) else []
    for key, child in children:
        path = [*seen, str(key)]
        if rest:
            yield from _items(child, rest, path)
        elif child is not None:
            yield node, key, ".".join(path), child

"""Checks a recipe's inputs before any work: every path it names exists.

pydantic checks the shape of a recipe when it loads; this checks the world it
points at, before Ray starts, so that a typo in a path costs a second rather
than a cluster start and a half-planned run. Every problem is listed at once,
each under the key that holds it (``sources.0.path``) with the fix.

Remote locations (``s3://``, URLs git can clone) and globs are left to the
planner, which reports them with the same key.
"""

from __future__ import annotations

import glob
from collections.abc import Iterator
from pathlib import Path

from codecorpus.config import GitSource, LocalSource, Recipe, RecipeError
from codecorpus.config.load import config_path_items
from codecorpus.pipeline.pipelines import registered

_DIRECTORY_SOURCES = (LocalSource,)
"""Sources whose ``path`` must be a directory (the others take a file, a folder or a glob)."""


def check_recipe_inputs(recipe: Recipe) -> None:
    """Raise one ``RecipeError`` listing every named input that does not exist."""
    problems = [f"  {key}: {problem}" for key, problem in _path_problems(recipe)]
    if problems:
        raise RecipeError("the recipe names inputs that are not there:\n" + "\n".join(problems))


def _path_problems(recipe: Recipe) -> Iterator[tuple[str, str]]:
    for i, src in enumerate(recipe.sources):
        path = getattr(src, "path", None)
        if isinstance(path, str) and path:
            problem = _local_path_problem(path, directory=isinstance(src, _DIRECTORY_SOURCES))
            if problem is None and isinstance(src, GitSource):
                problem = _git_folder_problem(src)
            if problem:
                yield f"sources.{i}.path", problem
    for key, path in _named_files(recipe):
        problem = _local_path_problem(path, directory=False)
        if problem:
            yield key, problem


def _named_files(recipe: Recipe) -> Iterator[tuple[str, str]]:
    """Every other file a recipe names: the tokenizer, and the files each enabled stage's config
    names (its spec's ``config_paths``: benchmark files, task-id lists, a chat template ...)."""
    if recipe.tokenizer is not None and recipe.tokenizer.path:
        yield "tokenizer.path", recipe.tokenizer.path
    for spec in registered():
        cfg = spec.config(recipe, spec.name) if spec.config_paths else None
        for key in spec.config_paths:
            for _, _, where, value in config_path_items(cfg, key):
                if isinstance(value, str):
                    yield f"stages.{spec.name}.{where}", value


def _local_path_problem(path: str, directory: bool) -> str | None:
    if "://" in path or path.startswith("git@") or glob.has_magic(path):
        return None
    p = Path(path)
    if not p.exists():
        return f"{path} does not exist: fix the path (relative paths are relative to the recipe file)"
    if directory and not p.is_dir():
        return f"{path} is not a directory: point it at a repository or a folder of them"
    return None


def _git_folder_problem(src: GitSource) -> str | None:
    """A folder of repositories must hold one: the search stops at the first it finds."""
    from codecorpus.ingest import git

    if git.source_form(src) != "folder":
        return None
    if any(found.problem is None for found in git.find_repositories(Path(src.path))):
        return None
    return (
        f"no git repository under {src.path}: point path at a repository, a folder of "
        "repositories (bare or not) or a list file of repository paths/URLs"
    )

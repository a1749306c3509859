"""The base of every config model, the recipe error, and the hashes that key resumes.

A leaf: it imports no part of codecorpus but the recipe file's reader (``RecipeError`` is
defined there, beside the YAML step of a recipe's load), so every part's config module
can stand on it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from codecorpus.recipe_file import RecipeError


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def config_hash(*parts: Any) -> str:
    """sha256 over the canonical JSON of config models and strings (stage invalidation key)."""
    h = hashlib.sha256()
    for part in parts:
        obj = part.model_dump(mode="json") if isinstance(part, BaseModel) else part
        h.update(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())
        h.update(b"\x00")
    return h.hexdigest()


def recipe_hash(recipe: BaseModel) -> str:
    """Identity of what a recipe produces: everything but where and how wide it runs, and
    the stages it leaves out (so a stage added to codecorpus changes no other recipe's hash).
    Here, below the parts, so a part that names its recipe in a manifest needs no recipe model."""
    data = recipe.model_dump(mode="json", exclude={"out", "workers"})
    data["stages"] = {name: cfg for name, cfg in data["stages"].items() if cfg is not None}
    return config_hash(data)


__all__ = ["Model", "RecipeError", "config_hash", "recipe_hash"]

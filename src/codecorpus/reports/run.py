"""What the report reads of a run directory: its recipe, the stats of each stage that finished,
its set manifests and mixing plan, loaded once (``load_run``) for the tables and the page."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from codecorpus import schema
from codecorpus.storage import mirror as store


@dataclass
class RunData:
    """What the report reads from a run directory, loaded once."""

    run: schema.RunPaths
    name: str
    recipe: dict[str, Any]
    stages: list[str]
    stats: dict[str, dict[str, Any]]
    sets: dict[str, dict[str, Any]] = field(default_factory=dict)
    plans: dict[str, Any] = field(default_factory=dict)


def load_run(root: Path | str) -> RunData:
    """Stats of every stage that finished, in pipeline order, and every set manifest."""
    run = schema.RunPaths(Path(root))
    recipe_file, plan_file = store.ensure_local(run.recipe), store.ensure_local(run.mix_plan)  # absent: not fetched
    recipe = (yaml.safe_load(recipe_file.read_text()) if recipe_file.is_file() else None) or {}
    order = [k for k, v in (recipe.get("stages") or {}).items() if v is not None]
    found = sorted(p.parent.name for p in store.list_files(run.root, "*/_stats.json", fetch=True))
    stages = [s for s in order if s in found] + [s for s in found if s not in order]
    stats = {s: json.loads(run.stats(s).read_text()) for s in stages}
    sets = {}
    for path in store.list_files(run.root / schema.SETS_DIR, f"*/{schema.MANIFEST_NAME}", fetch=True):
        sets[path.parent.name] = json.loads(path.read_text())
    plans = json.loads(plan_file.read_text())["sets"] if plan_file.is_file() else {}
    return RunData(run, str(recipe.get("name", run.root.name)), recipe, stages, stats, sets, plans)

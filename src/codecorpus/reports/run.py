"""What the report reads of a run directory: its recipe, the stats of each stage that finished,
its set manifests and mixing plan, loaded once (``load_run``) for the tables and the page."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from codecorpus import schema
from codecorpus.config import recipe_model, stages_model
from codecorpus.config.errors import format_validation_error
from codecorpus.pipeline.pipelines import enabled_stage_names
from codecorpus.storage import mirror as store

log = logging.getLogger(__name__)


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
    """Stats of every stage that finished, in the order the run ran them (a stage not in its
    recipe after those), and every set manifest."""
    run = schema.RunPaths(Path(root))
    recipe_file, plan_file = store.ensure_local(run.recipe), store.ensure_local(run.mix_plan)  # absent: not fetched
    recipe = (yaml.safe_load(recipe_file.read_text()) if recipe_file.is_file() else None) or {}
    order = run_order(recipe, run.recipe)
    found = sorted(p.parent.name for p in store.list_files(run.root, "*/_stats.json", fetch=True))
    stages = [s for s in order if s in found] + [s for s in found if s not in order]
    stats = {s: json.loads(run.stats(s).read_text()) for s in stages}
    sets = {}
    for path in store.list_files(run.root / schema.SETS_DIR, f"*/{schema.MANIFEST_NAME}", fetch=True):
        sets[path.parent.name] = json.loads(path.read_text())
    plans = json.loads(plan_file.read_text())["sets"] if plan_file.is_file() else {}
    return RunData(run, str(recipe.get("name", run.root.name)), recipe, stages, stats, sets, plans)


def run_order(recipe: dict[str, Any], origin: Path) -> list[str]:
    """The stages the run's recipe runs, in its pipeline's order (``enabled_stage_names``).

    The dump's ``stages:`` keys follow every pipeline's list in turn, not this run's: a
    repository-tasks run's ``sft_render`` comes first there, with the SFT list's stages. Only
    ``stages:`` is validated and given to the recipe (``model_construct``): the order depends
    on nothing else, and a source's path, checked when a whole recipe loads, may be gone when
    the report is rewritten (another machine, a removed checkout). A ``stages:`` this version
    cannot read (written by another one) keeps the dump's key order, and the log says why.
    """
    stages = recipe.get("stages") or {}
    if not stages:
        return []
    try:
        return enabled_stage_names(recipe_model().model_construct(stages=stages_model().model_validate(stages)))
    except ValidationError as err:
        problems = "; ".join(line.strip() for line in format_validation_error(err, str(origin)).splitlines()[1:])
        log.warning("%s: stages: does not load with this version (%s): the report lists its stages in the "
                    "file's order", origin, problems)
        return [k for k, v in stages.items() if v is not None]

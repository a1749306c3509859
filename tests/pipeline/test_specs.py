"""The stage specs and the generic executor: pipelines read like recipes, the executor knows
kinds only, and a stage added as one spec in a pipeline list runs under the full contract."""

from __future__ import annotations

import ast
import functools
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pydantic import Field

from codecorpus import config, schema
from codecorpus.config import load_recipe_data
from codecorpus.model import Model
from codecorpus.pipeline import pipelines
from codecorpus.pipeline.spec import MAP_KINDS, Job, StageSpec
from codecorpus.runtime import executor as executor_module
from codecorpus.runtime.executor import Executor
from codecorpus.stage import MapResult, apply_reasons
from conftest import fixture_recipe, write_repos

EXECUTOR_SOURCE = Path(executor_module.__file__).read_text()


def test_pipelines_are_the_recipe_stage_order():
    assert [s.name for s in pipelines.PRETRAIN] == ["ingest", "langid", "filters", "dedup", "tokenize", "pack"]
    # the recipe's stages model is the pipeline lists': every stage once (REPO_TASKS reuses sft_render),
    # in pipeline order, each typed by its spec's config model
    specs = {s.name: s for p in pipelines.PIPELINES.values() for s in p}
    fields = config.stages_model().model_fields
    assert list(fields) == list(config.STAGE_ORDER) == list(specs)
    assert all(fields[name].annotation == specs[name].config_model | None for name in specs)
    for pipeline in pipelines.PIPELINES.values():
        assert pipeline[0].kind == "source" and pipeline[-1].kind == "sink"
        assert all(s.kind in (*MAP_KINDS, "global") for s in pipeline[1:-1])


def test_executor_knows_kinds_never_stage_names():
    tree = ast.parse(EXECUTOR_SOURCE)
    methods = {n.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for n in c.body
               if isinstance(n, ast.FunctionDef)}
    names = {s.name for p in pipelines.PIPELINES.values() for s in p}
    assert not methods & names and not any(m.startswith(("sft_", "_sft")) for m in methods)
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not literals & names and not any(s.startswith("sft_") for s in literals)


def _part_of(spec: StageSpec) -> str:
    """The part a built-in stage belongs to: the folder of the module that defines its work."""
    module = (spec.plan or spec.map_fn or spec.phases).__module__
    assert module.startswith("codecorpus."), (spec.name, module)
    return module.split(".")[1]


def _stage_name_lists(source: str, names: set[str]) -> list[tuple[int, list[str]]]:
    """Every tuple, list or set literal (so also ``frozenset((...))``) and every dict literal's
    keys that are two or more strings, all of them stage names: a list of stages."""
    found = []
    for node in ast.walk(ast.parse(source)):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if not isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) or len(items) < 2:
            continue
        values = [n.value if isinstance(n, ast.Constant) else None for n in items]
        if all(isinstance(v, str) and v in names for v in values):
            found.append((node.lineno, values))
    return sorted(found)


def test_no_module_lists_stage_names():
    """The pipeline lists are the only list of stages: no module outside a stage's own part
    spells a list of stage names (a part may list its own, e.g. the SFT manifest's selection)."""
    part = {s.name: _part_of(s) for s in pipelines.registered()}
    root = Path(pipelines.__file__).parents[1]
    lists = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.as_posix() == "pipeline/pipelines.py":
            continue
        for line, stages in _stage_name_lists(path.read_text(), set(part)):
            if len(rel.parts) == 1 or any(part[name] != rel.parts[0] for name in stages):
                lists.append(f"{rel}:{line} {stages}")
    assert not lists, "derive these from the pipeline lists (pipeline/pipelines.py):\n" + "\n".join(lists)


def test_the_stage_list_check_sees_a_list():
    names = {"pack", "sft_pack", "dedup"}
    source = 'A = ("pack", "sft_pack")\nB = frozenset({"dedup", "pack"})\nC = {"pack": 1, "dedup": 2}\nD = ("pack", "x")'
    assert [line for line, _ in _stage_name_lists(source, names)] == [1, 2, 3]


def test_enabled_specs_follow_the_recipe(tmp_path):
    recipe = load_recipe_data(fixture_recipe(tmp_path))
    assert [s.name for s in pipelines.enabled_specs(recipe)] == recipe.stages.enabled()
    data = fixture_recipe(tmp_path)
    del data["stages"]["dedup"], data["stages"]["langid"]
    recipe = load_recipe_data(data)
    assert [s.name for s in pipelines.enabled_specs(recipe)] == ["ingest", "filters", "tokenize", "pack"]


def test_a_spec_names_what_its_kind_needs():
    with pytest.raises(TypeError, match=r"kind filter.* needs map_fn"):
        StageSpec("broken", "filter", None)
    with pytest.raises(TypeError, match=r"kind global.* needs phases"):
        StageSpec("broken", "global", None)


def test_a_job_names_the_files_it_reads():
    assert Job("t", len, reads=("a.parquet",)).describe_reads() == "a.parquet"
    assert Job("t", len, reads=("a", "b", "c")).describe_reads() == "3 files, a ... c"
    assert Job("t", len).describe_reads() == "see the job arguments"


# --- a map stage added as one spec -----------------------------------------------------------


class MinSizeConfig(Model):
    min_bytes: int = Field(64, ge=0, description="smaller files are dropped (too_small)")


def run(table: pa.Table, cfg: MinSizeConfig) -> MapResult:
    """The example of docs/ARCHITECTURE.md (Adding a stage), as written there."""
    small = pc.less(table.column(schema.BYTES), cfg.min_bytes)
    reasons = pc.if_else(small, pa.scalar("too_small"), pa.scalar(None, pa.string()))
    return apply_reasons(table, reasons, "min_size")


def min_size_fn(stage):
    return functools.partial(run, cfg=stage.cfg)


MIN_SIZE = StageSpec(
    "min_size", "filter", MinSizeConfig, map_fn=min_size_fn,
    config=lambda recipe, name: MinSizeConfig(),  # always on, with its defaults
)


def test_a_new_map_stage_is_one_spec_in_a_pipeline_list(tmp_path, ray_local, monkeypatch):
    """Put a spec into PRETRAIN after filters: it plans, runs, resumes and is counted like any stage."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import a test module
    i = [s.name for s in pipelines.PRETRAIN].index("filters") + 1
    monkeypatch.setattr(pipelines, "PRETRAIN", (*pipelines.PRETRAIN[:i], MIN_SIZE, *pipelines.PRETRAIN[i:]))
    recipe = load_recipe_data(fixture_recipe(write_repos(tmp_path / "corpus")))
    run = tmp_path / "run"
    result = Executor(recipe, run, quiet=True).run_pipeline()
    assert [s.name for s in result.stages] == ["ingest", "langid", "filters", "min_size", "dedup", "tokenize",
                                               "pack"]
    stats = json.loads(schema.RunPaths(run).stats("min_size").read_text())
    assert stats["dropped"].get("too_small", 0) > 0
    assert stats["rows_in"] == stats["rows_out"] + sum(stats["dropped"].values())
    again = Executor(recipe, run, quiet=True).run_pipeline()
    assert all(s.ran_jobs == 0 for s in again.stages)

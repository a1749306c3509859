"""One registry: a stage exists because a pipeline list names it.

A configurable stage that reads a file, written as one module of a package outside
codecorpus (into tmp_path, put on ``sys.path``), plus one line in ``PRETRAIN``: the recipe
sets its config (``stages.blocklist``, the ``--set blocklist.*`` shorthand), its file is
relative to the recipe and checked before any work, it runs on a local Ray under the stage
contract, and the set manifest's provenance lists it. No other file is edited.
"""

from __future__ import annotations

import ast
import importlib
import json
import textwrap
from pathlib import Path

import pytest
import yaml

from codecorpus import config, preflight, schema
from codecorpus.config import RecipeError, apply_overrides, load_recipe, load_recipe_data
from codecorpus.config import load as config_load
from codecorpus.pipeline import pipelines
from codecorpus.preflight import check_recipe_inputs
from conftest import fixture_recipe, write_repos

STAGE_MODULE = '''
"""A stage from outside codecorpus: drop the files a list names (one repository path a line)."""

import functools
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.model import Model
from codecorpus.pipeline.spec import StageSpec
from codecorpus.stage import apply_reasons


class BlocklistConfig(Model):
    file: str
    reason: str = "blocklisted"


def run(table, names, reason):
    listed = pc.is_in(table.column(schema.PATH), value_set=pa.array(sorted(names), pa.string()))
    reasons = pc.if_else(listed, pa.scalar(reason), pa.scalar(None, pa.string()))
    return apply_reasons(table, reasons, "blocklist")


def blocklist_fn(stage):
    names = frozenset(Path(stage.cfg.file).read_text().split())
    return functools.partial(run, names=names, reason=stage.cfg.reason)


def file_parts(recipe):
    return [Path(recipe.stages.blocklist.file).read_text()]


BLOCKLIST = StageSpec("blocklist", "filter", BlocklistConfig, map_fn=blocklist_fn, hash_parts=file_parts,
                      config_paths=("file",))
'''


@pytest.fixture
def blocklist_stage(tmp_path, monkeypatch):
    """The module, imported from a temporary package, and its one line in PRETRAIN."""
    from ray import cloudpickle

    package = tmp_path / "extra_stages"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "blocklist.py").write_text(textwrap.dedent(STAGE_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("extra_stages.blocklist")
    cloudpickle.register_pickle_by_value(module)  # the Ray workers do not have tmp_path on their path
    try:
        # the one line: PRETRAIN = (INGEST, LANGID, FILTERS, BLOCKLIST, DEDUP, TOKENIZE, PACK)
        i = [s.name for s in pipelines.PRETRAIN].index("filters") + 1
        monkeypatch.setattr(pipelines, "PRETRAIN", (*pipelines.PRETRAIN[:i], module.BLOCKLIST, *pipelines.PRETRAIN[i:]))
        yield module
    finally:
        cloudpickle.unregister_pickle_by_value(module)


def _recipe_file(tmp_path, **blocklist) -> tuple:
    corpus = write_repos(tmp_path / "corpus")
    data = fixture_recipe(corpus)
    data["stages"] = {**data["stages"], "blocklist": blocklist}
    path = tmp_path / "recipes" / "recipe.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, data


def test_without_its_line_the_stage_is_no_recipe_key(tmp_path):
    data = fixture_recipe(tmp_path)
    data["stages"]["blocklist"] = {"file": "blocked.txt"}
    with pytest.raises(RecipeError, match=r"stages.blocklist: unknown stage"):
        load_recipe_data(data)
    assert "blocklist" not in config.STAGE_ORDER


def test_the_line_makes_it_a_recipe_key_with_its_order_shorthand_and_path(tmp_path, blocklist_stage):
    assert config.STAGE_ORDER[:5] == ("ingest", "langid", "filters", "blocklist", "dedup")
    path, _ = _recipe_file(tmp_path, file="blocked.txt")
    (path.parent / "blocked.txt").write_text("main.go\n")
    recipe = load_recipe(path)
    assert isinstance(recipe.stages.blocklist, blocklist_stage.BlocklistConfig)
    assert recipe.stages.blocklist.file == str((path.parent / "blocked.txt").resolve())  # relative to the recipe
    assert recipe.stages.enabled() == ["ingest", "langid", "filters", "blocklist", "dedup", "tokenize", "pack"]
    again = load_recipe(path, overrides=["blocklist.reason=listed"])  # the --set shorthand
    assert again.stages.blocklist.reason == "listed"
    assert apply_overrides({}, ["blocklist.reason=x"]) == {"stages": {"blocklist": {"reason": "x"}}}
    with pytest.raises(RecipeError, match=r"stages.blocklist.file: required key is missing"):
        load_recipe(path, overrides=["blocklist={reason: x}"])
    assert config.Recipe.model_validate(recipe.model_dump()).stages.blocklist == recipe.stages.blocklist
    check_recipe_inputs(recipe)
    (path.parent / "blocked.txt").unlink()
    with pytest.raises(RecipeError, match=r"stages.blocklist.file: .*blocked.txt does not exist"):
        check_recipe_inputs(recipe)


def test_a_stage_of_the_users_own_may_follow_it(tmp_path, blocklist_stage):
    """It sits before tokenize, on document rows: a user stage may name it in ``after:``, with no
    other edit, and the error for a stage that may not be followed names it among the choices."""
    _, data = _recipe_file(tmp_path, file="blocked.txt")
    data["stages"]["mine"] = {"use": "mypkg.quality:score", "kind": "filter", "after": "blocklist"}
    assert load_recipe_data(data).stages.enabled()[3:6] == ["blocklist", "mine", "dedup"]
    data["stages"]["mine"]["after"] = "tokenize"
    with pytest.raises(RecipeError, match=r"stages.mine.after: 'tokenize' is not a stage this recipe runs before "
                       r"tokenize: use one of \['ingest', 'langid', 'filters', 'blocklist', 'dedup'\]"):
        load_recipe_data(data)


def test_the_stage_runs_on_ray_and_the_manifest_lists_it(tmp_path, ray_local, blocklist_stage):
    from codecorpus.runtime.executor import Executor

    path, _ = _recipe_file(tmp_path, file="blocked.txt")
    (path.parent / "blocked.txt").write_text("main.go\nsrc/lib.rs\n")
    recipe = load_recipe(path)
    check_recipe_inputs(recipe)
    run = tmp_path / "run"
    result = Executor(recipe, run, quiet=True).run_pipeline()
    assert [s.name for s in result.stages] == ["ingest", "langid", "filters", "blocklist", "dedup", "tokenize",
                                               "pack"]
    paths = schema.RunPaths(run)
    stats = json.loads(paths.stats("blocklist").read_text())
    assert stats["dropped"] == {"blocklisted": 2}
    assert stats["rows_in"] == stats["rows_out"] + 2
    manifest = json.loads(paths.set_manifest("short").read_text())
    assert "blocklist" in manifest["provenance"]["stages"]
    assert yaml.safe_load(paths.recipe.read_text())["stages"]["blocklist"]["reason"] == "blocklisted"


@pytest.mark.parametrize("module", [config, config_load, preflight], ids=lambda m: m.__name__)
def test_the_loading_and_the_checks_name_no_stage(module):
    """Shorthands, path resolution and path checks come from the specs: no stage name is spelled there."""
    tree = ast.parse(Path(module.__file__).read_text())
    literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not literals & set(config.STAGE_ORDER)

"""The recipe file read before its validation: the settings a run's Ray start takes from it."""

from __future__ import annotations

import pytest

from codecorpus.config import load_recipe
from codecorpus.recipe_file import LocalStart, RecipeError, local_start_settings, read_recipe_file


def test_the_settings_are_the_validated_recipes_overrides_included(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("out: runs/a\nworkers: 3\nsources: [{type: local, path: repos, name: r}]\nstages: {ingest: {}}\n")
    (tmp_path / "repos").mkdir()
    data = read_recipe_file(recipe)
    assert local_start_settings(data, []) == LocalStart(3, "runs/a")
    overrides = ["workers=2", "out=s3://bucket/run", "ingest.shard_bytes=1000"]
    assert local_start_settings(data, overrides) == LocalStart(2, "s3://bucket/run")
    validated = load_recipe(recipe, overrides, data)
    assert (validated.workers, validated.out) == (2, "s3://bucket/run")
    assert local_start_settings({}, []) == LocalStart(None, None)  # Recipe's defaults: all cores, a local out
    assert local_start_settings({"workers": None}, []) == LocalStart(None, None)  # workers' default, said aloud


@pytest.mark.parametrize("data", [{"workers": 0}, {"workers": "2"}, {"workers": True}, {"workers": 1.5},
                                  {"out": 3}, {"out": ["runs/a"]}, {"out": None}])  # fmt: skip
def test_a_setting_validation_could_coerce_or_refuse_waits_for_validation(data):
    assert local_start_settings(data, []) is None


def test_a_file_that_is_no_recipe_fails_before_anything_starts(tmp_path):
    with pytest.raises(RecipeError, match="no recipe at"):
        read_recipe_file(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("stages: [\n")
    with pytest.raises(RecipeError, match="not valid YAML"):
        read_recipe_file(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(RecipeError, match="must be a YAML mapping"):
        read_recipe_file(tmp_path / "list.yaml")
    with pytest.raises(RecipeError, match=r"expected KEY\.PATH=VALUE"):
        local_start_settings({}, ["workers"])

from __future__ import annotations

import pytest

from codecorpus.config import RecipeError, load_recipe, load_recipe_data
from codecorpus.preflight import check_recipe_inputs


def _recipe(sources, **extra):
    return load_recipe_data({"sources": sources, "stages": {"ingest": {}}, **extra})


def test_every_missing_path_is_listed_under_its_key(tmp_path):
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    recipe = _recipe(
        [{"type": "local", "name": "ok", "path": str(tmp_path)},
         {"type": "local", "name": "gone", "path": str(tmp_path / "nope")},
         {"type": "local", "name": "file", "path": str(a_file)},
         {"type": "archive", "name": "remote", "path": "s3://bucket/a.tar.gz"}],
    )
    with pytest.raises(RecipeError) as err:
        check_recipe_inputs(recipe)
    lines = str(err.value).splitlines()
    assert lines[0] == "the recipe names inputs that are not there:"
    assert any(line.startswith("  sources.1.path:") and "does not exist" in line for line in lines)
    assert any(line.startswith("  sources.2.path:") and "is not a directory" in line for line in lines)
    assert not any("sources.0." in line or "sources.3." in line for line in lines)


def test_tokenizer_and_benchmark_files_are_checked(tmp_path):
    recipe = load_recipe_data({
        "sources": [{"type": "local", "name": "a", "path": str(tmp_path)}],
        "stages": {"ingest": {}, "filters": {"decontam": {"files": [
            {"name": "b", "path": str(tmp_path / "bench.jsonl")}]}}, "tokenize": {}},
        "tokenizer": {"path": str(tmp_path / "tokenizer.json")},
    })
    with pytest.raises(RecipeError) as err:
        check_recipe_inputs(recipe)
    assert "tokenizer.path:" in str(err.value)
    assert "stages.filters.decontam.files.0.path:" in str(err.value)


def test_shipped_recipes_pass():
    for name in ("quickstart", "long-context", "sft-traces"):
        check_recipe_inputs(load_recipe(f"pipelines/{name}.yaml"))


def test_a_git_folder_without_repositories_fails_before_work(tmp_path):
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    recipe = _recipe([{"type": "git", "name": "g", "path": str(tmp_path / "empty")}])
    with pytest.raises(RecipeError, match=r"sources\.0\.path: no git repository under"):
        check_recipe_inputs(recipe)

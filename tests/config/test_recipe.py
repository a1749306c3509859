from __future__ import annotations

import pytest

from codecorpus.config import RecipeError, load_recipe, load_recipe_data

BASE = {
    "sources": [{"type": "local", "name": "a", "path": "/tmp"}],
    "stages": {"ingest": {}, "langid": {}, "filters": {}, "dedup": {}, "tokenize": {}, "pack": {}},
    "tokenizer": {"builtin": "gpt2"},
    "outputs": [{"name": "short-8k", "seq_len": 8192}],
}


def _with(**changes):
    data = {**BASE, **changes}
    return data


def test_quickstart_recipe_loads():
    r = load_recipe("pipelines/quickstart.yaml")
    assert r.stages.enabled() == ["ingest", "langid", "filters", "dedup", "tokenize", "pack"]
    assert r.tokenizer.builtin == "qwen2.5"


def test_unknown_key_names_the_path():
    bad = _with(stages={**BASE["stages"], "filters": {"max_line_lenn": 3}})
    with pytest.raises(RecipeError, match=r"stages\.filters\.max_line_lenn: unknown key"):
        load_recipe_data(bad)


def test_bad_value_names_the_path_and_value():
    bad = _with(stages={**BASE["stages"], "filters": {"min_alnum_frac": "lots"}})
    with pytest.raises(RecipeError, match=r"stages\.filters\.min_alnum_frac: .*'lots'"):
        load_recipe_data(bad)


def test_pack_without_outputs_says_what_to_add():
    with pytest.raises(RecipeError, match="outputs"):
        load_recipe_data(_with(outputs=[]))


def test_tokenizer_needs_exactly_one_choice():
    with pytest.raises(RecipeError, match="exactly one of tokenizer"):
        load_recipe_data(_with(tokenizer={"builtin": "gpt2", "path": "x.json"}))


def test_overrides_and_relative_paths(tmp_path):
    (tmp_path / "r.yaml").write_text(
        "sources: [{type: local, name: a, path: data}]\nstages: {ingest: {}, filters: {}}\n"
    )
    r = load_recipe(tmp_path / "r.yaml", ["filters.max_line_len=50", "seed=7"])
    assert r.stages.filters.max_line_len == 50
    assert r.seed == 7
    assert r.sources[0].path == str((tmp_path / "data").resolve())
    with pytest.raises(RecipeError, match=r"KEY\.PATH=VALUE"):
        load_recipe(tmp_path / "r.yaml", ["nonsense"])


def test_missing_recipe_file():
    with pytest.raises(RecipeError, match="no recipe at"):
        load_recipe("does/not/exist.yaml")


# --- error messages: key paths a user can follow ------------------------------------------


def test_list_items_are_indexed_and_source_tags_left_out():
    bad = _with(sources=[{"type": "local", "name": "a", "path": "/tmp"},
                         {"type": "local", "name": "b", "path": "/tmp", "bogus": 1}])
    with pytest.raises(RecipeError) as err:
        load_recipe_data(bad)
    assert "sources.1.bogus: unknown key" in str(err.value)
    assert ".local." not in str(err.value)


def test_source_type_errors_name_the_type_key_and_the_choices():
    bad = _with(sources=[{"name": "a", "path": "/tmp"}, {"type": "gitx", "name": "b", "path": "/tmp"}])
    with pytest.raises(RecipeError) as err:
        load_recipe_data(bad)
    text = str(err.value)
    assert "sources.0.type: required key is missing: set it to one of local, python-env" in text
    assert "sources.1.type: unknown type 'gitx'" in text
    assert "Tuple should have at least 1 item" not in text  # a knock-on error, not a problem of its own
    assert "discriminator" not in text


def test_a_bad_override_names_the_override_not_the_recipe():
    with pytest.raises(RecipeError) as err:
        load_recipe("pipelines/quickstart.yaml", ["filters.max_line_len=abc"])
    text = str(err.value)
    assert text.startswith("invalid --set override:")
    assert "--set filters.max_line_len=abc: stages.filters.max_line_len:" in text
    assert "quickstart.yaml" not in text


def test_an_error_in_the_file_still_names_the_file(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("sources: [{type: local, name: a, path: /tmp}]\nstages: {ingest: {max_file_bytes: -1}}\n")
    with pytest.raises(RecipeError, match=r"invalid recipe .*r\.yaml:\n  stages\.ingest\.max_file_bytes"):
        load_recipe(recipe, ["ingest.shard_bytes=1000"])

"""``StageSpec.warm``: a stage's driver-side work starts in the background, and the stage waits for it."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

from codecorpus.config import load_recipe_data
from codecorpus.filters import decontam
from codecorpus.runtime.executor import Executor
from codecorpus.tokenize import tokenizer
from conftest import fixture_recipe, write_repos


def _executor(tmp_path: Path) -> Executor:
    recipe = load_recipe_data(fixture_recipe(write_repos(tmp_path / "corpus"), name="warm"))
    return Executor(recipe, tmp_path / "run", quiet=True)


def test_a_stage_begins_after_its_warm_work_and_a_failed_warm_is_left_to_the_stage(tmp_path, ray_local):
    ex = _executor(tmp_path)
    events: list[tuple[str, str]] = []

    def slow(recipe: object) -> None:
        time.sleep(0.5)
        events.append(("warmed", threading.current_thread().name))

    def broken(recipe: object) -> None:
        raise OSError("planted: the warm-up cannot read its input")

    source, second = list(ex.specs)[:2]
    ex.specs[source] = dataclasses.replace(ex.specs[source], warm=slow)
    ex.specs[second] = dataclasses.replace(ex.specs[second], warm=broken)
    begin = ex._require_upstream
    ex._require_upstream = lambda spec: (events.append(("stage", spec.name)), begin(spec))[1]
    ex.plan()
    ex.warm()
    result = ex.run_pipeline(until=second)

    assert events[0][0] == "warmed" and events[0][1].startswith("codecorpus-warm"), events
    assert events[1:3] == [("stage", source), ("stage", second)], events
    assert [st.name for st in result.stages] == [source, second]  # the broken warm-up failed nothing
    assert all(st.stats["rows_in"] == st.stats["rows_out"] + sum(st.stats["dropped"].values())
               for st in result.stages)


def test_the_builtin_warm_ups_fill_the_caches_the_driver_reads(tmp_path, ray_local):
    ex = _executor(tmp_path)
    assert {name for name, spec in ex.specs.items() if spec.warm is not None} == {"filters", "pack"}
    decontam._CACHE.clear()
    tokenizer.load_tokenizer.cache_clear()
    ex.warm()
    for future in ex._warming.values():
        assert future.result(timeout=60) is None

    cfg = ex.recipe.stages.filters.decontam
    assert decontam.benchmark_fingerprint(cfg) in decontam._CACHE
    assert decontam.driver_index(cfg) is decontam._CACHE[decontam.benchmark_fingerprint(cfg)]
    assert tokenizer.load_tokenizer.cache_info().currsize == 1
    before = tokenizer.load_tokenizer.cache_info().hits
    tok_cfg = tokenizer.with_set_tokens(ex.recipe.tokenizer, ex.recipe.outputs)
    tokenizer.load_tokenizer(tok_cfg)  # what pack's set manifests load
    assert tokenizer.load_tokenizer.cache_info().hits == before + 1

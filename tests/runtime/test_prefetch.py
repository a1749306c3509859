"""``StageSpec.prefetch``: a stage's driver-side work runs in the background, and the stage waits for it."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

from codecorpus.config import load_recipe_data
from codecorpus.filters import decontam
from codecorpus.runtime.executor import Executor
from codecorpus.runtime.launch import start
from codecorpus.tokenize import tokenizer
from codecorpus.tokenize.spec import run_tokenizer
from conftest import fixture_recipe, write_repos


def _recipe(tmp_path: Path):
    return load_recipe_data(fixture_recipe(write_repos(tmp_path / "corpus"), name="prefetch"))


def _settle(ex: Executor) -> None:
    """Wait for what is still prefetching, so it cannot run into the next test."""
    for future in ex._prefetched.values():
        future.exception(timeout=120)


def test_a_stage_begins_after_its_prefetch_and_a_failed_one_is_left_to_the_stage(tmp_path, ray_local):
    ex = Executor(_recipe(tmp_path), tmp_path / "run", quiet=True)
    events: list[tuple[str, str]] = []

    def slow(recipe: object) -> None:
        time.sleep(0.5)
        events.append(("prefetched", threading.current_thread().name))

    def broken(recipe: object) -> None:
        raise OSError("planted: the prefetch cannot read its input")

    source, second = list(ex.specs)[:2]
    ex.specs[source] = dataclasses.replace(ex.specs[source], prefetch=slow)
    ex.specs[second] = dataclasses.replace(ex.specs[second], prefetch=broken)
    begin = ex._require_upstream
    ex._require_upstream = lambda spec: (events.append(("stage", spec.name)), begin(spec))[1]
    ex.plan()
    ex.prefetch([source, second])
    result = ex.run_pipeline(until=second)

    assert events == [("prefetched", f"codecorpus-prefetch-{source}"), ("stage", source), ("stage", second)]
    assert [st.name for st in result.stages] == [source, second]  # the broken prefetch failed nothing


def test_start_prefetches_the_selected_stages_only(tmp_path, ray_local):
    recipe = _recipe(tmp_path)
    for (only, until), expected in (((None, None), {"filters"}), ((None, "langid"), set()),
                                    (("filters", None), {"filters"}), (("pack", None), set())):  # fmt: skip
        ex = start(lambda: (recipe, tmp_path / "run"), quiet=True, only=only, until=until)
        assert set(ex._prefetched) == expected, (only, until)
        _settle(ex)


def test_the_builtin_prefetches_fill_the_caches_the_driver_reads(tmp_path, ray_local):
    ex = Executor(_recipe(tmp_path), tmp_path / "run", quiet=True)
    decontam._CACHE.clear()
    tokenizer.load_tokenizer.cache_clear()
    ex.prefetch(ex.specs)
    assert set(ex._prefetched) == {"filters"}
    for future in ex._prefetched.values():
        assert future.result(timeout=120) is None

    cfg = ex.recipe.stages.filters.decontam
    assert list(decontam._CACHE) == [decontam.benchmark_fingerprint(cfg)]
    assert decontam.driver_index(cfg) is decontam._CACHE[decontam.benchmark_fingerprint(cfg)]
    # pack's set manifests name the tokenizer its tasks send back: the driver never loads it
    assert tokenizer.load_tokenizer.cache_info().currsize == 0


def test_a_run_packs_without_loading_the_tokenizer_on_the_driver(tmp_path, ray_local):
    """The tasks run in Ray's worker processes; this process is the driver."""
    import json

    ex = Executor(_recipe(tmp_path), tmp_path / "run", quiet=True)
    tokenizer.load_tokenizer.cache_clear()
    ex.plan()
    ex.run_pipeline()
    assert tokenizer.load_tokenizer.cache_info().misses == 0
    out = ex.recipe.outputs[0].name
    named = json.loads(ex.run.set_manifest(out).read_text())["tokenizer"]
    loaded = tokenizer.load_tokenizer(run_tokenizer(ex.stage_run("pack"))).fingerprint()
    assert {k: named[k] for k in loaded} == loaded

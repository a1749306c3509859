"""Per-task peak memory (issue 9): measured inside the task, kept per step in ``_stats.json``."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from codecorpus import schema
from codecorpus.runtime import memory

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")


@linux_only
def test_a_task_peak_is_its_own_not_the_process_lifetime_peak():
    before = memory.start_job()
    big = np.ones(200 * 2**20 // 8)  # 200 MiB, touched
    first = memory.end_job(before)
    del big
    memory.release()
    second = memory.end_job(memory.start_job())  # a small task after the big one
    assert first["peak_rss"] - first["rss_before"] >= 190 * 2**20
    assert second["peak_rss"] - second["rss_before"] < 50 * 2**20
    assert second["peak_rss"] < first["peak_rss"]


def test_stage_memory_keeps_the_largest_task_per_step():
    record = memory.StageMemory()
    assert record.summary() == {}  # every task resumed from its marker: nothing measured
    record.add("dedup: pairs", "pairs-p00000", {"rss_before": 10, "peak_rss": 50})
    record.add("dedup: pairs", "pairs-p00001", {"rss_before": 10, "peak_rss": 90})
    record.add("dedup: pairs", "pairs-p00002", {"rss_before": 10, "peak_rss": 70})
    record.add("dedup: apply", "part-00000", None)  # unmeasured (no /proc): left out
    summary = record.summary()
    assert summary["peak_task_rss"] == 90
    assert summary["steps"] == {"dedup: pairs": {"rss_before": 10, "peak_rss": 90, "task": "pairs-p00001"}}


@linux_only
def test_a_run_records_each_steps_peak_task(tmp_path, ray_local):
    from codecorpus.config import load_recipe_data
    from codecorpus.runtime.executor import Executor
    from conftest import fixture_recipe, write_repos

    corpus = write_repos(tmp_path / "corpus")
    recipe = fixture_recipe(corpus, name="memory", out=str(tmp_path / "run"))
    run = tmp_path / "run"
    Executor(load_recipe_data(recipe), run, quiet=True).run_pipeline()
    paths = schema.RunPaths(run)
    dedup = json.loads(paths.stats("dedup").read_text())["memory"]
    assert {"dedup: signatures", "dedup: pairs", "dedup: clusters", "dedup: apply"} <= set(dedup["steps"])
    for stage in ("ingest", "langid", "tokenize", "pack"):
        mem = json.loads(paths.stats(stage).read_text())["memory"]
        assert mem["peak_task_rss"] == max(s["peak_rss"] for s in mem["steps"].values())
        for step in mem["steps"].values():
            assert 0 < step["rss_before"] <= step["peak_rss"]
    # a rerun resumes every task from its marker: nothing is measured, and the entry says so
    Executor(load_recipe_data(recipe), run, quiet=True).run_pipeline()
    assert json.loads(paths.stats("tokenize").read_text())["memory"] == {}

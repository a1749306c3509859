"""``max_tasks``: the most tasks a run keeps at once (``--workers`` on a joined cluster)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from codecorpus import schema
from codecorpus.config import load_recipe_data
from codecorpus.pipeline import bodies
from codecorpus.pipeline.spec import Job
from codecorpus.runtime.executor import Executor
from codecorpus.runtime.scheduler import PlanTasks
from conftest import fixture_recipe

# lambdas: Ray's workers cannot import this module, so the functions travel by value
_spell = lambda seconds: (time.time(), time.sleep(seconds), time.time())[::2]  # noqa: E731
_task = lambda seconds: dict(zip(("start", "end"), _spell(seconds), strict=True))  # noqa: E731


def _overlaps(spells: list[tuple[float, float]]) -> int:
    spells = sorted(spells)
    return sum(1 for (_, end), (start, _) in itertools.pairwise(spells) if start < end)


def _executor(tmp_path: Path, max_tasks: int | None) -> Executor:
    tmp_path.mkdir(parents=True, exist_ok=True)
    recipe = load_recipe_data(fixture_recipe(tmp_path, name="cap"))
    return Executor(recipe, tmp_path / "run", quiet=True, max_tasks=max_tasks)


def test_one_task_at_a_time_when_capped_and_side_by_side_when_not(tmp_path, ray_local):
    for cap, side_by_side in ((1, False), (None, True)):
        ex = _executor(tmp_path / str(cap), cap)
        ctx = bodies.JobContext(schema.RunPaths(tmp_path / str(cap) / "run"), "probe", "h")
        jobs = [Job(f"part-{i:05d}", _task, (0.4,)) for i in range(4)]
        _, _, results = ex.run_jobs("probe", jobs, ctx)
        assert (_overlaps([(r["start"], r["end"]) for r in results]) > 0) is side_by_side, (cap, results)

        planned = PlanTasks(ex.run, ex.ray_ready, ex.max_tasks).map("plan", _spell, [0.4] * 4)
        assert len(planned) == 4
        assert (_overlaps([tuple(p) for p in planned]) > 0) is side_by_side, (cap, planned)

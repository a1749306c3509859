"""The next stage's first phase starts shard by shard as the stage before it finishes its
shards (``Executor.prepare_follower``, ``StageSpec.head``): no barrier between two per-shard phases."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from codecorpus import schema
from codecorpus.config import load_recipe_data
from codecorpus.pipeline import tasks
from codecorpus.pipeline.spec import Job
from codecorpus.runtime.executor import Executor, PipelineError, _Follower
from conftest import fixture_recipe

# lambdas: Ray's workers cannot import this module, so the functions travel by value
_spell = lambda seconds: dict(zip(("start", "end"), (time.time(), time.sleep(seconds), time.time())[::2], strict=True))  # noqa: E731

_fails = lambda seconds: (time.sleep(seconds), 1 / 0)  # noqa: E731
_finishes = lambda seconds, flag: (time.sleep(seconds), Path(flag).write_text("finished"), {})[2]  # noqa: E731


def _executor(tmp_path: Path, max_tasks: int | None = None, tokenizer: dict | None = None, **stages: object) -> Executor:
    corpus = tmp_path / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    data = fixture_recipe(corpus, name="follow")
    data["stages"].update(stages)
    data["tokenizer"] = tokenizer or data["tokenizer"]
    return Executor(load_recipe_data(data), tmp_path / "run", quiet=True, max_tasks=max_tasks)


def _contexts(tmp_path: Path) -> tuple[tasks.TaskContext, tasks.TaskContext]:
    run = schema.RunPaths(tmp_path / "run")
    return tasks.TaskContext(run, "a", "ha"), tasks.TaskContext(run, "b", "hb")


def _head(seconds: float):
    return lambda i: Job(f"head-{schema.shard_name(i)}", _spell, (seconds,))


def test_a_shards_next_job_starts_when_the_shard_is_done_and_runs_once(tmp_path, ray_local):
    ex = _executor(tmp_path)
    a, b = _contexts(tmp_path)
    follower = _Follower(b, _head(0.1))
    shards = [Job(schema.shard_name(0), _spell, (0.0,)), Job(schema.shard_name(1), _spell, (2.0,))]
    _, _, done = ex.run_jobs("a", shards, a, follower)
    _, _, heads = ex.run_jobs("b", [follower.head(0), follower.head(1)], b)
    assert heads[0]["start"] < done[1]["end"]  # while stage a's last task ran: the early one, not run again
    assert heads[1]["start"] >= done[1]["end"]  # shard 1's waited for shard 1
    assert ex._early == {} and ex._early_running == set()


def test_early_jobs_count_against_the_cap(tmp_path, ray_local):
    ex = _executor(tmp_path, max_tasks=1)
    a, b = _contexts(tmp_path)
    follower = _Follower(b, _head(0.3))
    _, _, done = ex.run_jobs("a", [Job(schema.shard_name(i), _spell, (0.3,)) for i in range(3)], a, follower)
    _, _, heads = ex.run_jobs("b", [follower.head(i) for i in range(3)], b)
    spells = sorted((r["start"], r["end"]) for r in [*done, *heads])
    assert not any(start < end for (_, end), (start, _) in itertools.pairwise(spells)), spells


def test_a_phase_runs_its_own_jobs_whatever_early_jobs_hold_the_cap(tmp_path, ray_local):
    ex = _executor(tmp_path, max_tasks=1)
    a, b = _contexts(tmp_path)
    other = tasks.TaskContext(a.run, "c", "hc")
    ex.run_jobs("a", [Job(schema.shard_name(0), _spell, (0.0,))], a, _Follower(b, _head(1.0)))
    assert len(ex._early_running) == 1  # b's job of shard 0 holds the one slot
    ran, _, results = ex.run_jobs("c", [Job("c-0", _spell, (0.0,))], other)
    assert ran == 1 and len(results) == 1


def test_a_next_job_done_before_is_not_started_again(tmp_path, ray_local):
    ex = _executor(tmp_path)
    a, b = _contexts(tmp_path)
    tasks.write_marker(b, "head-part-00000", {"rows": 1})  # a resumed run: done under this hash
    follower = _Follower(b, _head(0.0))
    ex.run_jobs("a", [Job(schema.shard_name(i), _spell, (0.0,)) for i in range(2)], a, follower)
    assert set(ex._early["b"]) == {"head-part-00001"}
    _, skipped, results = ex.run_jobs("b", [follower.head(0), follower.head(1)], b)
    assert skipped == 1 and results[0] == {"rows": 1}


def test_a_failed_shard_stops_the_next_stages_early_jobs(tmp_path, ray_local):
    ex = _executor(tmp_path)
    a, b = _contexts(tmp_path)
    flag = tmp_path / "finished"
    follower = _Follower(b, lambda i: Job(f"head-{schema.shard_name(i)}", _finishes, (3.0, str(flag))))
    shards = [Job(schema.shard_name(0), _spell, (0.0,)), Job(schema.shard_name(1), _fails, (0.2,))]
    with pytest.raises(PipelineError, match="ZeroDivisionError"):
        ex.run_jobs("a", shards, a, follower)
    assert ex._early == {}
    time.sleep(4.0)
    assert not flag.exists()  # cancelled, not left to run on


def test_a_head_that_differs_from_the_first_phase_is_a_bug_named(tmp_path, ray_local):
    ex = _executor(tmp_path)
    a, b = _contexts(tmp_path)
    ex.run_jobs("a", [Job(schema.shard_name(0), _spell, (0.0,))], a, _Follower(b, _head(0.0)))
    with pytest.raises(tasks.InvariantError, match="head-part-00000"):
        ex.run_jobs("b", [Job("other-part-00000", _spell, (0.0,))], b)


def test_which_stages_follow_their_upstream(tmp_path, ray_local):
    """langid after ingest, filters (a map) after langid, dedup after filters; tokenize after dedup
    unless it trains its tokenizer on dedup's whole output; pack (its mixes, its plan) never."""
    ex = _executor(tmp_path / "plain")
    ex._next = {"ingest": "langid", "langid": "filters", "filters": "dedup", "dedup": "tokenize", "tokenize": "pack"}
    outputs = [Job(schema.shard_name(i), _spell) for i in range(2)]
    heads = {stage: ex.prepare_follower(stage, outputs) for stage in ex._next}
    assert {stage for stage, follower in heads.items() if follower is not None} == {"ingest", "langid", "filters", "dedup"}
    assert heads["ingest"].head(1).name == "scan-part-00001"
    assert heads["langid"].head(1).name == "part-00001"
    assert heads["filters"].head(1).name == "sig-part-00001"
    assert ex.prepare_follower("ingest", outputs) is None  # langid's directory is prepared once, not under its early jobs
    fresh = _executor(tmp_path / "fresh")
    fresh._next = {"langid": "filters"}
    assert fresh.prepare_follower("langid", [Job("p-0", _spell)]) is None  # outputs that are not the parts, in order
    assert fresh.prepare_follower("langid", outputs) is not None

    trains = _executor(tmp_path / "trains", tokenizer={"train": {"vocab_size": 512}})
    trains._next = {"dedup": "tokenize"}
    assert trains.prepare_follower("dedup", outputs) is None
    forks = _executor(tmp_path / "forks", dedup={"buckets": 4, "forks": {"enabled": True}})
    forks._next = {"filters": "dedup"}
    assert forks.prepare_follower("filters", outputs).head(0).name == "fkeys-part-00000"


def test_a_run_starts_each_following_stage_early_and_writes_the_same_bytes(tmp_path, ray_local, monkeypatch):
    """The real pipeline: langid, filters, dedup and tokenize each start shards while the stage
    before runs, pack does not; the outputs are those of a run with no early start."""
    from conftest import run_outputs, write_repos

    corpus = write_repos(tmp_path / "corpus")
    recipe = load_recipe_data(fixture_recipe(corpus, name="follow", seed=3))
    early: list[str] = []
    start = Executor._start_early

    def spy(self, follower, shard):
        early.append(follower.ctx.stage)
        start(self, follower, shard)

    monkeypatch.setattr(Executor, "_start_early", spy)
    Executor(recipe, tmp_path / "early", quiet=True).run_pipeline()
    assert set(early) == {"langid", "filters", "dedup", "tokenize"}
    monkeypatch.setattr(Executor, "prepare_follower", lambda self, stage, outputs: None)
    Executor(recipe, tmp_path / "barriers", quiet=True).run_pipeline()
    assert run_outputs(tmp_path / "early") == run_outputs(tmp_path / "barriers")

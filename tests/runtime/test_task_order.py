"""A stage's tasks start heaviest first: by their planner's weight, else by the sizes of the
files they read; ties and unknown sizes keep the job order."""

from __future__ import annotations

from pathlib import Path

from codecorpus.pipeline.spec import Job
from codecorpus.runtime.scheduler import heaviest_first


def _job(name: str, reads: tuple[str, ...] = (), weight: int | None = None) -> Job:
    return Job(name, dict, reads=reads, weight=weight)


def test_planned_weights_order_the_start_ties_in_job_order():
    jobs = [_job("a", weight=5), _job("b", weight=9), _job("c", weight=5), _job("d", weight=0)]
    assert list(heaviest_first(jobs, range(4))) == [1, 0, 2, 3]


def test_the_sizes_of_the_files_read_weigh_a_job_without_a_planned_weight(tmp_path: Path):
    small, big = tmp_path / "small.parquet", tmp_path / "big.parquet"
    small.write_bytes(b"x" * 10)
    big.write_bytes(b"x" * 1000)
    jobs = [_job("small", (str(small),)), _job("missing", (str(tmp_path / "gone"),)),
            _job("big", (str(big),)), _job("a folder", (str(tmp_path),)), _job("described", ("3 files, a ... c",))]
    assert list(heaviest_first(jobs, range(5))) == [2, 0, 1, 3, 4]


def test_only_the_waiting_jobs_are_ordered():
    jobs = [_job("done", weight=100), _job("a", weight=1), _job("b", weight=2)]
    assert list(heaviest_first(jobs, [1, 2])) == [2, 1]

"""A planning job that fails names what it was planning: the repositories of its batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from codecorpus.config import load_recipe_data
from codecorpus.ingest import git, plan
from codecorpus.pipeline.spec import named, repositories
from codecorpus.runtime.executor import Executor, PipelineError
from codecorpus.runtime.scheduler import PlanTasks
from conftest import fixture_recipe

# a lambda: Ray's workers cannot import this module, so the function travels by value
_fails = lambda batch: 1 / ("/repos/broken" not in batch)  # noqa: E731


def test_named_lists_one_input_or_the_first_and_last():
    assert named(["/a"], "repositories") == "/a"
    assert named(["/a", "/b", "/c"], "repositories") == "3 repositories, /a ... /c"
    assert named([], "repositories") == "no repositories"


def test_a_failed_planning_job_names_its_repositories(tmp_path: Path, ray_local):
    ex = Executor(load_recipe_data(fixture_recipe(tmp_path, name="planfail")), tmp_path / "run", quiet=True)
    batches = [["/repos/fine"], ["/repos/also-fine", "/repos/broken", "/repos/last"]]
    with pytest.raises(PipelineError) as failed:
        PlanTasks(ex.run, ex.ray_ready, ex.max_tasks).map("plan-src", _fails, batches, lambda batch: named(batch, "repositories"))
    message = str(failed.value)
    assert "job plan-src:1 failed" in message
    assert "input: 3 repositories, /repos/also-fine ... /repos/last" in message
    assert "ZeroDivisionError" in message


def test_the_sources_describe_their_batches_by_path(tmp_path: Path):
    found = [git.Found("alpha", "/srv/alpha.git"), git.Found("beta", "https://example.org/beta.git")]
    assert repositories(found) == "2 repositories, /srv/alpha.git ... https://example.org/beta.git"
    src = load_recipe_data(fixture_recipe(tmp_path, name="where")).sources[0]
    listings = [plan.LocalListing(src, "one", str(tmp_path / "one")), git.GitListing(src, "two", found[0])]
    assert repositories(listings) == f"2 repositories, {tmp_path / 'one'} ... /srv/alpha.git"

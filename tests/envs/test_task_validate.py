"""task_validate's job bodies on the planted calc repository, its version discovered and
verified by the stages' own jobs: a task validates, and a task the trainer's grading rejects
(validation by use) is a drop whose detail names the tests that decided it."""

from __future__ import annotations

import functools
import json

import pytest
from envs_helpers import LIB, PATCH, TEST_PATCH, UNITTESTS, git_repo, needs_bwrap

from codecorpus import schema
from codecorpus.envs import bodies, repos, session
from codecorpus.envs.config import EnvDiscoverConfig, EnvVerifyConfig, TaskValidateConfig
from codecorpus.pipeline.bodies import JobContext, map_job, read_parquet

pytestmark = needs_bwrap
F2P = "test_calc.TestCalc.test_add"
KEEPS_1 = "test_calc.TestCalc.test_keeps_1"


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """The calc repository's env_verify rows, made by env_discover's and env_verify's jobs."""
    root = tmp_path_factory.mktemp("task-validate")
    base = git_repo(root / "calc", {"calc.py": LIB, "tests/test_calc.py": UNITTESTS})
    run = schema.RunPaths(root / "run")
    ref = repos.RepoRef("src", "calc", str(root / "calc"), "git")
    bodies.discover_job(JobContext(run, "env_discover", "h"), 0, ref, EnvDiscoverConfig())
    cfg = EnvVerifyConfig(runs=1)
    verify = functools.partial(bodies.verify_table, cfg=cfg, root=str(run.root))
    assert map_job(JobContext(run, "env_verify", "h"), 0, "env_discover", verify)["rows_out"] == 1
    envs = read_parquet(run.part("env_verify", 0)).to_pylist()
    return run, ref, base, envs, bodies.verify_config(cfg, run.root)


def test_a_by_use_drop_names_the_tests_that_decided_it(verified):
    run, ref, base, envs, vcfg = verified
    task = {"instance_id": "calc-1", "repo": "owner/calc", "base_commit": base, "patch": PATCH,
            "test_patch": TEST_PATCH}
    tasks = [task, {**task, "instance_id": "calc-2"}, {**task, "instance_id": "calc-3"}]
    check = bodies.use_check(run.root, vcfg)

    def graded(t: dict, env_file: str, gitdir) -> tuple[str | None, str]:
        """The trainer grades calc-2 with a test patch that expects the bug's answer (the gold
        patch leaves test_add failing) and calc-3 with a FAIL_TO_PASS test the base commit
        already passes (the empty patch resolves it); calc-1 as it validated."""
        if t["instance_id"] == "calc-2":
            t = {**t, "test_patch": TEST_PATCH.replace("add(2, 3), 5)", "add(2, 3), -1)")}
        elif t["instance_id"] == "calc-3":
            t = {**t, "FAIL_TO_PASS": json.dumps([KEEPS_1]), "PASS_TO_PASS": "[]"}
        return check(t, env_file, gitdir)

    kept, drops = bodies.validate_repository(ref, tasks, envs, TaskValidateConfig(), vcfg, graded)
    assert [json.loads(r["instance"])["instance_id"] for r in kept] == ["calc-1"]
    assert json.loads(json.loads(kept[0]["instance"])["FAIL_TO_PASS"]) == [F2P]
    rows = {r[schema.ID]: r for r in bodies.task_drops("task_validate", drops).to_pylist()}
    assert sorted(rows) == ["calc-2", "calc-3"]
    gold, empty = rows["calc-2"], rows["calc-3"]
    assert gold[schema.REASON] == session.GOLD_UNRESOLVED
    assert gold[schema.DETAIL] == f"gold patch: tests failing; FAIL_TO_PASS failing: {F2P}", gold
    assert empty[schema.REASON] == session.EMPTY_RESOLVED
    assert empty[schema.DETAIL] == f"empty patch: every FAIL_TO_PASS test passes: {KEEPS_1}", empty


def test_a_detail_names_a_few_tests_and_counts_the_rest():
    tests = [f"tests/test_big.py::test_case_{i}" for i in range(40)]
    detail = session.named_tests(tests)
    assert detail.startswith("tests/test_big.py::test_case_0, ") and detail.endswith(" (+35 more)")
    assert len(session.named_tests(["t" * 1000, "u"])) < 320

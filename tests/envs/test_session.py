"""The session API on a planted task: a fresh tree at the base commit, commands in the
sandbox, confined file calls, diff, evaluation by SWE-bench's rule, isolation, determinism."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from envs_helpers import FIXED, LIB, PATCH, needs_bwrap
from rollout_helpers import F2P, planted_task

from codecorpus.envs import session as ses

pytestmark = needs_bwrap


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return planted_task(tmp_path_factory.mktemp("rollout"))


def test_a_session_is_the_base_tree_in_the_sandbox(planted):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as s:
        assert s.read_file("calc.py") == LIB
        assert s.list_files() == ["calc.py", "tests/test_calc.py"]
        res = s.run("pwd; python -c 'import calc; print(calc.add(2, 3))'", timeout=30)
        assert res.exit_code == 0 and res.violation is None, res.output
        assert res.output.split() == ["/workspace", "-1"]
        assert s.diff() == ""
        # The test patch is nowhere the policy can read it.
        grep = s.run("grep -rl test_add / 2>/dev/null | grep -v '^/proc' | head", timeout=60)
        assert "test_calc" not in grep.output and "test_add" not in s.read_file("tests/test_calc.py")
    assert s.closed_reason == ses.CLOSED and not s.home.exists()
    with pytest.raises(ses.SessionClosed):
        s.run("true")


def test_gold_patch_resolves_and_empty_patch_does_not(planted):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as s:
        empty = s.evaluate()
        assert not empty["resolved"] and empty["reward"] == 0.0
        assert empty["tests_status"]["FAIL_TO_PASS"] == {"success": [], "failure": [F2P]}
        s.write_file("calc.py", FIXED)
        diff = s.diff()
        assert diff.startswith("diff --git a/calc.py b/calc.py")
        assert "-    return a - b\n+    return a + b\n" in diff
        gold = s.evaluate()
        assert gold["resolved"] and gold["reward"] == 1.0, gold
        assert gold["tests_status"]["FAIL_TO_PASS"]["success"] == [F2P]
        assert not gold["tests_status"]["PASS_TO_PASS"]["failure"]
        again = s.evaluate(PATCH, reward=lambda r: 0.5 * len(r["tests_status"]["FAIL_TO_PASS"]["success"]))
        assert again["reward"] == 0.5
        # Deterministic: the same patch graded twice gives the same report.
        assert s.evaluate() == gold
        bad = s.evaluate("--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n")
        assert not bad["patch_successfully_applied"] and bad["reason"] == "patch_does_not_apply"


def test_file_calls_are_confined_to_the_tree(planted):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as s:
        for bad in ("/etc/passwd", "../outside.txt", "tests/../../x", ".git/config", ""):
            with pytest.raises(ses.PathOutsideTree):
                s.read_file(bad)
            with pytest.raises(ses.PathOutsideTree):
                s.write_file(bad, "x")
        assert s.run("ln -s /etc passwd-dir && ln -s /etc/hostname host", timeout=10).exit_code == 0
        for link in ("host", "passwd-dir/hostname"):
            with pytest.raises(ses.PathOutsideTree):
                s.read_file(link)
        with pytest.raises(ses.PathOutsideTree):
            s.write_file("passwd-dir/evil", "x")
        s.write_file("pkg/new.py", "X = 1\n")
        assert s.run("cat pkg/new.py", timeout=10).output == "X = 1\n"
        assert "+X = 1" in s.diff()


def test_two_sessions_of_one_task_share_nothing_writable(planted):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as a, ses.open_session(entry, cfg) as b:
        a.write_file("calc.py", FIXED)
        assert a.run("echo a > /tmp/mark; touch $ENV_DIR/mark", timeout=10).exit_code != 0
        assert b.read_file("calc.py") == LIB
        assert b.run("cat /tmp/mark", timeout=10).exit_code != 0
        assert b.run(f"ls {a.tree}", timeout=10).exit_code != 0
        assert a.home != b.home


def test_validation_by_use_keeps_a_good_task_and_names_each_failure(planted):
    entry, cfg = planted
    assert ses.validate_by_use(entry, cfg) == (None, "gold resolves, empty does not")
    # An F2P test the base commit already passes: the empty patch resolves the task.
    easy = replace(entry, task={**entry.task, "PASS_TO_PASS": "[]",
                                "FAIL_TO_PASS": json.dumps(["test_calc.TestCalc.test_keeps_1"])})
    assert ses.validate_by_use(easy, cfg)[0] == ses.EMPTY_RESOLVED
    # A test patch the gold patch does not satisfy (it expects the bug's answer).
    rigged = entry.task["test_patch"].replace("add(2, 3), 5)", "add(2, 3), -1)")
    reason, detail = ses.validate_by_use(replace(entry, task={**entry.task, "test_patch": rigged}), cfg)
    assert reason == ses.GOLD_UNRESOLVED and F2P in detail, detail


FLAKY_TEST = ("import os\nimport unittest\n\n\nclass TestFlaky(unittest.TestCase):\n"
              "    def test_second_time(self):\n        seen = os.path.exists('flaky-marker')\n"
              "        open('flaky-marker', 'w').close()\n        self.assertTrue(seen)\n")
FLAKY_ID = "test_flaky.TestFlaky.test_second_time"


def _new_file_diff(path: str, text: str) -> str:
    lines = text.splitlines(keepends=True)
    return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{ln}" for ln in lines)


def test_known_flaky_tests_are_rerun_and_variables_are_fixed(planted):
    entry, cfg = planted
    task = {**entry.task, "test_patch": entry.task["test_patch"] + _new_file_diff("tests/test_flaky.py", FLAKY_TEST),
            "FAIL_TO_PASS": json.dumps([F2P, FLAKY_ID])}
    # Not known to be flaky: its first run's failure stands.
    plain = ses.evaluate_patch(replace(entry, task=task), PATCH, cfg)
    assert not plain["resolved"] and plain["test_runs"] == 1 and plain["statuses"][FLAKY_ID] == "failed"
    # Recorded as flaky by the task: rerun, and its passing run counts.
    known = ses.evaluate_patch(replace(entry, task={**task, "flaky": [FLAKY_ID]}), PATCH, cfg)
    assert known["resolved"] and known["test_runs"] == 2, known
    no_reruns = cfg.model_copy(update={"flaky_reruns": 0})
    assert not ses.evaluate_patch(replace(entry, task={**task, "flaky": [FLAKY_ID]}), PATCH, no_reruns)["resolved"]
    with ses.open_session(entry, cfg) as s:
        shown = s.run("echo $TZ $LANG $LC_ALL $PYTHONHASHSEED $SOURCE_DATE_EPOCH; date +%Z", timeout=10).output
    assert shown.split() == ["UTC", "C.UTF-8", "C.UTF-8", "0", "315532800", "UTC"]

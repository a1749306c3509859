"""Planted suites judged by the verification rules: per-test results only, at least
``min_passed`` passing, a pass rate of at least ``min_pass_rate``, known failures kept out
of PASS_TO_PASS, and tests whose names carry the time counted as flaky. None of them needs
an install (unittest ships with the interpreter), so each costs a few sandboxed runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

from envs_helpers import git_repo, needs_bwrap, write_tree

from codecorpus.envs import discover as disc
from codecorpus.envs import env_spec, verify
from codecorpus.envs import sandbox as sb

pytestmark = needs_bwrap
UNITTEST = "python -m unittest discover -v -s tests"


def _cfg(tmp_path: Path, **kw) -> verify.VerifyConfig:
    limits = sb.Limits(wall_seconds=60, processes=128, memory_bytes=1 << 30)
    return verify.VerifyConfig(**{"cache_dir": str(tmp_path / "cache"), "runs": 2,
                                  "sandbox": sb.SandboxConfig(limits=limits),
                                  "install_limits": limits, **kw})


def _suite(passing: int, failing: int) -> str:
    body = "".join(f"    def test_pass_{i}(self):\n        self.assertEqual(double({i}), {2 * i})\n"
                   for i in range(passing))
    body += "".join(f"    def test_fail_{i}(self):\n        self.assertEqual(double({i}), {i})\n"
                    for i in range(1, failing + 1))
    return "import unittest\nfrom lib import double\n\nclass T(unittest.TestCase):\n" + body


def _repo(root: Path, passing: int, failing: int) -> Path:
    return write_tree(root, {"lib.py": "def double(x):\n    return 2 * x\n",
                             "tests/test_lib.py": _suite(passing, failing)})


def _found(test: str, parser: str) -> disc.Discovery:
    return disc.Discovery(
        ("python",), (disc.Candidate(('python -m venv "$ENV_DIR/venv" --without-pip',), "python",
                                     "", 0, disc.CONVENTION),),
        (disc.Candidate((test,), "python", "Makefile", 1, disc.MANIFEST, parser),), (), "0" * 64)


def test_eighty_percent_passes_and_its_failures_are_known(tmp_path):
    repo = tmp_path / "repo"
    base = git_repo(repo, {"lib.py": "def double(x):\n    return 2 * x\n",
                           "tests/test_lib.py": _suite(8, 2)})
    cfg = _cfg(tmp_path)
    env = verify.verify_revision(repo, base, cfg)
    assert env.verified, (env.reason, env.detail)
    assert verify.counts(env.tests) == {"passed": 8, "failed": 2, "skipped": 0}
    assert env.known_failures == ["test_lib.T.test_fail_1", "test_lib.T.test_fail_2"]
    assert env.fresh_tests == env.tests
    doc = env_spec.environment_spec(env, "x/lib", base, cfg.sandbox, (), cfg.min_passed, cfg.min_pass_rate)
    assert doc["tests"]["known_failures"] == env.known_failures
    assert (doc["tests"]["min_passed"], doc["tests"]["min_pass_rate"]) == (5, 0.8)
    # A task: the patch adds triple(), its test patch a test of it. test_pass_0 is marked a
    # known failure here: it passes before and after, and still is never PASS_TO_PASS.
    write_tree(repo, {"lib.py": "def double(x):\n    return 2 * x\n\n\ndef triple(x):\n    return 3 * x\n",
                      "tests/test_lib.py": _suite(8, 2) + "    def test_triple(self):\n"
                      "        from lib import triple\n        self.assertEqual(triple(2), 6)\n"})
    patch = subprocess.run(["git", "diff", "--", "lib.py"], cwd=repo, capture_output=True,
                           text=True, check=True).stdout
    test_patch = subprocess.run(["git", "diff", "--", "tests/test_lib.py"], cwd=repo,
                                capture_output=True, text=True, check=True).stdout
    subprocess.run(["git", "checkout", "-q", "."], cwd=repo, check=True)
    known = verify.Verification(**{**env.__dict__, "tests": {**env.tests, "test_lib.T.test_pass_0": "failed"}})
    task = verify.validate_task(repo, base, patch, test_patch, known, cfg)
    assert task.valid and task.fail_to_pass == ["test_lib.T.test_triple"], task.reason
    assert sorted(task.pass_to_pass) == [f"test_lib.T.test_pass_{i}" for i in range(1, 8)]


def test_fifty_percent_is_not_verified(tmp_path):
    env = verify.verify_environment(_repo(tmp_path / "repo", 5, 5), _cfg(tmp_path))
    assert (env.verified, env.reason) == (False, verify.LOW_PASS_RATE)
    assert "pass rate 0.50" in env.detail and "unittest" in env.detail
    assert verify.counts(env.tests) == {"passed": 5, "failed": 5, "skipped": 0}


def test_fewer_than_min_passed_is_not_verified(tmp_path):
    env = verify.verify_environment(_repo(tmp_path / "repo", 3, 0), _cfg(tmp_path))
    assert (env.verified, env.reason) == (False, verify.TOO_FEW_PASSED)
    lowered = verify.verify_environment(_repo(tmp_path / "again", 3, 0), _cfg(tmp_path, min_passed=3))
    assert lowered.verified


def test_a_suite_only_an_exit_code_reports_is_not_verified_and_names_its_runner(tmp_path):
    """``make check`` runs unittest quietly: it prints no test by name, only an exit status.
    The drop says which runner could not be read (unittest, behind make)."""
    repo = _repo(tmp_path / "repo", 6, 0)
    write_tree(repo, {"Makefile": "check:\n\tpython -m unittest discover -q -s tests 2>/dev/null\n"})
    env = verify.verify_environment(repo, _cfg(tmp_path), _found("make check", "auto"))
    assert (env.verified, env.reason) == (False, verify.NO_PER_TEST_RESULTS)
    assert env.detail.startswith("no per-test results from unittest (`make check`, exit 0)")
    assert env.attempts[-1]["runner"] == "unittest"


def test_tests_named_with_the_time_are_flaky(tmp_path):
    """A name made from ``datetime.now()`` differs on every run: flaky even in one run, and
    never counted as passing."""
    suite = _suite(5, 0) + (
        "\nimport datetime\n"
        "setattr(T, 'test_at_' + datetime.datetime.now().strftime('%Y%m%dT%H%M%S'), lambda self: None)\n")
    repo = write_tree(tmp_path / "repo", {"lib.py": "def double(x):\n    return 2 * x\n",
                                          "tests/test_lib.py": suite})
    env = verify.verify_environment(repo, _cfg(tmp_path, runs=1))
    assert env.verified, (env.reason, env.detail)
    assert len(env.flaky) == 1 and env.flaky[0].startswith("test_lib.T.test_at_")
    assert env.flaky[0] not in env.tests and verify.counts(env.tests)["passed"] == 5


def test_every_attempt_is_kept(tmp_path):
    """Two test candidates that fail for different reasons: both are in ``attempts`` with
    their command and reason; the drop is for the one that got furthest."""
    repo = _repo(tmp_path / "repo", 5, 5)
    found = _found(UNITTEST, "unittest")
    found = disc.Discovery(found.toolchains, found.installs,
                           (disc.Candidate(("tox -e py",), "python", "tox.ini", 1, disc.CI, "auto"),
                            *found.tests), (), "0" * 64)
    env = verify.verify_environment(repo, _cfg(tmp_path), found)
    assert [(a["test"], a["reason"]) for a in env.attempts] == [
        ("tox -e py", verify.TEST_RUNNER_MISSING), (UNITTEST, verify.LOW_PASS_RATE)]
    assert env.reason == verify.LOW_PASS_RATE

"""Environments verified in the sandbox on small repositories built here, cached installs,
task validation (FAIL_TO_PASS / PASS_TO_PASS and the drop reasons), and the spec schema."""

from __future__ import annotations

import json
import shutil
import subprocess

import jsonschema
import pytest
from envs_helpers import (
    FIXED,
    KEEPS,
    LIB,
    PATCH,
    TEST_PATCH,
    UNITTESTS,
    git_repo,
    needs_bwrap,
    write_tree,
)

from codecorpus.envs import discover as disc
from codecorpus.envs import env_spec, verify
from codecorpus.envs import sandbox as sb

pytestmark = needs_bwrap

CALC_IDS = [f"test_calc.TestCalc.{t}" for t in (*KEEPS, "test_zero")]


def _cfg(tmp_path, **kw) -> verify.VerifyConfig:
    limits = sb.Limits(wall_seconds=120, processes=128, memory_bytes=1 << 30)
    return verify.VerifyConfig(cache_dir=str(tmp_path / "cache"),
                               sandbox=sb.SandboxConfig(limits=limits),
                               install_limits=limits.model_copy(update={"wall_seconds": 300}),
                               **kw)


def test_unittest_repo_verified_and_cached(tmp_path):
    repo = write_tree(tmp_path / "repo", {"calc.py": FIXED, "tests/test_calc.py": UNITTESTS})
    cfg = _cfg(tmp_path)
    env = verify.verify_environment(repo, cfg)
    assert env.verified and env.reason is None
    assert (env.parser, env.test) == ("unittest", disc.UNITTEST + " -s tests")
    assert env.tests == dict.fromkeys(CALC_IDS, "passed")
    # root discovery ran none; then the runs, and one more in the fresh tree
    assert [s.phase for s in env.steps].count("test") == 1 + cfg.runs + 1
    assert env.fresh_tests == env.tests and env.proof["own"]
    assert env.proof["packages"]["calc"]["where"] == "work tree"
    assert not env.cached and env.install_seconds > 0
    again = verify.verify_environment(repo, cfg)
    assert again.cached and [s.phase for s in again.steps if s.phase == "install"] == []
    assert again.cache_key == env.cache_key and again.tests == env.tests


FLIP = ("import os, unittest\n"
        "class F(unittest.TestCase):\n"
        "    def test_flip(self):\n"
        "        # passes on odd runs, fails on even ones: the count lives in the work tree\n"
        "        n = int(open('count').read()) + 1 if os.path.exists('count') else 1\n"
        "        open('count', 'w').write(str(n))\n"
        "        self.assertEqual(n % 2, 1)\n")


def test_ci_command_is_tried_first_and_its_line_recorded(tmp_path):
    workflow = ("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
                "      - uses: actions/checkout@v4\n"
                "      - run: python -m unittest discover -v -s tests -p 'check_*.py'\n")
    repo = write_tree(tmp_path / "repo", {
        ".github/workflows/ci.yml": workflow, "calc.py": FIXED,
        "tests/check_calc.py": UNITTESTS})  # the convention's test*.py pattern finds nothing
    cfg = _cfg(tmp_path)
    env = verify.verify_environment(repo, cfg)
    assert env.verified
    assert env.test_source == (".github/workflows/ci.yml", 7)
    assert env.tests == {t.replace("test_calc", "check_calc"): "passed" for t in CALC_IDS}
    doc = env_spec.environment_spec(env, "x/calc", "HEAD", cfg.sandbox)
    assert doc["provenance"]["test"] == {"file": ".github/workflows/ci.yml", "line": 7}


def test_failing_and_flaky_suites_are_not_verified(tmp_path):
    failing = write_tree(tmp_path / "failing", {"calc.py": LIB, "tests/test_calc.py": (
        "import unittest\nfrom calc import add\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")})
    env = verify.verify_environment(failing, _cfg(tmp_path))
    assert (env.verified, env.reason) == (False, verify.NO_PASSING_TESTS)
    flaky = write_tree(tmp_path / "flaky", {"tests/test_f.py": FLIP})
    env = verify.verify_environment(flaky, _cfg(tmp_path))
    assert (env.verified, env.reason) == (False, verify.FLAKY)


def test_flaky_tests_are_listed_beside_stable_ones(tmp_path):
    repo = write_tree(tmp_path / "repo", {"calc.py": FIXED, "tests/test_calc.py": UNITTESTS,
                                          "tests/test_f.py": FLIP})
    env = verify.verify_environment(repo, _cfg(tmp_path))
    assert env.verified
    assert env.tests == dict.fromkeys(CALC_IDS, "passed")
    assert env.flaky == ["test_f.F.test_flip"]


def test_task_validation_fail_to_pass(tmp_path):
    repo = tmp_path / "repo"
    base = git_repo(repo, {"calc.py": LIB, "tests/test_calc.py": UNITTESTS})
    cfg = _cfg(tmp_path)
    env = verify.verify_revision(repo, base, cfg)
    assert env.verified
    task = verify.validate_task(repo, base, PATCH, TEST_PATCH, env, cfg)
    assert task.valid, [(s.command, s.output_tail[-400:]) for s in task.steps]
    assert task.fail_to_pass == ["test_calc.TestCalc.test_add"]
    assert task.pass_to_pass == CALC_IDS
    # The repository itself is untouched: validation works in a fresh exported tree.
    assert (repo / "calc.py").read_text() == LIB
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout
    assert status == ""


def test_task_drop_reasons(tmp_path):
    repo = tmp_path / "repo"
    base = git_repo(repo, {"calc.py": LIB, "tests/test_calc.py": UNITTESTS})
    cfg = _cfg(tmp_path, runs=1)
    env = verify.verify_revision(repo, base, cfg)
    bad_patch = PATCH.replace("return a - b", "return a * b")
    assert verify.validate_task(repo, base, bad_patch, TEST_PATCH, env, cfg).reason == \
        verify.PATCH_DOES_NOT_APPLY
    assert verify.validate_task(repo, base, PATCH, bad_patch, env, cfg).reason == \
        verify.PATCH_DOES_NOT_APPLY
    no_new_test = verify.validate_task(repo, base, PATCH, "", env, cfg)
    assert no_new_test.reason == verify.NO_FAIL_TO_PASS
    unverified = verify.Verification(False, verify.INSTALL_FAILED)
    assert verify.validate_task(repo, base, PATCH, TEST_PATCH, unverified, cfg).reason == \
        verify.NO_ENVIRONMENT


def test_instances_validated_newest_first_within_the_cap(tmp_path):
    repo = tmp_path / "repo"
    base = git_repo(repo, {"calc.py": LIB, "tests/test_calc.py": UNITTESTS})
    cfg = _cfg(tmp_path, runs=1)
    env = verify.verify_revision(repo, base, cfg)
    rows = [{"instance_id": f"x__calc-{i}", "repo": "x/calc", "base_commit": base,
             "patch": PATCH, "test_patch": TEST_PATCH, "created_at": f"2024-01-0{i}"}
            for i in (1, 2)]
    kept, dropped = verify.validate_instances(repo, rows, env, cfg, max_per_repo=1)
    assert [r["instance_id"] for r in kept] == ["x__calc-2"]
    assert json.loads(kept[0]["FAIL_TO_PASS"]) == ["test_calc.TestCalc.test_add"]
    assert json.loads(kept[0]["PASS_TO_PASS"]) == CALC_IDS
    assert dropped == [("x__calc-1", verify.OVER_MAX_PER_REPO)]


def test_spec_matches_the_shipped_schema(tmp_path):
    repo = write_tree(tmp_path / "repo", {"calc.py": FIXED, "tests/test_calc.py": UNITTESTS})
    cfg = _cfg(tmp_path)
    env = verify.verify_environment(repo, cfg)
    doc = env_spec.environment_spec(env, "example/calc", "abc123", cfg.sandbox)
    jsonschema.Draft202012Validator.check_schema(env_spec.schema())
    jsonschema.validate(doc, env_spec.schema())
    path = env_spec.write_spec(doc, tmp_path / "envs")
    assert path.name == f"example__calc@{env.dependency_hash[:12]}.json"
    assert json.loads(path.read_text()) == doc
    assert doc["test"]["selector_template"] == "python -m unittest -v {tests}"
    broken = {**doc, "tests": {**doc["tests"], "passed": 0}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, env_spec.schema())
    docker = env_spec.render_dockerfile(doc).splitlines()
    assert docker[1] == "FROM python:3.11-slim"  # the toolchain the spec was verified with
    assert [ln for ln in docker if ln.startswith(("RUN", "CMD"))] == [
        *(f"RUN {step['command']}" for step in doc["steps"]),
        f'CMD ["/bin/sh", "-c", "{env.test}"]']
    assert [step["command"] for step in doc["steps"]] == list(env.install)  # nothing to ready
    assert doc["tests"]["fresh_tree"] == {"passed": 5, "failed": 0, "skipped": 0}
    with pytest.raises(ValueError, match="not verified"):
        env_spec.environment_spec(verify.Verification(False, "flaky"), "x", "y", cfg.sandbox)


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_node_test_repo(tmp_path):
    repo = write_tree(tmp_path / "repo", {
        "package.json": '{"name": "tiny", "version": "1.0.0",\n'
                        ' "scripts": {"test": "node --test"}}\n',
        "test/add.test.js": ("const test = require('node:test');\n"
                             "const assert = require('node:assert');\n"
                             "test('adds', () => assert.strictEqual(1 + 1, 2));\n"
                             "for (const n of [1, 2, 3]) test(`keeps ${n}`, () => {});\n"
                             "test('suite', async (t) => { await t.test('inner', () => {}); });\n"),
    })
    env = verify.verify_environment(repo, _cfg(tmp_path))
    assert env.verified, [(s.command, s.violation, s.output_tail[-300:]) for s in env.steps]
    assert (env.toolchain, env.parser) == ("node", "tap")
    assert env.tests == dict.fromkeys(
        ["adds", "keeps 1", "keeps 2", "keeps 3", "suite > inner"], "passed")


def test_pytest_repo_with_a_real_dependency(tmp_path):
    """pytest itself comes from the configured package index in the install phase."""
    repo = write_tree(tmp_path / "repo", {
        "pyproject.toml": (
            '[build-system]\nrequires = ["setuptools>=61"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            '[project]\nname = "calc"\nversion = "0.1"\n\n'
            '[project.optional-dependencies]\ntest = ["pytest"]\n'),
        "calc.py": FIXED,
        "tests/test_calc.py": ("import pytest\nfrom calc import add\n"
                               "@pytest.mark.parametrize('n', range(5))\n"
                               "def test_add(n):\n    assert add(n, 3) == n + 3\n"
                               "@pytest.mark.skip\ndef test_later():\n    pass\n")})
    cfg = _cfg(tmp_path, max_installs=1)
    env = verify.verify_environment(repo, cfg)
    installs = [s for s in env.steps if s.phase == "install"]
    if not env.verified and env.reason == verify.INSTALL_FAILED:
        pytest.skip(f"no package index reachable: {installs[-1].output_tail[-300:]}")
    assert env.verified, [(s.command, s.violation, s.output_tail[-300:]) for s in env.steps]
    assert env.parser == "junit"
    assert env.tests == {**{f"tests.test_calc::test_add[{n}]": "passed" for n in range(5)},
                         "tests.test_calc::test_later": "skipped"}
    assert env.ready == ("python -m pip install --no-deps --no-build-isolation -e '.[test]'",)
    assert env.proof["packages"]["calc"]["where"] == "work tree"
    assert verify.environment_dir(cfg, env) is not None
    again = verify.verify_environment(repo, cfg)
    assert again.cached and not [s for s in again.steps if s.phase == "install"]


@pytest.mark.skipif(bool(shutil.which("uv") or shutil.which("uvx")), reason="uv is installed")
def test_commands_the_sandbox_lacks_do_not_use_up_the_budget(tmp_path):
    """A CI line for a program the sandbox does not have (exit 127) is not one of the
    install or test candidates tried: with a budget of one each, the next ones still run."""
    workflow = ("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
                "      - run: uv pip install -e .\n"
                "      - run: uvx pytest tests\n")
    repo = write_tree(tmp_path / "repo", {".github/workflows/ci.yml": workflow, "calc.py": FIXED,
                                          "tests/__init__.py": "", "tests/test_calc.py": UNITTESTS})
    env = verify.verify_environment(repo, _cfg(tmp_path, max_installs=1, max_tests=1))
    assert env.verified, [(s.command, s.exit_code, s.output_tail[-200:]) for s in env.steps]
    assert [s.exit_code for s in env.steps if s.command.startswith(("uv ", "uvx "))] == [127, 127]
    assert env.test == disc.UNITTEST
    assert env.tests == {f"tests.{t}": "passed" for t in CALC_IDS}


def test_spec_identity_leaves_out_the_measurements(tmp_path):
    """The RL manifest records each spec's identity hash: the same environment measured
    again (other durations) verifies, a changed install command does not."""
    from codecorpus.manifests import rl

    repo = write_tree(tmp_path / "repo", {"calc.py": FIXED, "tests/test_calc.py": UNITTESTS})
    cfg = _cfg(tmp_path)
    env = verify.verify_environment(repo, cfg)
    doc = env_spec.environment_spec(env, "example/calc", "abc123", cfg.sandbox)
    assert set(env_spec.MEASURED) <= set(doc)
    run = tmp_path / "run"
    path = env_spec.write_spec(doc, run / "envs")
    task = {"instance_id": "example__calc-1", "repo": "example/calc",
            "environment": f"envs/{path.name}", "FAIL_TO_PASS": '["t"]'}
    (run / "verified").mkdir()
    (run / "verified" / "tasks.jsonl").write_text(json.dumps(task, sort_keys=True) + "\n")
    manifest = rl.build_manifest(run, "envs", "verified/tasks.jsonl")
    assert manifest["environments"][0]["spec_sha256"] == env_spec.identity_hash(doc)
    rl.write_manifest(run, manifest)
    again = verify.verify_environment(repo, cfg)  # cached: other durations, same identity
    remeasured = env_spec.environment_spec(again, "example/calc", "abc123", cfg.sandbox)
    assert remeasured["durations"] != doc["durations"]
    env_spec.write_spec(remeasured, run / "envs")
    assert rl.verify(run / "manifest.json") == []
    assert rl.build_manifest(run, "envs", "verified/tasks.jsonl") == manifest
    env_spec.write_spec({**doc, "install": [*doc["install"], "python -m pip install six"]},
                    run / "envs")
    assert [p.split(":")[1].strip() for p in rl.verify(run / "manifest.json")] == ["spec_sha256"]


def test_dockerfile_and_spec_name_the_same_steps():
    """One step list: the system packages an image needs, the install, the ready steps; the
    Dockerfile's RUN lines are exactly those, in order."""
    env = verify.Verification(
        True, None, toolchain="python", toolchain_version="CPython 3.11.7",
        install=('python -m venv "$ENV_DIR/venv"', "python -m pip install -e '.[test]'"),
        test="python -m pytest -rA", parser="junit", cache_key="0" * 32, dependency_hash="1" * 64,
        tests={f"t.py::test_{i}": "passed" for i in range(5)},
        fresh_tests={f"t.py::test_{i}": "passed" for i in range(5)},
        ready=("python -m pip install --no-deps --no-build-isolation -e '.[test]'",), system_packages=("git",),
        proof={"method": "import resolution in the fresh tree", "own": True,
               "packages": {"pkg": {"origin": "/workspace/src/pkg/__init__.py", "where": "work tree"}}})
    doc = env_spec.environment_spec(env, "x/pkg", "abc", sb.SandboxConfig())
    jsonschema.validate(doc, env_spec.schema())
    assert [s["phase"] for s in doc["steps"]] == ["system", "install", "install", "ready"]
    runs = [ln.removeprefix("RUN ") for ln in env_spec.render_dockerfile(doc).splitlines()
            if ln.startswith("RUN ")]
    assert runs == [s["command"] for s in doc["steps"]]
    assert "git" in runs[0] and runs[-1] == env.ready[0]
    unproven = {**doc, "proof": {**doc["proof"], "own": False}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(unproven, env_spec.schema())
    on_exit_code = {**doc, "test": {**doc["test"], "parser": "exit-code"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(on_exit_code, env_spec.schema())


def test_report_paths_through_a_symlink_are_neither_read_nor_removed(tmp_path):
    """A repository (or a policy's patch) may plant links where its reports go: the host side
    reads and clears only files really inside the tree or the results folder."""
    from codecorpus.envs.verify import _clear_reports, _read_reports

    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.xml").write_text("<testsuite/>")
    work = tmp_path / "work"
    (work / "real").mkdir(parents=True)
    (work / "real" / "r.xml").write_text("<testsuite name='own'/>")
    (work / "out").symlink_to(host, target_is_directory=True)
    (work / "link.xml").symlink_to(host / "secret.xml")
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    (results_dir / "leak.xml").symlink_to(host / "secret.xml")
    (results_dir / "own.xml").write_text("<testsuite name='results'/>")

    read = _read_reports(work, "**/*.xml", results_dir)
    assert sorted(read) == [b"<testsuite name='own'/>", b"<testsuite name='results'/>"]
    _clear_reports(work, "**/*.xml")
    assert (host / "secret.xml").exists()
    assert not (work / "real" / "r.xml").exists()

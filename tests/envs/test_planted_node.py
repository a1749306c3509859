"""Planted npm packages: a lockfile that pins a version the registry does not serve (retried
without the lock, and recorded), an ava suite, and a mocha suite behind nyc. Their
dependencies come from the npm registry in the install phase, as for any repository.

Two kinds of checks:

- the verification side (this branch): the runner's file reporter writing into
  ``$CODECORPUS_RESULTS`` (mocha's xunit file behind nyc) or its TAP output (``ava --tap``)
  gives per-test results; ava and nyc write their caches under ``node_modules/.cache``, which
  the sandbox makes writable while the environment stays read-only; the lock retry;
- discovery's own candidates (``npm test`` as the package states it): DEPENDS ON i37b (the
  discovery and results parsers that find ava and mocha behind npm scripts and wrappers).
  Whatever they find, the rules hold: verified only on per-test results with at least 5
  passing and reproduced in a fresh tree; otherwise the drop names the runner.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from envs_helpers import needs_bwrap, write_tree

from codecorpus.envs import discover as disc
from codecorpus.envs import env_spec, verify
from codecorpus.envs import sandbox as sb

pytestmark = [needs_bwrap, pytest.mark.skipif(not shutil.which("npm"), reason="npm is not installed")]


def _cfg(tmp_path: Path) -> verify.VerifyConfig:
    limits = sb.Limits(wall_seconds=120, processes=256, memory_bytes=4 << 30)
    return verify.VerifyConfig(cache_dir=str(tmp_path / "cache"), runs=1,
                               sandbox=sb.SandboxConfig(limits=limits),
                               install_limits=limits.model_copy(update={"wall_seconds": 400}))


def _found(install: str, test: str, parser: str, reports: str = "") -> disc.Discovery:
    return disc.Discovery(("node",), (disc.Candidate((install,), "node", "package.json", 1, disc.MANIFEST),),
                          (disc.Candidate((test,), "node", "package.json", 1, disc.MANIFEST, parser, reports),),
                          (), "0" * 64)


def _skip_offline(env: verify.Verification) -> None:
    if env.reason == verify.INSTALL_FAILED and any(
            w in env.steps[-1].output_tail for w in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT")):
        pytest.skip("the npm registry is not reachable: " + env.steps[-1].output_tail[-300:])


def _holds_the_rules(env: verify.Verification, runner: str) -> None:
    """What every verification must satisfy, whichever candidates discovery found."""
    if env.verified:
        assert env.parser != "exit-code" and verify.counts(env.tests)["passed"] >= 5
        assert verify.counts(env.fresh_tests) == verify.counts(env.tests) and env.proof["own"]
    else:
        assert env.reason in (verify.NO_PER_TEST_RESULTS, verify.TEST_RUNNER_MISSING,
                              verify.NO_TESTS_FOUND), (env.reason, env.detail)
        assert runner in env.detail or env.reason == verify.NO_TESTS_FOUND, env.detail


NODE_TESTS = ("const test = require('node:test');\nconst assert = require('node:assert');\n"
              "const isNumber = require('is-number');\n"
              "for (const n of [0, 1, 2, 3, 4]) test(`number ${n}`, () => assert.ok(isNumber(n)));\n"
              "test('not a number', () => assert.ok(!isNumber('x')));\n")


def test_a_lockfile_pinning_a_missing_version_is_retried_without_the_lock(tmp_path):
    lock = {"name": "locked", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "locked", "version": "1.0.0", "dependencies": {"is-number": "^7.0.0"}},
                         "node_modules/is-number": {
                             "version": "7.0.99",
                             "resolved": "https://registry.npmjs.org/is-number/-/is-number-7.0.99.tgz",
                             "integrity": "sha512-" + "A" * 86 + "==", "license": "MIT"}}}
    repo = write_tree(tmp_path / "repo", {
        "package.json": json.dumps({"name": "locked", "version": "1.0.0", "scripts": {"test": "node --test"},
                                    "dependencies": {"is-number": "^7.0.0"}}),
        "package-lock.json": json.dumps(lock, indent=2), "test/num.test.js": NODE_TESTS})
    cfg = _cfg(tmp_path)
    env = verify.verify_environment(repo, cfg, _found("npm ci", "node --test --test-reporter=tap", "tap"))
    _skip_offline(env)
    assert env.verified, (env.reason, env.detail, [(s.command, s.output_tail[-400:]) for s in env.steps])
    assert env.install == ("npm install --no-package-lock",)
    assert len(env.install_notes) == 1 and env.install_notes[0].startswith("npm ci: a locked version is gone")
    assert [s.command for s in env.steps if s.phase == "install"] == ["npm ci", "npm install --no-package-lock"]
    assert verify.counts(env.tests)["passed"] == 6
    doc = env_spec.environment_spec(env, "x/locked", "HEAD", cfg.sandbox)
    assert doc["install"] == ["npm install --no-package-lock"] and doc["install_notes"] == list(env.install_notes)
    assert "RUN npm install --no-package-lock" in env_spec.render_dockerfile(doc)


AVA_TESTS = ("const test = require('ava');\n"
             "for (const n of [1, 2, 3, 4, 5]) test(`doubles ${n}`, t => t.is(n * 2, n + n));\n")


def test_an_ava_suite(tmp_path):
    """``xo && ava`` as the package states it; ava's TAP reporter read per test, its cache
    (``node_modules/.cache/ava``) written in the read-only environment's private tmpfs."""
    repo = write_tree(tmp_path / "repo", {
        "package.json": json.dumps({"name": "avapkg", "version": "1.0.0", "scripts": {"test": "ava"},
                                    "devDependencies": {"ava": "^6.4.0"}}),
        "test.js": AVA_TESTS})
    cfg = _cfg(tmp_path)
    env = verify.verify_environment(repo, cfg, _found("npm install", "npx ava --tap", "tap"))
    _skip_offline(env)
    assert env.verified, (env.reason, env.detail, [(s.command, s.output_tail[-400:]) for s in env.steps])
    assert env.runner == "ava" and env.parser == "tap"
    assert verify.counts(env.tests) == verify.counts(env.fresh_tests) == {"passed": 5, "failed": 0, "skipped": 0}
    # DEPENDS ON i37b: discovery's own candidates (`npm test` -> ava) under the same rules.
    found = disc.discover(repo)
    again = verify.verify_environment(repo, cfg, found)
    _holds_the_rules(again, "ava")


MOCHA_TESTS = ("const assert = require('assert');\ndescribe('sum', () => {\n"
               "  for (const n of [1, 2, 3, 4, 5]) it(`adds ${n}`, () => assert.strictEqual(n + 0, n));\n"
               "});\n")


def test_a_mocha_suite_behind_nyc(tmp_path):
    """``nyc mocha``: mocha's xunit file reporter writes into ``$CODECORPUS_RESULTS`` (outside
    the work tree), the JUnit parser reads it; nyc writes ``.nyc_output`` in the tree and its
    cache under ``node_modules/.cache``."""
    repo = write_tree(tmp_path / "repo", {
        "package.json": json.dumps({"name": "mochapkg", "version": "1.0.0", "scripts": {"test": "nyc mocha"},
                                    "devDependencies": {"mocha": "^10.8.0", "nyc": "^17.1.0"}}),
        "test/sum.test.js": MOCHA_TESTS})
    cfg = _cfg(tmp_path)
    test = ('npx nyc --silent mocha --reporter xunit '
            '--reporter-option output="$CODECORPUS_RESULTS/mocha.xml"')
    env = verify.verify_environment(repo, cfg, _found("npm install", test, "junit"))
    _skip_offline(env)
    assert env.verified, (env.reason, env.detail, [(s.command, s.output_tail[-400:]) for s in env.steps])
    assert env.runner == "mocha" and env.parser == "junit"
    assert verify.counts(env.tests) == verify.counts(env.fresh_tests) == {"passed": 5, "failed": 0, "skipped": 0}
    assert not list(repo.rglob("mocha.xml"))  # the report was written outside the work tree
    # DEPENDS ON i37b: discovery's own candidates (`npm test` -> nyc mocha) under the same rules.
    again = verify.verify_environment(repo, cfg, disc.discover(repo))
    _holds_the_rules(again, "mocha")

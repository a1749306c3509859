"""Planted repositories that only the host could make pass: none of them is verified.

- The issue's Jinja case: the checkout's own ``jinja2`` is broken (``raise ImportError``),
  the install is a release job's build requirements, and the tests pass only with the host's
  ``pytest`` and the host's installed Jinja2. In the sandbox both are gone.
- The runner is installed but the tests import a package only the host has (``yaml``).
- A package of the same name installed into the environment from elsewhere (not the work
  tree): the tests pass, and the proof of the repository's own code refuses them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from envs_helpers import needs_bwrap, write_tree

from codecorpus.envs import discover as disc
from codecorpus.envs import sandbox as sb
from codecorpus.envs import toolchains, verify

pytestmark = needs_bwrap
VENV_NO_PIP = 'python -m venv "$ENV_DIR/venv" --without-pip'
VENV = 'python -m venv "$ENV_DIR/venv"'


def _cfg(tmp_path: Path, **kw) -> verify.VerifyConfig:
    limits = sb.Limits(wall_seconds=120, processes=128, memory_bytes=1 << 30)
    return verify.VerifyConfig(cache_dir=str(tmp_path / "cache"), runs=1,
                               sandbox=sb.SandboxConfig(limits=limits),
                               install_limits=limits.model_copy(update={"wall_seconds": 300}), **kw)


def _found(install: tuple[str, ...], test: str, parser: str) -> disc.Discovery:
    return disc.Discovery(("python",), (disc.Candidate(install, "python", "ci.yml", 1, disc.CI),),
                          (disc.Candidate((test,), "python", "ci.yml", 2, disc.CI, parser),),
                          (), "0" * 64)


def _host_has(module: str) -> bool:
    """Whether the toolchain interpreter outside the sandbox can import ``module``."""
    base = Path(sys.base_prefix).resolve()
    site = next(base.glob("lib/python3*/site-packages"), None)
    return bool(site and (site / module).exists()) or importlib.util.find_spec(module) is not None


def test_host_pytest_and_host_jinja2_are_not_in_the_sandbox(tmp_path):
    assert _host_has("jinja2") and _host_has("pytest")  # what the host would have lent
    tests = "".join(f"def test_render_{i}():\n    import jinja2\n"
                    f"    assert jinja2.Template('{{{{ x }}}}').render(x={i}) == '{i}'\n"
                    for i in range(6))
    repo = write_tree(tmp_path / "repo", {
        "src/jinja2/__init__.py": "raise ImportError('the checkout is broken on purpose')\n",
        "requirements/build.txt": "# build tools only: nothing the tests need\n",
        "tests/test_render.py": tests})
    found = _found((VENV_NO_PIP,), "pytest -rA tests", "pytest")
    env = verify.verify_environment(repo, _cfg(tmp_path), found)
    assert not env.verified
    assert env.reason == verify.TEST_RUNNER_MISSING, (env.reason, env.detail)
    assert "pytest" in env.detail
    assert [s.exit_code for s in env.steps if s.phase == "test"] == [verify.NOT_FOUND]


def test_tests_that_import_a_host_only_package_fail(tmp_path):
    """The test runner is the environment's own (unittest ships with the interpreter), the
    imported package exists only on the host: every test errors."""
    assert _host_has("yaml")
    tests = ("import unittest\nimport yaml\n\nclass T(unittest.TestCase):\n"
             + "".join(f"    def test_load_{i}(self):\n"
                       f"        self.assertEqual(yaml.safe_load('a: {i}'), {{'a': {i}}})\n"
                       for i in range(6)))
    repo = write_tree(tmp_path / "repo", {"tests/test_load.py": tests})
    found = _found((VENV_NO_PIP,), "python -m unittest discover -v -s tests", "unittest")
    env = verify.verify_environment(repo, _cfg(tmp_path), found)
    assert not env.verified
    assert env.reason in (verify.NO_PASSING_TESTS, verify.NO_PER_TEST_RESULTS), env.detail
    tails = "".join(s.output_tail for s in env.steps if s.phase == "test")
    assert "No module named 'yaml'" in tails


def test_sandbox_shows_only_the_interpreter(tmp_path):
    box = toolchains.with_toolchain(sb.SandboxConfig(), toolchains.toolchain("python", sb.ENV))
    res = sb.run("echo $PATH; command -v pytest pip3 || true; "
                 "python -c 'import sys; print(sys.executable)'; "
                 "python -c 'import jinja2' 2>&1 | tail -1; ls /usr/local/bin | wc -l",
                 tmp_path, box)
    lines = res.stdout.splitlines()
    assert lines[0] == "/toolchain/bin:/usr/bin:/bin"
    assert lines[-3] == "/toolchain/bin/python" or lines[-3].startswith(str(Path(sys.base_prefix)))
    assert not any(ln.endswith("/pytest") for ln in lines)
    assert "No module named 'jinja2'" in lines[-2]


def test_a_same_named_package_installed_from_elsewhere_is_not_own_code(tmp_path):
    """``vendor/mypkg`` (another distribution of the name) is installed, non-editable; the
    tests pass against it, and the proof finds ``mypkg`` resolving to a copy that is not
    the work tree's ``src/mypkg``."""
    setup = "from setuptools import setup\nsetup(name='mypkg', version='0.1', packages=['mypkg'])\n"
    tests = ("import unittest\nimport mypkg\n\nclass T(unittest.TestCase):\n"
             + "".join(f"    def test_{i}(self):\n        self.assertEqual(mypkg.VALUE, 'vendor')\n"
                       for i in range(5)))
    repo = write_tree(tmp_path / "repo", {
        "src/mypkg/__init__.py": "VALUE = 'work tree'\n",
        "vendor/mypkg/setup.py": setup, "vendor/mypkg/mypkg/__init__.py": "VALUE = 'vendor'\n",
        "tests/test_value.py": tests})
    install = (VENV, "python -m pip install ./vendor/mypkg")  # setuptools from the index
    found = _found(install, "python -m unittest discover -v -s tests", "unittest")
    env = verify.verify_environment(repo, _cfg(tmp_path), found)
    if env.reason == verify.INSTALL_FAILED:
        pytest.skip("no package index reachable: " + env.steps[-1].output_tail[-300:])
    assert not env.verified
    assert env.reason == verify.NOT_OWN_CODE, (env.reason, env.detail)
    assert env.proof["packages"]["mypkg"]["where"] == "elsewhere"
    assert "/site-packages/mypkg/__init__.py" in env.proof["packages"]["mypkg"]["origin"]
    assert len(env.tests) == 5  # the tests did pass: only the proof refused them


def test_the_environments_install_of_the_work_tree_is_own_code(tmp_path):
    """The contrast: the work tree itself installed non-editable. The tests import the
    environment's copy, whose bytes are the tree's: verified, and the fresh tree is readied
    by re-installing itself (without dependencies)."""
    pyproject = ('[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
                 '[project]\nname = "mypkg"\nversion = "0.1"\n')
    tests = ("import unittest\nimport mypkg\n\nclass T(unittest.TestCase):\n"
             + "".join(f"    def test_{i}(self):\n        self.assertEqual(mypkg.VALUE, 'work tree')\n"
                       for i in range(5)))
    repo = write_tree(tmp_path / "repo", {"pyproject.toml": pyproject,
                                          "src/mypkg/__init__.py": "VALUE = 'work tree'\n",
                                          "tests/test_value.py": tests})
    found = _found((VENV, "python -m pip install ."), "python -m unittest discover -v -s tests", "unittest")
    env = verify.verify_environment(repo, _cfg(tmp_path), found)
    if env.reason == verify.INSTALL_FAILED:
        pytest.skip("no package index reachable: " + env.steps[-1].output_tail[-300:])
    assert env.verified, (env.reason, env.detail)
    assert env.ready == ("python -m pip install --no-deps --no-build-isolation .",)
    where = env.proof["packages"]["mypkg"]
    assert where["where"] == "environment install of the work tree", where
    assert "/site-packages/mypkg/__init__.py" in where["origin"]

"""Planted packages whose fresh checkout needs readying: a hatch-vcs package whose version
file is generated from git at build time, and a package with a C extension. Both are
verified only because the spec's ready step (the tree's re-install without dependencies)
runs in the fresh checkout; without it the same tests fail there. And a suite that needs a
writable ``/dev/shm`` (``multiprocessing`` locks and queues).

The build backends (hatchling, hatch-vcs, setuptools) come from the package index in the
install phase, as for any repository."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from envs_helpers import needs_bwrap, write_tree

from codecorpus.envs import discover as disc
from codecorpus.envs import env_spec, verify
from codecorpus.envs import sandbox as sb

pytestmark = needs_bwrap
VENV = 'python -m venv "$ENV_DIR/venv"'
UNITTEST = "python -m unittest discover -v -s tests"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}


def _cfg(tmp_path: Path) -> verify.VerifyConfig:
    limits = sb.Limits(wall_seconds=120, processes=128, memory_bytes=2 << 30)
    return verify.VerifyConfig(cache_dir=str(tmp_path / "cache"), runs=1,
                               sandbox=sb.SandboxConfig(limits=limits),
                               install_limits=limits.model_copy(update={"wall_seconds": 400}))


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env={**GIT_ENV, "HOME": str(repo)}, check=True,
                          capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str], tag: str = "") -> str:
    write_tree(repo, files)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    if tag:
        _git(repo, "tag", tag)
    return _git(repo, "rev-parse", "HEAD")


def _found(install: tuple[str, ...]) -> disc.Discovery:
    return disc.Discovery(("python",), (disc.Candidate(install, "python", "pyproject.toml", 1, disc.MANIFEST),),
                          (disc.Candidate((UNITTEST,), "python", "", 0, disc.CONVENTION, "unittest"),),
                          (), "0" * 64)


def _verify(repo: Path, commit: str, cfg: verify.VerifyConfig, install: tuple[str, ...]) -> verify.Verification:
    with tempfile.TemporaryDirectory(prefix="env-") as tmp:
        tree = Path(tmp) / "tree"
        verify.fresh_tree(repo, commit, tree)
        env = verify.verify_environment(tree, cfg, _found(install),
                                        fresh=lambda dest: verify.fresh_tree(repo, commit, dest))
    if env.reason == verify.INSTALL_FAILED:
        pytest.skip("no package index reachable: " + env.steps[-1].output_tail[-300:])
    return env


def _unready_run(repo: Path, commit: str, env: verify.Verification, cfg: verify.VerifyConfig):
    """The same tests in a fresh checkout with the installed environment but no ready step."""
    with tempfile.TemporaryDirectory(prefix="unready-") as tmp:
        tree = Path(tmp) / "tree"
        verify.fresh_tree(repo, commit, tree)
        report, _, _ = verify.run_tests(tree, env.test, env.parser, env.reports, env.toolchain, cfg,
                                        verify.environment_dir(cfg, env), [])
    return report


HATCH_PYPROJECT = """[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"

[project]
name = "vpkg"
dynamic = ["version"]

[tool.hatch.version]
source = "vcs"

[tool.hatch.build.hooks.vcs]
version-file = "src/vpkg/_version.py"
"""


def test_hatch_vcs_version_file_is_generated_in_the_fresh_tree(tmp_path):
    repo = tmp_path / "repo"
    tests = ("import unittest\nimport vpkg\n\nclass T(unittest.TestCase):\n"
             "    def test_version(self):\n        self.assertEqual(vpkg.__version__, '1.2.3')\n"
             + "".join(f"    def test_twice_{i}(self):\n        self.assertEqual(vpkg.twice({i}), {2 * i})\n"
                       for i in range(5)))
    commit = _commit(repo, {
        "pyproject.toml": HATCH_PYPROJECT, ".gitignore": "src/vpkg/_version.py\n",
        "src/vpkg/__init__.py": "from ._version import __version__\n\n\ndef twice(x):\n    return 2 * x\n",
        "tests/test_vpkg.py": tests}, tag="v1.2.3")
    cfg = _cfg(tmp_path)
    env = _verify(repo, commit, cfg, (VENV, "python -m pip install -e ."))
    assert env.verified, (env.reason, env.detail, [(s.command, s.output_tail[-300:]) for s in env.steps])
    assert env.ready == ("python -m pip install --no-deps --no-build-isolation -e .",)
    assert [s.phase for s in env.steps].count("ready") == 1
    assert verify.counts(env.fresh_tests) == verify.counts(env.tests) == {"passed": 6, "failed": 0, "skipped": 0}
    assert env.proof["packages"]["vpkg"]["where"] == "work tree"
    assert "git" in env.system_packages
    doc = env_spec.environment_spec(env, "x/vpkg", commit, cfg.sandbox)
    docker = env_spec.render_dockerfile(doc)
    assert "apt-get install -y --no-install-recommends git" in docker
    assert "RUN python -m pip install --no-deps --no-build-isolation -e .\n" in docker
    # Without the ready step the fresh checkout has no _version.py: every test errors.
    unready = _unready_run(repo, commit, env, cfg)
    assert unready is not None and unready.passed == []


def test_c_extension_is_rebuilt_in_the_fresh_tree(tmp_path):
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    repo = tmp_path / "repo"
    c_source = ("#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n"
                "static PyObject *add(PyObject *self, PyObject *args) {\n"
                "    long a, b;\n    if (!PyArg_ParseTuple(args, \"ll\", &a, &b)) return NULL;\n"
                "    return PyLong_FromLong(a + b);\n}\n"
                "static PyMethodDef methods[] = {{\"add\", add, METH_VARARGS, \"\"}, {NULL, NULL, 0, NULL}};\n"
                "static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, \"_speed\", NULL, -1, methods};\n"
                "PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&mod); }\n")
    tests = ("import unittest\nfrom cpkg import _speed\n\nclass T(unittest.TestCase):\n"
             + "".join(f"    def test_add_{i}(self):\n        self.assertEqual(_speed.add({i}, 1), {i + 1})\n"
                       for i in range(5)))
    commit = _commit(repo, {
        "pyproject.toml": ('[build-system]\nrequires = ["setuptools>=64"]\n'
                           'build-backend = "setuptools.build_meta"\n'),
        "setup.py": ("from setuptools import Extension, setup\n"
                     "setup(name='cpkg', version='0.1', packages=['cpkg'],\n"
                     "      ext_modules=[Extension('cpkg._speed', ['cpkg/_speed.c'])])\n"),
        "cpkg/__init__.py": "", "cpkg/_speed.c": c_source, "tests/test_speed.py": tests})
    cfg = _cfg(tmp_path)
    env = _verify(repo, commit, cfg, (VENV, "python -m pip install -e ."))
    assert env.verified, (env.reason, env.detail, [(s.command, s.output_tail[-300:]) for s in env.steps])
    assert env.ready == ("python -m pip install --no-deps --no-build-isolation -e .",)
    assert verify.counts(env.fresh_tests) == {"passed": 5, "failed": 0, "skipped": 0}
    assert "build-essential" in env.system_packages
    assert env.proof["packages"]["cpkg"]["where"] == "work tree"
    # Without the ready step the fresh checkout has no compiled _speed: every test errors.
    unready = _unready_run(repo, commit, env, cfg)
    assert unready is not None and unready.passed == []
    # A task that fixes the C code: only a rebuild after the patch (the ready step runs
    # before each state) makes its new test pass.
    fixed = c_source.replace("static PyMethodDef", "static PyObject *mul(PyObject *self, PyObject *args) {\n"
                             "    long a, b;\n    if (!PyArg_ParseTuple(args, \"ll\", &a, &b)) return NULL;\n"
                             "    return PyLong_FromLong(a * b);\n}\nstatic PyMethodDef")
    fixed = fixed.replace('{"add", add, METH_VARARGS, ""}, ', '{"add", add, METH_VARARGS, ""}, {"mul", mul, METH_VARARGS, ""}, ')
    write_tree(repo, {"cpkg/_speed.c": fixed, "tests/test_speed.py": tests + (
        "    def test_mul(self):\n        self.assertEqual(_speed.mul(2, 3), 6)\n")})
    patch = _git(repo, "diff", "--", "cpkg/_speed.c") + "\n"
    test_patch = _git(repo, "diff", "--", "tests/test_speed.py") + "\n"
    _git(repo, "checkout", "-q", ".")
    task = verify.validate_task(repo, commit, patch, test_patch, env, cfg)
    assert task.valid, (task.reason, [(s.command, s.output_tail[-300:]) for s in task.steps])
    assert task.fail_to_pass == ["test_speed.T.test_mul"] and len(task.pass_to_pass) == 5
    assert [s.phase for s in task.steps].count("ready") == 2


def test_a_suite_that_needs_dev_shm(tmp_path):
    """multiprocessing's Lock and Queue are POSIX semaphores in /dev/shm: the sandbox gives
    each run a private, writable one."""
    tests = ("import multiprocessing as mp\nimport unittest\n\n\ndef put(q, x):\n    q.put(x * 2)\n\n\n"
             "class T(unittest.TestCase):\n"
             + "".join(f"    def test_lock_{i}(self):\n        lock = mp.Lock()\n"
                       "        with lock:\n            self.assertFalse(lock.acquire(False))\n"
                       for i in range(4))
             + "    def test_queue_across_processes(self):\n        q = mp.Queue()\n"
             "        p = mp.Process(target=put, args=(q, 21))\n        p.start()\n"
             "        self.assertEqual(q.get(timeout=20), 42)\n        p.join()\n")
    repo = write_tree(tmp_path / "repo", {"tests/test_shm.py": tests})
    env = verify.verify_environment(repo, _cfg(tmp_path), _found(('python -m venv "$ENV_DIR/venv" --without-pip',)))
    assert env.verified, (env.reason, env.detail, [s.output_tail[-400:] for s in env.steps if s.phase == "test"])
    assert verify.counts(env.tests) == {"passed": 5, "failed": 0, "skipped": 0}

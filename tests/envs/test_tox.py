"""tox configurations read as tox reads them: the test environment, factor conditions,
substitutions, deps/extras/dependency groups; and Python test dependencies from manifests."""

from __future__ import annotations

import platform

from envs_helpers import write_tree

from codecorpus.envs import discover as disc
from codecorpus.envs import runners, tox

PY = "py{}{}".format(*platform.python_version_tuple()[:2])

TOX_INI = """[tox]
env_list =
    lint,
    py3{9-14}-tests,
    docs-{build,doctests}

[testenv]
deps =
    -r requirements/tests.txt
    tests: pytest-xdist
    !tests: never-installed
    py39: only-on-39
    {[base]extra}
extras = test
dependency_groups =
    tests: test
set_env =
    PYTHONWARNINGS = d
commands_pre = python -c "print('pre')"
commands =
    tests: pytest --basetemp={envtmpdir} {posargs:-n 2 \\
        --durations=5} --junit-xml=.tox/{envname}.xml
    lint: ruff check
    tests: python -m mypy {unknown_key}
    coverage report

[base]
extra = hypothesis

[testenv:lint]
deps = ruff
commands = ruff check .
"""

PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "0.1"

[dependency-groups]
test = ["pytest>=8", {include-group = "cov"}, "tomli; python_version < '3.11'"]
cov = ["coverage"]
docs = ["sphinx"]
"""


def test_expansion_and_the_test_environment():
    assert tox.expand("py3{9-11}-tests, lint") == ["py39-tests", "py310-tests", "py311-tests",
                                                 "lint"]
    ini = tox._parse(TOX_INI)
    assert tox.chosen_env(ini) == f"{PY}-tests"  # the host Python's, never lint or docs
    assert tox.chosen_env(tox._parse("[tox]\nenvlist = lint, docs\n[testenv:lint]\n")) is None
    assert tox.chosen_env(tox._parse("[testenv]\ncommands = pytest\n")) == "py"


def test_settings_with_factor_conditions_and_substitutions(tmp_path):
    write_tree(tmp_path, {"tox.ini": TOX_INI, "pyproject.toml": PYPROJECT})
    env = tox.read(tmp_path)
    assert env.name == f"{PY}-tests" and env.file == "tox.ini"
    assert env.deps == ("-r", "requirements/tests.txt", "pytest-xdist", "hypothesis")
    assert (env.extras, env.groups, env.install_package) == (("test",), ("test",), True)
    (cmd, line), (coverage, _) = env.commands
    assert cmd == (f"mkdir -p {tox.ENV_TMP} && python -c \"print('pre')\" && PYTHONWARNINGS=d "
                   f"pytest --basetemp={tox.ENV_TMP} -n 2 --durations=5 "
                   f"--junit-xml=.tox/{PY}-tests.xml")
    assert TOX_INI.splitlines()[line - 1].strip().startswith("tests: pytest")
    assert coverage.endswith("coverage report")
    assert any("unknown_key" in note for note in env.notes)  # left out, not run with a literal


def test_discovery_from_tox_installs_its_dependencies(tmp_path):
    write_tree(tmp_path, {"tox.ini": TOX_INI, "pyproject.toml": PYPROJECT,
                          "tests/test_a.py": "def test_a():\n    pass\n"})
    found = disc.discover(tmp_path)
    inst = found.installs[0]
    assert (inst.source, inst.rank) == ("tox.ini", disc.CI)
    assert inst.commands == (
        disc.VENV,
        "python -m pip install -r requirements/tests.txt pytest-xdist hypothesis",
        "python -m pip install 'pytest>=8' coverage 'tomli; python_version < '\\''3.11'\\'''",
        "python -m pip install -e '.[test]'")  # the package last, as tox installs it
    test = found.tests[0]
    assert test.source == "tox.ini" and test.parser == "junit"
    assert f"-rA --junitxml={runners.RESULTS}/junit.xml" in test.commands[0]
    assert "--junit-xml" not in test.commands[0]  # the report is ours, where we read it
    assert not any("{" in c.commands[0].replace(runners.RESULTS, "") for c in found.tests)


def test_ci_lines_calling_tox_are_left_to_the_tox_reader(tmp_path):
    workflow = ("on: push\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n"
                "      - run: python -m pip install tox\n"
                "      - run: uvx --with=tox-uv tox run -e py311-tests\n"
                "      - run: python -m tox -e lint\n")
    write_tree(tmp_path, {".github/workflows/ci.yml": workflow,
                          "tox.ini": "[testenv]\ncommands = pytest {posargs}\n"})
    tests = disc.discover(tmp_path).tests
    assert [(c.source, c.commands[0]) for c in tests if c.rank == disc.CI] == [
        ("tox.ini", f"pytest -rA --junitxml={runners.RESULTS}/junit.xml")]


def test_manifest_install_gathers_the_test_dependencies(tmp_path):
    write_tree(tmp_path, {"pyproject.toml": PYPROJECT, "requirements.txt": "attrs\n",
                          "requirements-tests.txt": "freezegun\n", "requirements-docs.txt": "x\n",
                          "requirements-update.txt": "pinned==0\n",
                          "tests/test_a.py": "def test_a():\n    pass\n"})
    found = disc.discover(tmp_path)
    full, plain = [c.commands for c in found.installs if c.source == "pyproject.toml"]
    assert full == (disc.VENV,
                    "python -m pip install -r requirements.txt",
                    "python -m pip install -r requirements-tests.txt",
                    "python -m pip install 'pytest>=8' coverage "
                    "'tomli; python_version < '\\''3.11'\\'''",
                    "python -m pip install pytest", "python -m pip install -e .")
    assert plain == (disc.VENV, "python -m pip install pytest", "python -m pip install -e .")
    files, _ = disc.dependency_hash(tmp_path)
    assert "requirements-tests.txt" in files


def test_plain_pytest_functions_choose_pytest(tmp_path):
    write_tree(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='x')\n",
                          "tests/test_a.py": "def test_a():\n    assert 1\n"})
    tests = disc.discover(tmp_path).tests
    assert tests[0].commands == (disc.PYTEST,) and tests[0].parser == "junit"


UNRESOLVED_TOX_INI = """[testenv]
deps = pytest
commands =
    pytest --basetemp={envtmpdir} {posargs:tests}
    python -m pytest --log-file={envlogdir}/x.log {tty:--pdb:} tests
"""


def test_unresolved_substitutions_are_noted_in_the_discovery(tmp_path):
    write_tree(tmp_path, {"tox.ini": UNRESOLVED_TOX_INI,
                          "tests/test_a.py": "def test_a():\n    pass\n"})
    found = disc.discover(tmp_path)
    tox_tests = [c.commands[0] for c in found.tests if c.source == "tox.ini"]
    assert tox_tests == [f"mkdir -p {tox.ENV_TMP} && pytest -rA "
                         f"--junitxml={runners.RESULTS}/junit.xml --basetemp={tox.ENV_TMP} tests"]
    assert found.notes == ("tox.ini: left out (unresolved substitution): python -m pytest "
                           f"--log-file={tox.ENV_LOG}/x.log {{tty:--pdb:}} tests",)


def test_tox_notes_reach_the_env_discover_rows(tmp_path):
    from envs_helpers import git_repo

    from codecorpus import schema
    from codecorpus.envs import bodies as env_bodies
    from codecorpus.envs import repos
    from codecorpus.envs.config import EnvDiscoverConfig
    from codecorpus.pipeline import bodies

    git_repo(tmp_path / "repo", {"tox.ini": UNRESOLVED_TOX_INI,
                                 "tests/test_a.py": "def test_a():\n    pass\n"})
    run = schema.RunPaths(tmp_path / "run")
    ref = repos.RepoRef("src", "repo", str(tmp_path / "repo"), "git")
    ctx = bodies.JobContext(run, "env_discover", "h")
    env_bodies.discover_job(ctx, 0, ref, EnvDiscoverConfig())
    (row,) = bodies.read_parquet(run.part("env_discover", 0)).to_pylist()
    (note,) = env_bodies.discovery_of(row).notes
    assert note.startswith("tox.ini: left out (unresolved substitution)") and "{tty:--pdb:}" in note


def test_environment_paths_expand_in_set_env_and_quoted_strings(tmp_path):
    import subprocess
    import sys
    import sysconfig
    from pathlib import Path

    write_tree(tmp_path, {"tox.ini": """[testenv]
set_env =
    BIN = {envbindir}{:}/usr/bin
    SITE = {envsitepackagesdir}
    QUOTE = it's
commands =
    printenv BIN SITE QUOTE
    echo '{envdir}/x y' "{envdir}/z" {envdir}/w \\{envdir\\} \\{posargs\\}
"""})
    env = tox.read(tmp_path)
    shell_env = {"ENV_DIR": "/e d", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    out = [subprocess.run(["sh", "-c", cmd], env=shell_env, capture_output=True, text=True,
                          check=True).stdout for cmd, _ in env.commands]
    assert out[0].splitlines() == ["/e d/venv/bin:/usr/bin", sysconfig.get_paths()["purelib"],
                                   "it's"]
    assert out[1] == "/e d/venv/x y /e d/venv/z /e d/venv/w {envdir} {posargs}\n"
    assert env.notes == ()


def test_commands_need_their_set_env_and_commands_pre(tmp_path):
    ini = "[testenv]\nset_env =\n    {set_env}\ncommands_pre =\n    {pre}\ncommands = pytest\n"
    for set_env, pre, after in (("A = {tty:1:0}", "python -V", "set_env A"),
                                ("A = 1", "python -c 'x={unknown}'", "commands_pre")):
        write_tree(tmp_path, {"tox.ini": ini.format(set_env=set_env, pre=pre)})
        env = tox.read(tmp_path)
        assert env.commands == ()
        assert env.notes[-1] == (f"commands left out: tox runs them after {after}, which "
                                 "cannot be resolved")
    write_tree(tmp_path, {"tox.ini": ini.format(set_env="A = 1", pre="python -V")})
    assert tox.read(tmp_path).commands == (("python -V && A=1 pytest", 6),)

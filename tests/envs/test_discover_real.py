"""Discovery on what real repositories hold: release jobs beside test jobs, tox's three
configuration forms, ``{[section]key}`` lists, export-ignored CI files, and JavaScript test
runners behind npm-script chains, linters and coverage wrappers (each shaped after a
repository of bench/env_repos.txt)."""

from __future__ import annotations

import platform
import subprocess

from envs_helpers import git_repo, write_tree

from codecorpus.envs import discover as disc
from codecorpus.envs import runners, tox

HOST = "{}.{}".format(*platform.python_version_tuple()[:2])
PYPROJECT = ('[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
             '[project]\nname = "demo"\nversion = "0.1"\n'
             '[project.optional-dependencies]\ntests = ["pytest", "freezegun"]\n')
RELEASE = """name: Release
on: {push: {tags: ["*"]}}
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: pip install -r requirements/build.txt
      - run: python -m build
  publish:
    runs-on: ubuntu-latest
    steps:
      - run: pip install twine
"""
BENCHMARK = """name: benchmark
on: push
jobs:
  run:
    runs-on: ubuntu-latest
    steps:
      - run: pip install -e ".[tests]" pytest-benchmark
      - run: pytest benchmarks --benchmark-only
"""
TESTS_VIA_TOX = """name: tests
on: push
jobs:
  tests:
    runs-on: ubuntu-latest
    steps:
      - run: pip install tox
      - run: tox -e py
"""


def test_release_benchmark_and_tox_wrapper_jobs_rank_below_the_test_extras(tmp_path):
    """The issue's repository spent its test runs on a release job's build requirements:
    installs of jobs that do not run the tests come after every manifest candidate."""
    write_tree(tmp_path, {".github/workflows/release.yml": RELEASE,
                          ".github/workflows/benchmark.yml": BENCHMARK,
                          ".github/workflows/tests.yml": TESTS_VIA_TOX,
                          "requirements/build.txt": "build\n", "pyproject.toml": PYPROJECT,
                          "tests/test_a.py": "def test_a():\n    pass\n"})
    found = disc.discover(tmp_path)
    first = found.installs[0]
    assert (first.source, first.rank) == ("pyproject.toml", disc.MANIFEST)
    assert first.commands[-1] == "python -m pip install -e '.[tests]'"
    demoted = {c.source: c.rank for c in found.installs if c.source.startswith(".github")}
    assert demoted == {".github/workflows/release.yml": disc.NOT_A_TEST_JOB,
                       ".github/workflows/benchmark.yml": disc.NOT_A_TEST_JOB}
    # the tests job only installs and runs tox: the tox reader speaks for it (no tox.ini here)
    bench = next(c for c in found.tests if c.source == ".github/workflows/benchmark.yml")
    assert bench.rank == disc.NOT_A_TEST_JOB
    assert found.tests[0].source == "pyproject.toml"


def test_tox_envs_named_by_version_score_as_tests(tmp_path):
    """``legacy_tox_ini`` with tox 4's bare version names: ``3.11`` is the host's test env."""
    legacy = (f"[tool.tox]\nlegacy_tox_ini = '''\n[tox]\nenv_list = lint, {HOST}, 3.8\n"
              "[testenv]\ndeps = pytest\ncommands = pytest tests\n"
              "[testenv:lint]\ncommands = ruff check\n'''\n")
    write_tree(tmp_path, {"pyproject.toml": PYPROJECT + legacy})
    env = tox.read(tmp_path)
    assert env is not None and env.name == HOST
    assert env.commands[0][0] == "pytest tests"


def test_native_toml_tox(tmp_path):
    """tox 4's own TOML form (``[tool.tox]`` tables, or ``tox.toml``), as pallets use it."""
    native = ('[tool.tox]\nenv_list = ["py3.13", "py3.12", "style", "docs"]\n'
              '[tool.tox.env_run_base]\ndependency_groups = ["tests"]\n'
              'commands = [["pytest", "-v", "--tb=short", "--basetemp={env_tmp_dir}",'
              ' {replace = "posargs", default = [], extend = true}]]\n'
              '[tool.tox.env.style]\nskip_install = true\ncommands = [["pre-commit", "run"]]\n'
              '[dependency-groups]\ntests = ["pytest", "trio"]\n')
    write_tree(tmp_path, {"pyproject.toml": PYPROJECT + native})
    found = disc.discover(tmp_path)
    inst = found.installs[0]
    assert (inst.source, inst.rank) == ("pyproject.toml", disc.CI)
    assert inst.commands == (disc.VENV, "python -m pip install pytest trio",
                             "python -m pip install -e .")
    test = found.tests[0]
    assert test.commands[0] == (f"mkdir -p {tox.ENV_TMP} && pytest -rA --junitxml="
                                f"{runners.RESULTS}/junit.xml -v --tb=short --basetemp={tox.ENV_TMP}")
    assert test.line == inst.line > 0
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    write_tree(tmp_path, {"tox.toml": native.replace("[tool.tox.", "[").replace("[tool.tox]\n", "")
                          .split("[dependency-groups]")[0]})
    env = tox.read(tmp_path)
    assert (env.file, env.name, env.groups) == ("tox.toml", "py3.13", ("tests",))


def test_section_references_are_separate_requirements(tmp_path):
    """``{[core]deps}`` on a line of its own is the referenced list, one requirement a line
    (it was one quoted requirement, ``'pytest pytest-cov ... codecov'``)."""
    write_tree(tmp_path, {"tox.ini": (
        "[core]\ndeps =\n    pytest\n    pytest-cov\n    codecov\n"
        "[testenv]\ndeps =\n    {[core]deps}\n    pytest-timeout\n"
        "commands = pytest {posargs}\n"), "pyproject.toml": PYPROJECT})
    env = tox.read(tmp_path)
    assert env.deps == ("pytest", "pytest-cov", "codecov", "pytest-timeout")


def test_vcs_requirements_are_left_out_with_a_note(tmp_path):
    write_tree(tmp_path, {"tox.ini": ("[testenv]\ndeps =\n    pytest\n"
                                      "    git+https://github.com/casperdcl/nbval\n"
                                      "commands = pytest\n")})
    env = tox.read(tmp_path)
    assert env.deps == ("pytest",)
    assert env.notes == ("left out (not from a package index): "
                         "git+https://github.com/casperdcl/nbval",)


def test_the_tree_is_read_with_export_ignored_files(tmp_path):
    """tqdm marks ``.git*`` export-ignore: ``git archive`` dropped its workflows."""
    repo = tmp_path / "repo"
    commit = git_repo(repo, {".gitattributes": ".git* export-ignore\ntox.ini export-ignore\n",
                             ".github/workflows/ci.yml": "on: push\n",
                             "tox.ini": "[testenv]\ncommands = pytest\n", "a.py": "x = 1\n"})
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    archived = subprocess.run(["git", "-C", str(bare), "archive", commit], capture_output=True,
                              check=True).stdout
    assert b"tox.ini" not in archived  # what the old export lost
    for source in (repo, bare):
        dest = tmp_path / f"tree-{source.name}"
        disc.checkout(source, commit, dest)
        assert sorted(p.name for p in dest.iterdir()) == [".gitattributes", ".github", "a.py",
                                                          "tox.ini"]
        assert (dest / ".github/workflows/ci.yml").read_text() == "on: push\n"
    assert subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True,
                          text=True, check=True).stdout == ""  # the repository is untouched


def test_xo_and_c8_ava_chain_runs_ava_with_tap(tmp_path):
    """chalk: ``xo && c8 ava && tsd`` ran 51 ava tests reported as no tests found."""
    write_tree(tmp_path, {"package.json": '{"scripts": {"test": "xo && c8 ava && tsd"},'
                          ' "devDependencies": {"ava": "^6", "xo": "*", "c8": "*"}}',
                          "package-lock.json": "{}"})
    found = disc.discover(tmp_path)
    direct = found.tests[0]
    assert direct.commands == (f"{runners.NODE_BIN} && ava --tap",)
    assert (direct.parser, direct.rank) == ("tap", disc.MANIFEST)
    assert found.tests[1].commands == ("npm test",)


def test_mocha_behind_nyc_and_npm_run_chains(tmp_path):
    """express-style: CI runs ``npm run test-ci`` = ``nyc --reporter lcovonly npm test``; the
    test script sets a variable through cross-env; the pretest build is kept, lint dropped."""
    write_tree(tmp_path, {
        "package.json": ('{"scripts": {"lint": "eslint .", "pretest": "npm run build",'
                         ' "build": "tsc -p .",'
                         ' "test": "npm run lint && cross-env NODE_ENV=test mocha --reporter'
                         ' spec --check-leaks test/",'
                         ' "test-ci": "nyc --reporter lcovonly --reporter text npm test"}}'),
        ".github/workflows/ci.yml": ("on: push\njobs:\n  test:\n    runs-on: x\n    steps:\n"
                                     "      - run: npm install\n      - run: npm run test-ci\n")})
    found = disc.discover(tmp_path)
    ci = found.tests[0]
    assert ci.source == ".github/workflows/ci.yml" and ci.parser == "junit"
    assert ci.commands[0] == (
        f"mkdir -p {runners.RESULTS} && {runners.NODE_BIN} && tsc -p . && NODE_ENV=test mocha "
        f"--check-leaks test/ --reporter xunit --reporter-option output={runners.RESULTS}/mocha.xml")
    assert ci.reports == ".codecorpus-reports/mocha.xml"


def test_jest_vitest_and_node_test_reporters():
    cases = {
        "jest --coverage --env node": (
            f"jest --env node --ci --json --outputFile={runners.RESULTS}/jest.json", "json"),
        "vitest --coverage": (f"vitest run --reporter=default --reporter=junit "
                              f"--outputFile={runners.RESULTS}/vitest.xml", "junit"),
        "node --test --test-reporter=dot test/": (
            f"node --test --test-reporter=tap --test-reporter-destination={runners.RESULTS}"
            "/node.tap --test-reporter=spec --test-reporter-destination=stdout test/", "tap"),
        "tap --reporter=classic": ("tap --reporter=tap", "tap"),
    }
    for script, (command, parser) in cases.items():
        found = runners.rewrite_js(script)
        assert (found.command, found.parser) == (command, parser), script


def test_lint_only_ci_lines_are_not_tests(tmp_path):
    write_tree(tmp_path, {
        "package.json": '{"scripts": {"test:types": "tsc --noEmit", "test": "vitest run"}}',
        "pnpm-lock.yaml": "lockfileVersion: '9.0'\n",
        ".github/workflows/ci.yml": ("on: push\njobs:\n  ci:\n    runs-on: x\n    steps:\n"
                                     "      - run: pnpm install\n      - run: pnpm test:types\n"
                                     "      - run: pnpm test\n")})
    found = disc.discover(tmp_path)
    assert [c.commands[0].rsplit(" && ", 1)[-1] for c in found.tests if c.rank == disc.CI] == [
        f"vitest run --reporter=default --reporter=junit --outputFile={runners.RESULTS}/vitest.xml"]
    assert found.installs[0].commands == (  # the sandbox has npm only
        f"{disc.NO_BROWSER_DOWNLOADS} npx --yes pnpm@9 install",)


def test_nox_sessions_other_than_tests_rank_low(tmp_path):
    write_tree(tmp_path, {"noxfile.py": (
        "import nox\n\n@nox.session\ndef docs(session):\n"
        "    session.install('sphinx')\n    session.run('sphinx-build', 'docs', 'out')\n\n"
        "@nox.session(python=['3.11', '3.12'])\ndef tests(session):\n"
        "    session.install('-e', '.', 'pytest')\n    session.run('pytest', 'tests')\n")})
    found = disc.discover(tmp_path)
    first = found.installs[0]
    assert (first.source, first.rank, first.line) == ("noxfile.py", disc.CI, 10)
    assert first.commands == (disc.VENV, "python -m pip install -e . pytest")
    docs = [c for c in found.installs if "sphinx" in " ".join(c.commands)]
    assert [c.rank for c in docs] == [disc.NOT_A_TEST_JOB]
    assert found.tests[0].commands[0] == (f"python -m pytest -rA --junitxml={runners.RESULTS}"
                                          "/junit.xml tests")


def test_reporter_flags_replace_the_scripts_own():
    """A script's own reporter, output file and watch flags give way to ours; the other
    arguments stay where they were, globs unquoted for the runner to expand."""
    mocha = runners.rewrite_js("mocha -w --reporter dot -O foo=bar 'test/**/*.spec.js' --exit")
    assert mocha.command == ("mocha test/**/*.spec.js --exit --reporter xunit --reporter-option "
                             f"output={runners.RESULTS}/mocha.xml")
    jest = runners.rewrite_js("jest --outputFile out.json --json --watchAll=false -i")
    assert jest.command == f"jest -i --ci --json --outputFile={runners.RESULTS}/jest.json"
    vitest = runners.rewrite_js("vitest --watch --reporter verbose --dir src")
    assert vitest.command == ("vitest run --dir src --reporter=default --reporter=junit "
                              f"--outputFile={runners.RESULTS}/vitest.xml")

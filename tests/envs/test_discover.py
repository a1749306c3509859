"""Discovery reads files only: ranked candidates, provenance lines, toolchains, cache keys."""

from __future__ import annotations

from pathlib import Path

from envs_helpers import write_tree

from codecorpus.envs import discover as disc
from codecorpus.envs import runners

WORKFLOW = """name: ci
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python }}
      - name: install
        run: |
          python -m pip install --upgrade pip
          pip install -e .[test]
      - run: sudo apt-get install -y libfoo
      - name: tests
        run: pytest tests -x
"""

PYPROJECT = """[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "0.1"

[project.optional-dependencies]
test = ["pytest"]
"""


def test_ci_first_with_file_and_line(tmp_path):
    write_tree(tmp_path, {".github/workflows/ci.yml": WORKFLOW, "pyproject.toml": PYPROJECT,
                          "tox.ini": "[testenv]\ndeps = pytest\ncommands = pytest {posargs}\n",
                          "tests/test_a.py": "def test_a():\n    pass\n"})
    found = disc.discover(tmp_path)
    assert found.toolchains == ("python",)
    first = found.tests[0]
    assert (first.source, first.line, first.rank) == (".github/workflows/ci.yml", 17, disc.CI)
    assert first.commands == (f"pytest -rA --junitxml={runners.RESULTS}/junit.xml tests -x",)
    assert first.parser == "junit"
    inst = found.installs[0]
    assert (inst.source, inst.line) == (".github/workflows/ci.yml", 13)
    assert inst.commands == (disc.VENV, "python -m pip install --upgrade pip",
                             "pip install -e .[test]")  # the sudo apt line is left out
    sources = [(c.source, c.rank) for c in found.tests]
    assert sources.index(("tox.ini", disc.CI)) < sources.index(("pyproject.toml", disc.MANIFEST))
    manifest = next(c for c in found.installs if c.source == "pyproject.toml")
    # the package last: pytest's own dependencies must not replace the checkout's code
    assert manifest.commands == (disc.VENV, "python -m pip install pytest",
                                 "python -m pip install -e '.[test]'")
    assert manifest.line == PYPROJECT.splitlines().index('test = ["pytest"]') + 1


def _bare(commands: tuple[str, ...]) -> tuple[str, ...]:
    """Node install commands without the browser-download switches every one carries."""
    assert all(c.startswith(disc.NO_BROWSER_DOWNLOADS + " ") for c in commands)
    return tuple(c[len(disc.NO_BROWSER_DOWNLOADS) + 1:] for c in commands)


def test_node_package_manager_from_lockfile(tmp_path):
    """pnpm and yarn come through npx at the version the lockfile or ``packageManager``
    names, with their lock; then npm without the lock (a pinned version may be gone)."""
    write_tree(tmp_path, {"package.json": '{"name": "x",\n "scripts": {\n  "test": "node --test"}}',
                          "pnpm-lock.yaml": "lockfileVersion: '6.0'\n"})
    found = disc.discover(tmp_path)
    assert [_bare(c.commands) for c in found.installs] == [
        ("npx --yes pnpm@8 install --frozen-lockfile",), ("npm install --no-package-lock",)]
    direct = found.tests[0]
    assert direct.commands[0].endswith(
        f"node --test --test-reporter=tap --test-reporter-destination={runners.RESULTS}/node.tap"
        " --test-reporter=spec --test-reporter-destination=stdout")
    assert (direct.line, direct.parser, direct.reports) == (3, "tap", ".codecorpus-reports/node.tap")
    assert found.tests[1].commands == ("pnpm test",)
    (tmp_path / "pnpm-lock.yaml").unlink()
    (tmp_path / "yarn.lock").write_text("# yarn lockfile v1\n")
    assert _bare(disc.discover(tmp_path).installs[0].commands) == (
        "npx --yes yarn@1 install --frozen-lockfile --ignore-engines",)
    (tmp_path / "yarn.lock").write_text('__metadata:\n  version: 8\n')
    (tmp_path / "package.json").write_text('{"packageManager": "yarn@4.5.1+sha512.abc"}')
    assert _bare(disc.discover(tmp_path).installs[0].commands) == (
        "npx --yes -p @yarnpkg/cli-dist@4.5.1 yarn install --immutable",)
    (tmp_path / "yarn.lock").unlink()
    (tmp_path / "package-lock.json").write_text("{}")
    assert [_bare(c.commands) for c in disc.discover(tmp_path).installs] == [
        ("npm ci",), ("npm install --no-package-lock",)]


def test_npm_default_test_script_is_no_test(tmp_path):
    write_tree(tmp_path, {"package.json": '{"scripts": {"test": "echo \\"Error: no test '
                          'specified\\" && exit 1"}}'})
    assert disc.discover(tmp_path).tests == ()


def test_other_ecosystems(tmp_path):
    write_tree(tmp_path, {
        "rust/Cargo.toml": '[package]\nname = "x"\n',
        "go/go.mod": "module x\n",
        "mvn/pom.xml": "<project/>",
        "cm/CMakeLists.txt": "project(x)\nenable_testing()\n",
        "mk/Makefile": "all:\n\ttrue\ncheck: all\n\ttrue\n"})
    expect = {
        "rust": (("cargo test --offline --no-fail-fast",), "rust", "cargo"),
        "go": (("go test -json ./...",), "go", "go-json"),
        "mvn": (("mvn -B -o test",), "java-maven", "junit"),
        "cm": (("ctest --test-dir build --output-on-failure",), "cmake", "ctest"),
        "mk": (("make check",), "make", "auto"),
    }
    for sub, (commands, chain, parser) in expect.items():
        test = disc.discover(tmp_path / sub).tests[0]
        assert (test.commands, test.toolchain, test.parser) == (commands, chain, parser), sub
    assert disc.discover(tmp_path / "cm").tests[0].line == 2
    assert disc.discover(tmp_path / "mk").tests[0].line == 3


def test_dependency_hash_follows_dependency_files_only(tmp_path):
    write_tree(tmp_path, {"pyproject.toml": PYPROJECT, "src/demo.py": "x = 1\n",
                          "requirements-dev.txt": "pytest\n"})
    files, first = disc.dependency_hash(tmp_path)
    assert files == ("pyproject.toml", "requirements-dev.txt")
    (tmp_path / "src/demo.py").write_text("x = 2\n")
    assert disc.dependency_hash(tmp_path)[1] == first
    (tmp_path / "requirements-dev.txt").write_text("pytest>=8\n")
    assert disc.dependency_hash(tmp_path)[1] != first
    key = disc.cache_key(first, "python", "CPython 3.11.7", ("a",))
    assert key != disc.cache_key(first, "python", "CPython 3.12.1", ("a",))
    assert len(key) == 32


def test_unittest_convention_without_manifest(tmp_path):
    write_tree(tmp_path, {"tests/test_x.py": "import unittest\n"})
    found = disc.discover(tmp_path)
    assert [c.commands[0] for c in found.tests] == [disc.UNITTEST, disc.UNITTEST + " -s tests"]
    assert found.installs[0].commands == (disc.VENV + " --without-pip",)


def test_commits_grouped_by_dependency_hash_from_git_objects(tmp_path):
    import subprocess

    from envs_helpers import git_repo

    from codecorpus.envs import verify

    repo = tmp_path / "repo"
    first = git_repo(repo, {"pyproject.toml": PYPROJECT, "pkg/a.py": "x = 1\n",
                            "vendor/requirements.txt": "ignored\n"})
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}

    def commit(rel: str, text: str) -> str:
        (repo / rel).write_text(text)
        for args in (["add", "-A"], ["commit", "-q", "-m", rel]):
            subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                              text=True, check=True).stdout.strip()

    source_only = commit("pkg/a.py", "x = 2\n")
    new_dep = commit("requirements.txt", "attrs\n")
    groups = disc.group_commits(repo, [first, source_only, new_dep])
    assert list(groups.values()) == [[first, source_only], [new_dep]]
    for sha in (first, new_dep):
        tree = tmp_path / f"tree-{sha[:7]}"
        verify.fresh_tree(repo, sha, tree)
        assert disc.dependency_hash_at(repo, sha) == disc.dependency_hash(tree)
    assert disc.dependency_hash_at(repo, new_dep)[0] == ("pyproject.toml", "requirements.txt")


def test_cache_key_and_stage_hash_name_the_host_toolchains():
    from codecorpus.config import load_recipe
    from codecorpus.envs import spec, toolchains

    key = disc.cache_key("0" * 64, "python", "CPython 3.11.7", ("a",))
    assert key == disc.cache_key("0" * 64, "python", "CPython 3.11.7", ("a",), disc.HOST_PLATFORM)
    assert key != disc.cache_key("0" * 64, "python", "CPython 3.11.7", ("a",), "Linux-aarch64-")
    recipe = load_recipe(Path(__file__).resolve().parents[2] / "pipelines" / "repo-envs.yaml")
    versions, host = spec.verify_parts(recipe)[:2]
    assert versions == toolchains.host_versions() and host == disc.HOST_PLATFORM
    assert versions["python"].startswith("CPython 3.")

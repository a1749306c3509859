"""Candidate install and test commands for a repository, cheapest evidence first.

Reads files only; nothing here runs repository code. Candidates come ranked:

0. CI files: GitHub Actions ``run:`` steps, ``.gitlab-ci.yml`` scripts, tox's test
   environment (``envs/tox.py``: its commands with tox's substitutions made, its deps,
   extras and dependency groups), ``noxfile.py`` ``session.run``/``session.install``. A CI
   line that calls tox or nox is left to those readers: tox and nox build their
   environments when the tests start, which needs the network the test phase lacks;
1. the ecosystem's manifests: ``pyproject.toml`` (test extras, PEP 735 dependency groups),
   ``setup.py``/``setup.cfg``, test requirement files (``requirements-test*.txt``,
   ``requirements/tests.txt``, ...); pytest whenever the tests are written for it (it also
   runs unittest cases), ``python -m unittest`` otherwise; ``package.json`` (``scripts.test``, the package manager its
   lockfile names, jest/vitest/mocha/``node --test``); ``Cargo.toml``; ``go.mod``;
   ``pom.xml``/``build.gradle``; ``CMakeLists.txt``; a ``Makefile`` with ``test``/``check``;
2. conventions when a manifest says nothing (``python -m unittest discover``).

Every candidate names the file and line it came from, the toolchain it needs and, for test
commands, the parser for its output. The dependency files' content hash (plus toolchain)
is the environment cache key: commits whose dependency files hash alike share one install.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import platform
import re
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomllib
import yaml

from codecorpus.envs import runners, tox
from codecorpus.envs.text import line_of, quote, read_text

CI, MANIFEST, CONVENTION = 0, 1, 2
NOT_A_TEST_JOB = 4
"""The rank of what a CI job or nox session that does not run the tests installs (a
release, publish, deploy, docs, benchmark or lint job; a job whose tests run through tox or
nox): below every manifest and convention, since it installs build or publish tools."""
JUNIT_DIR = runners.REPORTS_DIR
SKIP_DIRS = {".git", "node_modules", "target", "build", "dist", ".venv", "venv", "vendor",
             ".tox", ".nox", "__pycache__", JUNIT_DIR}
REQUIREMENT_GLOBS = ("*requirements*.txt", "requirements/*.txt")
"""pip requirement files: ``requirements.txt``, ``requirements-test.txt``, ``test-requirements.txt``, ..."""
DEPENDENCY_GLOBS = (
    "pyproject.toml", "setup.py", "setup.cfg", *REQUIREMENT_GLOBS,
    "tox.ini", "noxfile.py",
    "Pipfile", "Pipfile.lock", "poetry.lock", "uv.lock", "pdm.lock",
    "package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "npm-shrinkwrap.json",
    "Cargo.lock", "**/Cargo.toml", "go.mod", "go.sum", "**/pom.xml", "build.gradle",
    "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "gradle/libs.versions.toml",
)
VENV = 'python -m venv "$ENV_DIR/venv"'
PYTEST = runners.pytest_with_report(
    "python -m pytest -p no:cacheprovider --continue-on-collection-errors")
UNITTEST = "python -m unittest discover -v"

_TEST_WORDS = re.compile(
    r"\b(pytest|py\.test|unittest|tox|nox|npm (?:run )?test|yarn (?:run )?test|pnpm (?:run )?test"
    r"|jest|vitest|mocha|node --test|cargo test|go test|mvn\b.*\btest|gradlew? .*\btest|ctest"
    r"|make (?:test|check))\b")
_INSTALL_WORDS = re.compile(
    r"\b(pip3? install|python -m pip install|uv pip install|uv sync|poetry install|pdm install"
    r"|npm ci|npm install|yarn install|pnpm install|cargo fetch|cargo build|go mod download"
    r"|go get|mvn\b.*\b(?:install|dependency:)|cmake -S|cmake \.\.|cmake --build)\b")
_UNSUPPORTED = re.compile(r"\$\{\{|\bsudo\b|\bapt(?:-get)?\b|\bbrew\b|\bdocker\b|\bchoco\b|^cd \.\.")
_ORCHESTRATOR = re.compile(r"(^|[\s/])(tox|nox)(\s|$)|\b-m (tox|nox)\b")


@dataclass(frozen=True)
class Candidate:
    """One way to install or to test, and where it was read."""

    commands: tuple[str, ...]
    toolchain: str
    source: str
    line: int
    rank: int
    parser: str = ""
    """For test commands: the ``results`` parser of their output."""
    reports: str = ""
    """For test commands: a glob (relative to the work tree) of the JUnit files they write."""


@dataclass(frozen=True)
class Discovery:
    """Everything found for one repository version."""

    toolchains: tuple[str, ...]
    installs: tuple[Candidate, ...]
    tests: tuple[Candidate, ...]
    dependency_files: tuple[str, ...]
    dependency_hash: str
    notes: tuple[str, ...] = field(default=())
    """What a reader found but left out, and why, each naming its file (a tox command with a
    substitution that cannot be made: ``tox.ini: left out (unresolved substitution): ...``)."""


def dependency_hash(root: Path) -> tuple[tuple[str, ...], str]:
    """The dependency files of a tree and the sha256 over their paths and contents."""
    files = sorted({str(p.relative_to(root)) for pattern in DEPENDENCY_GLOBS
                    for p in root.glob(pattern) if p.is_file() and not skipped_path(p, root)})
    digest = hashlib.sha256()
    for rel in files:
        digest.update(rel.encode() + b"\0" + hashlib.sha256((root / rel).read_bytes()).digest())
    return tuple(files), digest.hexdigest()


def _is_dependency_file(rel: str) -> bool:
    """Whether a repository path matches ``DEPENDENCY_GLOBS`` as ``Path.glob`` would.

    >>> [_is_dependency_file(p) for p in ("requirements-dev.txt", "a/requirements.txt",
    ...                                   "crates/x/Cargo.toml", "node_modules/y/package.json")]
    [True, False, True, False]
    """
    parts = rel.split("/")
    if any(part in SKIP_DIRS for part in parts[:-1]):
        return False
    for pattern in DEPENDENCY_GLOBS:
        if pattern.startswith("**/"):
            if fnmatch.fnmatchcase(parts[-1], pattern[3:]):
                return True
        elif rel.count("/") == pattern.count("/") and fnmatch.fnmatchcase(rel, pattern):
            return True
    return False


def _git_out(repo: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(repo), *args],
                          capture_output=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise ValueError(f"git {' '.join(args)} in {repo} failed: {proc.stderr.decode()[:300]}")
    return proc.stdout


def dependency_hash_at(repo: Path, commit: str) -> tuple[tuple[str, ...], str]:
    """``dependency_hash`` of a commit read from git objects, without checking it out (the
    same digest as of the commit's exported tree). Reads blobs only: runs no repository code."""
    names = _git_out(repo, "ls-tree", "-r", "--name-only", "-z", commit).split(b"\0")
    files = sorted(n.decode("utf-8", "replace") for n in names
                   if n and _is_dependency_file(n.decode("utf-8", "replace")))
    digest = hashlib.sha256()
    for rel in files:
        blob = _git_out(repo, "cat-file", "blob", f"{commit}:{rel}")
        digest.update(rel.encode() + b"\0" + hashlib.sha256(blob).digest())
    return tuple(files), digest.hexdigest()


def checkout(repo: Path, commit: str, dest: Path) -> None:
    """Write ``commit``'s tree into ``dest`` as a checkout would: every tracked file, with
    ``.gitattributes`` ``export-ignore`` paths included (``git archive`` leaves those out,
    and they are often ``.github/``, ``tox.ini`` or the tests). A throwaway index is used,
    so the repository (bare or not) is not changed. Submodules stay empty folders.
    Runs git only, never repository code (no filters or hooks run: the system config is
    off and the repository's ``.git/config`` is read only for its objects)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="index-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index"),
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
        base = ["git", "-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null",
                "-c", "core.symlinks=true", f"--git-dir={_git_dir(repo)}",
                f"--work-tree={dest}"]
        for args in (("read-tree", commit), ("checkout-index", "-a", "-f")):
            proc = subprocess.run([*base, *args], capture_output=True, env=env, timeout=600,
                                  check=False)
            if proc.returncode != 0:
                raise ValueError(f"git {args[0]} {commit} in {repo} failed: "
                                 f"{proc.stderr.decode(errors='replace')[:300]}")


def _git_dir(repo: Path) -> str:
    """The git directory of a repository, bare or with a work tree."""
    return _git_out(repo, "rev-parse", "--absolute-git-dir").decode().strip()


def group_commits(repo: Path, commits: list[str]) -> dict[str, list[str]]:
    """Commits grouped by dependency hash, in the order given: one environment (one
    install) serves each group."""
    groups: dict[str, list[str]] = {}
    for commit in commits:
        groups.setdefault(dependency_hash_at(repo, commit)[1], []).append(commit)
    return groups


HOST_PLATFORM = f"{platform.system()}-{platform.machine()}-{'-'.join(platform.libc_ver())}"
"""What installed binaries depend on besides the toolchain: OS, architecture and libc."""


def cache_key(dep_hash: str, toolchain: str, toolchain_version: str,
              install: tuple[str, ...], host: str = HOST_PLATFORM) -> str:
    """The installed-dependencies cache key: what the install depends on (the dependency
    files, the toolchain and its version, the host platform, the install commands), and
    nothing else."""
    text = json.dumps([dep_hash, toolchain, toolchain_version, host, list(install)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def discover(root: Path) -> Discovery:
    """Ranked install and test candidates of the tree at ``root``."""
    root = Path(root)
    tox_env = tox.read(root)
    found = _github_actions(root) + _gitlab_ci(root) + _tox(root, tox_env)
    for reader in (_nox, _python, _node, _rust, _go, _java, _cmake, _make):
        found += reader(root)
    installs = _ranked(c for kind, c in found if kind == "install")
    tests = _ranked(c for kind, c in found if kind == "test")
    files, digest = dependency_hash(root)
    toolchains = tuple(sorted({c.toolchain for c in installs + tests}))
    notes = tuple(f"{tox_env.file}: {note}" for note in tox_env.notes) if tox_env else ()
    return Discovery(toolchains, installs, tests, files, digest, notes)


def _ranked(cands) -> tuple[Candidate, ...]:
    unique: dict[tuple[tuple[str, ...], str], Candidate] = {}
    for c in cands:
        unique.setdefault((c.commands, c.toolchain), c)
    return tuple(sorted(unique.values(),
                        key=lambda c: (c.rank, c.parser == "auto", c.source, c.line)))


def skipped_path(path: Path, root: Path) -> bool:
    return any(part in SKIP_DIRS for part in path.relative_to(root).parts[:-1])


# ---------------------------------------------------------------- CI files


def _toolchain_of(command: str) -> str:
    """The toolchain a command line needs, from the programs it names.

    >>> [_toolchain_of(c) for c in ("sphinx-build -b doctest docs", "npx vitest", "go test ./...")]
    ['python', 'node', 'go']
    """
    for word, chain in (("cargo", "rust"), ("go", "go"), ("mvn|mvnw", "java-maven"),
                        ("gradle|gradlew", "java-gradle"), ("ctest|cmake", "cmake"),
                        ("npm|yarn|pnpm|node|npx", "node"), ("make", "make")):
        if re.search(rf"(?:^|[\s/&;|(])(?:{word})(?=\s|$)", command):
            return chain
    return "python"


def _parser_of(command: str) -> tuple[str, str]:
    """The parser (and JUnit glob) for a test command's output."""
    chain = _toolchain_of(command)
    if "--junitxml" in command:
        found = re.search(r"--junitxml[= ](\S+)", command).group(1)
        return "junit", runners.PYTEST_JUNIT if runners.RESULTS in found else found
    parser = {"rust": "cargo", "go": "go-json" if "-json" in command else "auto",
              "cmake": "ctest", "java-maven": "junit", "java-gradle": "junit",
              "node": "tap" if "node --test" in command else "auto"}.get(chain, "auto")
    if "pytest" in command:
        parser = "pytest"
    elif "unittest" in command:
        parser = "unittest"
    reports = {"java-maven": "**/target/surefire-reports/TEST-*.xml",
               "java-gradle": "**/build/test-results/**/*.xml"}.get(chain, "")
    return parser, reports


def with_reporter(line: str, scripts: dict[str, str] | None = None) -> RunnerTest:
    """A test line with its runner told to write a per-test report (``envs/runners.py``):
    ``pytest`` gets ``-rA`` and a JUnit file; a package script call or a JS runner behind
    wrappers becomes the chain of commands it runs, the runner with its file reporter. Any
    other line is kept as it is, its parser read from it (``_parser_of``)."""
    if runners.has_pytest(line):
        command = runners.pytest_with_report(line)
        return RunnerTest(command, *_parser_of(command))
    if _toolchain_of(line) == "node":
        found = runners.node_test_command(line, scripts or {})
        if found:
            return RunnerTest(found.command, found.parser, found.reports)
    return RunnerTest(line, *_parser_of(line))


@dataclass(frozen=True)
class RunnerTest:
    """A test command, the ``results`` parser of its output and its report files' glob."""

    command: str
    parser: str
    reports: str


def _ci_lines(script: str) -> list[str]:
    """The usable shell lines of a CI step: continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", script)
    return [ln.strip() for ln in joined.splitlines()
            if ln.strip() and not ln.strip().startswith("#") and not _UNSUPPORTED.search(ln)]


_NOT_TEST_JOB = re.compile(
    r"releas|publish|deploy|\bdocs?\b|documentation|sphinx|bench|pages|wheel|\bdist\b|sdist"
    r"|\blint|pre-commit|codeql|changelog|labels?\b|stale|\btyping\b|mypy|pyright|\bstyle\b"
    r"|upload|pypi|npm-publish|\btag\b|bump|version|update|security|audit|dependabot|cron"
    r"|nightly|coverage-report|combine", re.I)


def not_a_test_job(workflow: str, job: str) -> bool:
    """Whether a CI job is for something other than running the tests (release, publish,
    deploy, docs, benchmark, lint ...), read from its names: the job's own name first
    (``test`` there wins), then the workflow's (file name and ``name:``).

    >>> [not_a_test_job(*n) for n in (("release.yml Release", "build"), ("ci.yml", "tests"),
    ...                               ("ci.yml CI", "docs"), ("bench.yml", "run"),
    ...                               ("publish.yml", "test-install"), ("main.yml", "build"))]
    [True, False, True, True, False, False]
    """
    for names in (job, workflow):
        if re.search(r"test|pytest|\bci\b", names, re.I):
            return False
        if _NOT_TEST_JOB.search(names):
            return True
    return False


def _from_steps(scripts: list[str], text: str, source: str, test_job: bool = True,
                package_scripts: dict[str, str] | None = None,
                node_managers: dict[str, str] | None = None) -> list[tuple[str, Candidate]]:
    """One install candidate (the job's install lines in order) and one test candidate per
    test line. A job that is not a test job (``not_a_test_job``), or that runs no test line
    of its own (its tests run through tox or nox, whose readers give them), has its
    install ranked ``NOT_A_TEST_JOB``."""
    out: list[tuple[str, Candidate]] = []
    installs: list[str] = []
    first_install = 0
    for script in scripts:
        for line in _ci_lines(script):
            if _ORCHESTRATOR.search(line):
                continue  # tox/nox: their own readers give the commands they would run
            if _TEST_WORDS.search(line) and not _INSTALL_WORDS.search(line):
                if runners.lint_only(line, package_scripts or {}):
                    continue  # ``npm run test:types``: a type check, not the tests
                found = _test_candidate(line, source, line_of(text, line), CI,
                                        scripts=package_scripts)
                out.append(("test", found if test_job else replace(found, rank=NOT_A_TEST_JOB)))
            elif _INSTALL_WORDS.search(line):
                first_install = first_install or line_of(text, line)
                line = _through_npx(line, node_managers or {})
                installs.append(_node_install(line) if _toolchain_of(line) == "node" else line)
    if installs:
        chain = _toolchain_of(" ".join(installs))
        setup = (VENV,) if chain == "python" else ()
        rank = CI if test_job and out else NOT_A_TEST_JOB
        out.append(("install", Candidate((*setup, *installs), chain, source, first_install,
                                         rank)))
    return out


def _through_npx(line: str, managers: dict[str, str]) -> str:
    """A CI line that calls pnpm or yarn, calling it through npx at the version the
    repository names (the sandbox has node and npm only).

    >>> _through_npx("pnpm install --frozen-lockfile", {"pnpm": "pnpm@9"})
    'npx --yes pnpm@9 install --frozen-lockfile'
    """
    for name, spec in managers.items():
        if re.match(rf"{name}(\s|$)", line):
            return f"npx --yes {spec}{line[len(name):]}"
    return line


def _test_candidate(line: str, source: str, where: int, rank: int, chain: str = "",
                    scripts: dict[str, str] | None = None) -> Candidate:
    """A test line as a candidate: its runner told to write a per-test report."""
    test = with_reporter(line, scripts)
    return Candidate((test.command,), chain or _toolchain_of(line), source, where, rank,
                     test.parser, test.reports)


def _github_actions(root: Path) -> list[tuple[str, Candidate]]:
    out = []
    package_scripts = _package_scripts(root)
    managers = _npx_managers(root)
    for wf in sorted((root / ".github" / "workflows").glob("*.y*ml")):
        text = read_text(wf)
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            continue
        jobs = doc.get("jobs") if isinstance(doc, dict) else None
        for job_id, job in (jobs or {}).items() if isinstance(jobs, dict) else ():
            steps = job.get("steps") if isinstance(job, dict) else None
            runs = [s["run"] for s in steps or [] if isinstance(s, dict)
                    and isinstance(s.get("run"), str)]
            test_job = not not_a_test_job(f"{wf.name} {doc.get('name') or ''}",
                                          f"{job_id} {job.get('name') or ''}")
            out += _from_steps(runs, text, str(wf.relative_to(root)), test_job,
                               package_scripts, managers)
    return out


def _gitlab_ci(root: Path) -> list[tuple[str, Candidate]]:
    path = root / ".gitlab-ci.yml"
    text = read_text(path)
    try:
        doc = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return []
    out = []
    for name, job in (doc or {}).items() if isinstance(doc, dict) else ():
        if not isinstance(job, dict) or str(name).startswith("."):
            continue
        scripts = [s for key in ("before_script", "script") for s in _as_list(job.get(key))]
        test_job = not not_a_test_job(str(job.get("stage") or ""), str(name))
        out += _from_steps([s for s in scripts if isinstance(s, str)], text, ".gitlab-ci.yml",
                           test_job, _package_scripts(root), _npx_managers(root))
    return out


def _as_list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _tox(root: Path, env: tox.ToxEnv | None) -> list[tuple[str, Candidate]]:
    """The install and test candidates of tox's test environment (``tox.read(root)``)."""
    if env is None:
        return []
    groups = [g for g in _dependency_groups(_toml(root / "pyproject.toml"), env.groups)
              if not tox.not_from_an_index(g)]
    target = f"'.[{','.join(env.extras)}]'" if env.extras else "."
    install = [VENV]
    if env.deps:
        install.append("python -m pip install " + " ".join(env.deps))
    if groups:
        install.append("python -m pip install " + " ".join(quote(g) for g in groups))
    if env.install_package:  # last, as tox installs it: no test tool's dependency replaces it
        install.append(f"python -m pip install -e {target}")
    out = [("install", Candidate(tuple(c for c in install if c), "python", env.file, env.line,
                                 CI))]
    for cmd, line in env.commands:
        if _TEST_WORDS.search(cmd):
            out.append(("test", _test_candidate(cmd, env.file, line, CI, "python")))
    return out


_NOX_CALL = re.compile(r"session\.(run|install)\(([^)]*)\)")
_NOX_SESSION = re.compile(r"^def (\w+)\(\s*session\b", re.M)


def _nox(root: Path) -> list[tuple[str, Candidate]]:
    """Each nox session's installs and test runs; a session named for something other than
    the tests (lint, docs, build ...: ``tox``'s scoring of names) is ranked
    ``NOT_A_TEST_JOB``, as is a session that runs no test."""
    text = read_text(root / "noxfile.py")
    out: list[tuple[str, Candidate]] = []
    starts = [(m.start(), m.group(1)) for m in _NOX_SESSION.finditer(text)]
    for i, (start, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        out += _nox_session(text, start, end, tox.names_tests(name.replace("_", "-")))
    return out


def _nox_session(text: str, start: int, end: int, test_named: bool) -> list[tuple[str, Candidate]]:
    out: list[tuple[str, Candidate]] = []
    installs: list[str] = []
    for m in _NOX_CALL.finditer(text, start, end):
        args = re.findall(r"""["']([^"']+)["']""", m.group(2))
        if not args:
            continue
        line = text.count("\n", 0, m.start()) + 1
        if m.group(1) == "install":
            installs.append("python -m pip install " + " ".join(quote(a) for a in args))
        elif _TEST_WORDS.search(" ".join(args)):
            cmd = " ".join(quote(a) for a in args)
            if args[0] == "pytest":
                cmd = "python -m " + cmd
            out.append(("test", _test_candidate(cmd, "noxfile.py", line,
                                                CI if test_named else NOT_A_TEST_JOB, "python")))
    if installs:
        rank = CI if test_named and out else NOT_A_TEST_JOB
        out.append(("install", Candidate((VENV, *installs), "python", "noxfile.py",
                                         line_of(text[start:end], "session.install")
                                         + text.count("\n", 0, start), rank)))
    return out


# ---------------------------------------------------------------- manifests


def _toml(path: Path) -> dict:
    try:
        return tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError:
        return {}


_TEST_EXTRAS = ("test", "tests", "testing", "dev", "develop")
_TEST_GROUPS = ("test", "tests", "testing", "dev")


def _python(root: Path) -> list[tuple[str, Candidate]]:
    py = _toml(root / "pyproject.toml")
    setup_py, setup_cfg = read_text(root / "setup.py"), read_text(root / "setup.cfg")
    runtime = [root / "requirements.txt"] if (root / "requirements.txt").is_file() else []
    test_reqs = _test_requirements(root)
    if not (py or setup_py or setup_cfg or runtime or test_reqs or _has_python_tests(root)):
        return []
    out = []
    extras = _python_extras(py, setup_py, setup_cfg)
    extra = next((e for e in _TEST_EXTRAS if e in extras), "")
    target = f"'.[{extra}]'" if extra else "."
    source = "pyproject.toml" if py else "setup.py" if setup_py else "setup.cfg"
    wants_pytest = _uses_pytest(root, py, setup_cfg)
    pytest_dep = ("python -m pip install pytest",) if wants_pytest else ()
    req_cmds = tuple(f"python -m pip install -r {quote(str(r.relative_to(root)))}"
                     for r in runtime + test_reqs)
    group = next((g for g in _TEST_GROUPS if g in (py.get("dependency-groups") or {})), "")
    group_deps = [g for g in _dependency_groups(py, (group,) if group else ())
                  if not tox.not_from_an_index(g)]
    group_cmd = ("python -m pip install " + " ".join(map(quote, group_deps)),) if group_deps else ()
    if py or setup_py or setup_cfg:
        line = line_of(read_text(root / source), f"{extra}" if extra else "[build-system]")
        # the package last: a test tool that depends on it (pytest on iniconfig, pluggy and
        # packaging) would otherwise replace the checkout's code with the registry's
        full = tuple(dict.fromkeys(
            (VENV, *req_cmds, *group_cmd, *pytest_dep, f"python -m pip install -e {target}")))
        out.append(("install", Candidate(full, "python", source, line, MANIFEST)))
        plain = (VENV, *pytest_dep, "python -m pip install -e .")
        if plain != full:  # the test dependencies may be what fails to install
            out.append(("install", Candidate(plain, "python", source, line, MANIFEST)))
    elif req_cmds:
        out.append(("install", Candidate((VENV, *req_cmds, *pytest_dep), "python",
                                         str((runtime + test_reqs)[0].relative_to(root)), 1,
                                         MANIFEST)))
    if not out:
        setup = (VENV,) if pytest_dep else (VENV + " --without-pip",)  # no pip: ensurepip's install is most of a venv's making
        out.append(("install", Candidate((*setup, *pytest_dep), "python", "", 0, CONVENTION)))
    if wants_pytest:
        out.append(("test", Candidate((PYTEST,), "python", source, 0, MANIFEST, "junit",
                                      f"{JUNIT_DIR}/junit.xml")))
    out.append(("test", Candidate((UNITTEST,), "python", "", 0, CONVENTION, "unittest")))
    for tests in ("tests", "test"):
        if (root / tests).is_dir():
            top = " -t ." if (root / tests / "__init__.py").is_file() else ""
            out.append(("test", Candidate((f"{UNITTEST} -s {tests}{top}",), "python", tests, 0,
                                          CONVENTION, "unittest")))
    return out


def _test_requirements(root: Path) -> list[Path]:
    """The requirement files of the tests: those named for tests, else those named for
    development (``requirements-test.txt``, ``test-requirements.txt``, ``requirements/tests.txt``;
    ``requirements-dev.txt``); never the docs', release or update ones."""
    files = sorted({p for pattern in REQUIREMENT_GLOBS for p in root.glob(pattern)})
    for word in ("test", "dev"):
        chosen = [f for f in files if word in f.name.lower()]
        if chosen:
            return chosen
    return []


def _dependency_groups(py: dict, names: tuple[str, ...]) -> list[str]:
    """The requirements of PEP 735 dependency groups, ``include-group`` entries followed
    (names compare normalized, as the PEP says).

    >>> _dependency_groups({"dependency-groups": {"test": ["pytest", {"include-group": "Cov"}],
    ...                                           "cov": ["coverage"]}}, ("test",))
    ['pytest', 'coverage']
    """
    table = py.get("dependency-groups")
    table = {_normal(k): v for k, v in table.items()} if isinstance(table, dict) else {}
    out: list[str] = []
    seen: set[str] = set()

    def add(name: str) -> None:
        if _normal(name) in seen:
            return
        seen.add(_normal(name))
        items = table.get(_normal(name))
        for item in items if isinstance(items, list) else []:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
                add(item["include-group"])

    for name in names:
        add(name)
    return list(dict.fromkeys(out))


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _python_extras(py: dict, setup_py: str, setup_cfg: str) -> set[str]:
    extras = set(py.get("project", {}).get("optional-dependencies") or {})
    m = re.search(r"extras_require\s*=\s*\{(.*?)\}", setup_py, re.S)
    if m:
        extras |= set(re.findall(r"""["'](\w+)["']\s*:""", m.group(1)))
    m = re.search(r"^\[options\.extras_require\]\n((?:[^\[].*\n?)*)", setup_cfg, re.M)
    if m:
        extras |= set(re.findall(r"^(\w+)\s*=", m.group(1), re.M))
    return extras


def _uses_pytest(root: Path, py: dict, setup_cfg: str) -> bool:
    if "pytest" in (py.get("tool") or {}) or "[tool:pytest]" in setup_cfg:
        return True
    declared = json.dumps(py.get("project", {}).get("optional-dependencies") or {})
    declared += setup_cfg + read_text(root / "setup.py")
    declared += json.dumps(py.get("dependency-groups") or {}) + read_text(root / "tox.ini")
    declared += "".join(read_text(p) for pattern in REQUIREMENT_GLOBS for p in root.glob(pattern))
    if re.search(r"\bpytest\b", declared):
        return True
    if (root / "pytest.ini").is_file() or (root / "conftest.py").is_file():
        return True
    for test_file in _python_test_files(root)[:50]:
        # pytest by import, or by style: a module-level test function, which unittest skips
        if re.search(r"^\s*(import pytest|from pytest )|^(async )?def test", read_text(test_file),
                     re.M):
            return True
    return False


def _python_test_files(root: Path) -> list[Path]:
    files = [p for p in sorted(root.rglob("test*.py")) if not skipped_path(p, root)]
    return files + [p for p in sorted(root.rglob("*_test.py")) if not skipped_path(p, root)]


def _has_python_tests(root: Path) -> bool:
    return bool(_python_test_files(root))


_NPM_DEFAULT_TEST = 'echo "Error: no test specified" && exit 1'


NO_BROWSER_DOWNLOADS = ("PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 "
                        "CYPRESS_INSTALL_BINARY=0 CHROMEDRIVER_SKIP_DOWNLOAD=true")
"""Set for node installs: browser binaries come from hosts other than the registry, which
the sandbox cannot reach, and a postinstall that fetches one fails the whole install
(yargs-parser's puppeteer)."""


def _node_install(command: str) -> str:
    """A node install command with browser downloads turned off.

    >>> _node_install("npm ci")
    'PUPPETEER_SKIP_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 CYPRESS_INSTALL_BINARY=0 CHROMEDRIVER_SKIP_DOWNLOAD=true npm ci'
    """
    return f"{NO_BROWSER_DOWNLOADS} {command}"


def _package(root: Path) -> tuple[dict, str]:
    """``package.json`` as a dict (empty when absent or malformed) and its text."""
    text = read_text(root / "package.json")
    try:
        pkg = json.loads(text) if text else {}
    except ValueError:
        return {}, text
    return (pkg if isinstance(pkg, dict) else {}), text


def _package_scripts(root: Path) -> dict[str, str]:
    scripts = _package(root)[0].get("scripts")
    return {k: v for k, v in scripts.items() if isinstance(v, str)} if isinstance(
        scripts, dict) else {}


def _node(root: Path) -> list[tuple[str, Candidate]]:
    """npm, yarn or pnpm by the lockfile (each with its lock), then npm without the lock:
    a lockfile may pin what the registry no longer serves, or name a package manager the
    sandbox lacks. The test script's runners are called with their file reporters
    (``runners.node_test_command``) before the script itself, which reports only an exit
    code unless its runner prints TAP."""
    pkg, text = _package(root)
    if not pkg:
        return []
    lock = _lockfile(root)
    source = lock or "package.json"
    out = [("install", Candidate((_node_install(cmd),), "node", source, 1, MANIFEST))
           for cmd in _node_installs(root, pkg)]
    scripts = _package_scripts(root)
    script = scripts.get("test", "")
    if not script or script == _NPM_DEFAULT_TEST:
        return out
    line = line_of(text, '"test"')
    manager = _node_manager(lock)
    direct = runners.node_test_command(f"{manager} test", scripts)
    if direct:
        out.append(("test", Candidate((direct.command,), "node", "package.json", line,
                                      MANIFEST, direct.parser, direct.reports)))
    out.append(("test", Candidate((f"{manager} test",), "node", "package.json", line,
                                  MANIFEST, "tap" if "node --test" in script else "auto")))
    return out


def _lockfile(root: Path) -> str:
    for name in ("pnpm-lock.yaml", "yarn.lock", "package-lock.json", "npm-shrinkwrap.json"):
        if (root / name).is_file():
            return name
    return ""


def _node_manager(lock: str) -> str:
    return {"pnpm-lock.yaml": "pnpm", "yarn.lock": "yarn"}.get(lock, "npm")


def _node_installs(root: Path, pkg: dict) -> list[str]:
    """The install commands to try, the lockfile's own first. pnpm and yarn come through
    ``npx`` (the version ``packageManager`` names, else the lockfile's major version), so
    the sandbox needs only node and npm; the last resort is ``npm install``, lock ignored.

    >>> _node_installs(Path("/nonexistent"), {"packageManager": "pnpm@9.1.0"})
    ['npm install']
    """
    lock = _lockfile(root)
    manager = str(pkg.get("packageManager") or "")
    if lock == "pnpm-lock.yaml":
        version = manager if manager.startswith("pnpm@") else _pnpm_for(root / lock)
        first = f"npx --yes {version.split('+')[0]} install --frozen-lockfile"
    elif lock == "yarn.lock":
        berry = "__metadata:" in read_text(root / lock)[:2000]
        version = manager if manager.startswith("yarn@") else ("yarn@4" if berry else "yarn@1")
        if version.startswith("yarn@1"):
            first = f"npx --yes {version.split('+')[0]} install --frozen-lockfile --ignore-engines"
        else:
            first = (f"npx --yes -p @yarnpkg/cli-dist@{version.split('@')[1].split('+')[0]} "
                     "yarn install --immutable")
    elif lock:
        first = "npm ci"
    else:
        return ["npm install"]
    return [first, "npm install --no-package-lock"]


def _npx_managers(root: Path) -> dict[str, str]:
    """pnpm and yarn as ``npx`` names them, at the versions this repository needs."""
    pkg, _ = _package(root)
    manager = str(pkg.get("packageManager") or "").split("+")[0]
    pnpm = manager if manager.startswith("pnpm@") else _pnpm_for(root / "pnpm-lock.yaml")
    yarn = manager if manager.startswith("yarn@1") else "yarn@1"
    return {"pnpm": pnpm, "yarn": yarn}


def _pnpm_for(lockfile: Path) -> str:
    """The pnpm that reads a lockfile: ``lockfileVersion`` 9 -> pnpm 9, 6 -> pnpm 8, 5 -> pnpm 7."""
    m = re.search(r"lockfileVersion:\s*'?(\d+)", read_text(lockfile)[:500])
    major = int(m.group(1)) if m else 9
    return {5: "pnpm@7", 6: "pnpm@8"}.get(major, "pnpm@9")


def _rust(root: Path) -> list[tuple[str, Candidate]]:
    if not (root / "Cargo.toml").is_file():
        return []
    line = line_of(read_text(root / "Cargo.toml"), "[package]") or 1
    return [("install", Candidate(("cargo fetch",), "rust", "Cargo.toml", line, MANIFEST)),
            ("test", Candidate(("cargo test --offline --no-fail-fast",), "rust", "Cargo.toml",
                               line, MANIFEST, "cargo"))]


def _go(root: Path) -> list[tuple[str, Candidate]]:
    if not (root / "go.mod").is_file():
        return []
    return [("install", Candidate(("go mod download",), "go", "go.mod", 1, MANIFEST)),
            ("test", Candidate(("go test -json ./...",), "go", "go.mod", 1, MANIFEST,
                               "go-json"))]


def _java(root: Path) -> list[tuple[str, Candidate]]:
    if (root / "pom.xml").is_file():
        mvn = "./mvnw" if (root / "mvnw").is_file() else "mvn"
        return [("install", Candidate((f"{mvn} -B -q dependency:go-offline",), "java-maven",
                                      "pom.xml", 1, MANIFEST)),
                ("test", Candidate((f"{mvn} -B -o test",), "java-maven", "pom.xml", 1,
                                   MANIFEST, "junit", "**/target/surefire-reports/TEST-*.xml"))]
    gradle = next((n for n in ("build.gradle", "build.gradle.kts") if (root / n).is_file()), "")
    if gradle:
        cmd = "./gradlew" if (root / "gradlew").is_file() else "gradle"
        return [("install", Candidate((f"{cmd} --no-daemon dependencies",), "java-gradle",
                                      gradle, 1, MANIFEST)),
                ("test", Candidate((f"{cmd} --no-daemon --offline test",), "java-gradle",
                                   gradle, 1, MANIFEST, "junit", "**/build/test-results/**/*.xml"))]
    return []


def _cmake(root: Path) -> list[tuple[str, Candidate]]:
    text = read_text(root / "CMakeLists.txt")
    if not text:
        return []
    line = line_of(text, "enable_testing") or 1
    return [("install", Candidate(("cmake -S . -B build", "cmake --build build -j2"), "cmake",
                                  "CMakeLists.txt", 1, MANIFEST)),
            ("test", Candidate(("ctest --test-dir build --output-on-failure",), "cmake",
                               "CMakeLists.txt", line, MANIFEST, "ctest"))]


def _make(root: Path) -> list[tuple[str, Candidate]]:
    text = read_text(root / "Makefile")
    out = []
    for target in ("test", "check"):
        m = re.search(rf"^{target}\s*:", text, re.M)
        if m:
            out.append(("test", Candidate((f"make {target}",), "make", "Makefile",
                                          text.count("\n", 0, m.start()) + 1, MANIFEST, "auto")))
    return out

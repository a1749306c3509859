"""Verify an environment by running it, and validate a task against a verified environment.

``verify_environment``: for one repository work tree, try the ranked install candidates (in
the sandbox, network on, the environment directory writable), then the test candidates of
the same toolchain (network off, the environment read-only), each ``runs`` times. An
environment is verified only when all of these hold:

1. the runner's output was read test by test (a JUnit, TAP or JSON report, or a runner's
   per-test lines): an exit code alone never verifies, and the drop names the runner that
   could not be read (``no_per_test_results``);
2. at least ``min_passed`` tests pass and the pass rate (passed over passed + failed, flaky
   tests left out) is at least ``min_pass_rate``; the failing tests are kept as known
   failures (never PASS_TO_PASS);
3. a fresh checkout at the same commit, readied by the spec's ``ready`` steps (the tree's
   own re-install: editable install, generated version files, compiled extensions, the
   package's build scripts), gives the same counts of passed, failed and skipped tests
   (``fresh_tree_mismatch`` otherwise, saying what differed): every task validation and
   rollout starts from such a checkout;
4. in that fresh tree, the repository's own packages resolve under the work tree or to the
   environment's install of it (``proof``): host packages are hidden in the sandbox, and
   this records that the tests exercised the repository's code (``not_own_code``).

A test whose status changes between runs is flaky, and so is one whose name carries a
date or a time (parametrised with ``datetime.now()``); flaky tests count for neither side.

Installs are cached by content: the directory is named by the dependency-file hash,
toolchain and install commands, so the next commit with the same dependency files costs a
test run, not an install. When a lockfile install fails because a locked version is gone
from the registry, the install is retried once without the lockfile, and the spec says so
(``install_notes``). Every attempt (install, test, reason, detail) is kept (``attempts``).

``validate_task``: in a fresh tree at ``base_commit``, readied like the verification's
fresh tree, apply ``test_patch`` and run the tests, then apply ``patch`` and run them
again. ``FAIL_TO_PASS`` are the tests that did not pass before and pass after,
``PASS_TO_PASS`` those that pass in both and are not known failures.

Every failure is a drop with one machine-readable reason (``DROP_REASONS``).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from codecorpus.envs import discover as disc
from codecorpus.envs import results, toolchains
from codecorpus.envs import sandbox as sb
from codecorpus.envs import tree as tree_info

PATCH_DOES_NOT_APPLY = "patch_does_not_apply"
INSTALL_FAILED = "install_failed"
NO_TESTS_FOUND = "no_tests_found"
TEST_RUNNER_MISSING = "test_runner_missing"
NO_PER_TEST_RESULTS = "no_per_test_results"
NO_PASSING_TESTS = "no_passing_tests"
TOO_FEW_PASSED = "too_few_passed"
LOW_PASS_RATE = "low_pass_rate"
READY_FAILED = "ready_failed"
FRESH_TREE_MISMATCH = "fresh_tree_mismatch"
NOT_OWN_CODE = "not_own_code"
NO_FAIL_TO_PASS = "no_fail_to_pass"
FLAKY = "flaky"
NO_ENVIRONMENT = "no_environment"
OVER_MAX_PER_REPO = "over_max_per_repo"
DROP_REASONS = (PATCH_DOES_NOT_APPLY, INSTALL_FAILED, NO_TESTS_FOUND, TEST_RUNNER_MISSING,
                NO_PER_TEST_RESULTS, NO_PASSING_TESTS, TOO_FEW_PASSED, LOW_PASS_RATE,
                READY_FAILED, FRESH_TREE_MISMATCH, NOT_OWN_CODE, NO_FAIL_TO_PASS, FLAKY,
                NO_ENVIRONMENT, OVER_MAX_PER_REPO, *sb.VIOLATIONS)
COMPLETE = ".complete.json"
NOT_FOUND = 127  # the shell's exit status for a command it cannot find
MAX_RESULT_FILES = 200


class VerifyConfig(BaseModel):
    """How environments are verified and tasks validated."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    sandbox: sb.SandboxConfig = sb.SandboxConfig()
    install_limits: sb.Limits = sb.Limits(wall_seconds=1200)
    cache_dir: str = Field(..., description="installed environments, one directory per key")
    runs: int = Field(3, ge=1, description="test runs; a status that changes is flaky")
    max_installs: int = Field(3, ge=1, description="install candidates tried per toolchain")
    max_tests: int = Field(3, ge=1, description="test candidates tried per install")
    min_passed: int = Field(5, ge=1, description="passing tests a verified environment needs")
    min_pass_rate: float = Field(0.8, ge=0, le=1,
                                 description="passed / (passed + failed) a verified environment needs")


@dataclass(frozen=True)
class Step:
    """One sandboxed command and what it cost."""

    phase: str
    command: str
    exit_code: int | None
    violation: str | None
    wall_seconds: float
    cpu_seconds: float
    output_tail: str = ""


@dataclass
class Verification:
    """The outcome of verifying one repository version."""

    verified: bool
    reason: str | None
    toolchain: str = ""
    toolchain_version: str = ""
    install: tuple[str, ...] = ()
    install_source: tuple[str, int] = ("", 0)
    test: str = ""
    test_source: tuple[str, int] = ("", 0)
    parser: str = ""
    reports: str = ""
    cache_key: str = ""
    dependency_hash: str = ""
    cached: bool = False
    install_seconds: float = 0.0
    test_seconds: float = 0.0
    cpu_seconds: float = 0.0
    tests: dict[str, str] = field(default_factory=dict)
    flaky: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    detail: str = ""
    """What the reason rests on, for a person: the runner that could not be read, the counts."""
    runner: str = ""
    ready: tuple[str, ...] = ()
    """Commands that ready a fresh checkout of this version for the installed environment."""
    fresh_tests: dict[str, str] = field(default_factory=dict)
    """Statuses of the test run in the fresh checkout."""
    proof: dict = field(default_factory=dict)
    """Where the repository's own packages resolved in the fresh checkout."""
    install_notes: tuple[str, ...] = ()
    system_packages: tuple[str, ...] = ()
    """Debian packages an image needs besides the toolchain (git for VCS-versioned builds)."""
    attempts: list[dict] = field(default_factory=list)
    wall_seconds: float = 0.0

    @property
    def known_failures(self) -> list[str]:
        """Tests that fail in the verified environment: never PASS_TO_PASS."""
        return sorted(t for t, s in self.tests.items() if s == results.FAILED)


@dataclass
class TaskValidation:
    """The outcome of validating one task candidate."""

    valid: bool
    reason: str | None
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0
    steps: list[Step] = field(default_factory=list)


# ---------------------------------------------------------------- running


def _sandbox_for(cfg: VerifyConfig, chain: str, env_dir: Path | None,
                 install: bool) -> tuple[sb.SandboxConfig, toolchains.Toolchain]:
    inside = sb.ENV if cfg.sandbox.kind == "bwrap" else str(env_dir or "")
    tc = toolchains.toolchain(chain, inside)
    box = toolchains.with_toolchain(cfg.sandbox, tc)
    if install:
        box = box.model_copy(update={"limits": cfg.install_limits})
    return box, tc


def _step(phase: str, res: sb.RunResult) -> Step:
    tail = (res.stdout + res.stderr)[-2000:]
    return Step(phase, res.command, res.exit_code, res.violation, round(res.wall_seconds, 3),
                round(res.cpu_seconds, 3), tail)


_LOCKED = re.compile(r"^(npm ci|yarn install --frozen-lockfile|yarn install --immutable"
                     r"|pnpm install --frozen-lockfile)\b")
_GONE = re.compile(r"ETARGET|E404|No matching version found|notarget|404 Not Found|"
                   r"is not in (?:this|the npm) registry|Couldn't find any versions|"
                   r"ERR_PNPM_NO_MATCHING_VERSION|ERR_PNPM_FETCH_404|ERR_PNPM_OUTDATED_LOCKFILE|"
                   r"npm ci. can only install packages when your package.json and package-lock")


def without_lock(command: str) -> str | None:
    """The same install with the lockfile ignored, for a lockfile install; else None.

    >>> without_lock("npm ci"), without_lock("pnpm install --frozen-lockfile"), without_lock("make")
    ('npm install --no-package-lock', 'pnpm install --no-lockfile', None)
    """
    m = _LOCKED.match(command)
    if not m:
        return None
    rest = command[m.end():]
    manager = m.group(1).split()[0]
    flag = {"npm": "install --no-package-lock", "yarn": "install --no-lockfile",
            "pnpm": "install --no-lockfile"}[manager]
    return f"{manager} {flag}{rest}"


def _install(work: Path, commands: tuple[str, ...], chain: str, cfg: VerifyConfig,
             env_dir: Path, steps: list[Step], phase: str = "install",
             ) -> tuple[str | None, tuple[str, ...], tuple[str, ...]]:
    """Run install commands in order: (failure reason or None, the commands that ran, notes).
    A lockfile install that failed on a version the registry no longer serves is retried
    once without the lockfile."""
    box, _ = _sandbox_for(cfg, chain, env_dir, install=True)
    ran, notes = [], []
    for command in commands:
        res = sb.run(command, work, box, env_dir=env_dir, network=phase != "ready",
                     env_writable=True, merge_stderr=True)
        steps.append(_step(phase, res))
        retry = without_lock(command)
        gone = _GONE.search(res.stdout[-20000:]) if retry and res.exit_code not in (0, None) else None
        if gone:
            evidence = next((ln.strip()[:200] for ln in res.stdout[-20000:].splitlines()
                             if _GONE.search(ln)), gone.group(0))
            notes.append(f"{command}: a locked version is gone ({evidence}); "
                         f"retried without the lockfile: {retry}")
            command = retry
            res = sb.run(command, work, box, env_dir=env_dir, network=True, env_writable=True,
                         merge_stderr=True)
            steps.append(_step(phase, res))
        ran.append(command)
        if res.violation and res.violation != sb.DAEMON_LEFT_BEHIND:
            return res.violation, tuple(ran), tuple(notes)
        if res.exit_code != 0:
            return (READY_FAILED if phase == "ready" else INSTALL_FAILED), tuple(ran), tuple(notes)
    return None, tuple(ran), tuple(notes)


def _link_node_modules(work: Path, env_dir: Path, fresh: bool, cfg: VerifyConfig) -> None:
    """Node installs into the work tree: move ``node_modules`` into the environment once,
    and link it back into every tree (Node resolves through the link). The link names the
    path the sandboxed command sees. An empty ``node_modules/.cache`` is made in the
    environment so the sandbox can cover it with a writable tmpfs while testing."""
    link, store = work / "node_modules", env_dir / "node_modules"
    if fresh and link.is_dir() and not link.is_symlink():
        shutil.move(str(link), str(store))
    if store.is_dir() and not (store / ".cache").exists():  # an environment cached before
        (store / ".cache").mkdir()
    if link.is_symlink():
        link.unlink()
    if store.is_dir() and not link.exists():
        link.symlink_to(f"{sb.ENV}/node_modules" if cfg.sandbox.kind == "bwrap" else store)


def _inside(path: str, root: Path) -> bool:
    """``path`` is a regular file under ``root`` reached through no symlink: a report path
    that a link (the file's own or a folder's on the way) leads out of the tree is never read
    or removed, since the tree and the results folder are the repository's to write."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if rel.startswith(os.pardir) or os.path.isabs(rel):
        return False
    step = os.path.abspath(root)
    for part in rel.split(os.sep):
        step = os.path.join(step, part)
        if os.path.islink(step):
            return False
    return os.path.isfile(step)


def _read_reports(work: Path, pattern: str, results_dir: Path | None = None) -> list[bytes]:
    """The report files a test run wrote: everything in ``$CODECORPUS_RESULTS`` and the
    files matching the candidate's ``reports`` glob, each up to ``results.MAX_REPORT_BYTES``.
    Only files that are really inside those folders are read (``_inside``)."""
    paths = [(p, work) for p in sorted(glob.glob(str(work / pattern), recursive=True))] if pattern else []
    if results_dir:
        paths += [(str(p), results_dir) for p in sorted(Path(results_dir).rglob("*"))]
    out = []
    for path in [p for p, r in paths if _inside(p, r)][:MAX_RESULT_FILES]:
        with contextlib.suppress(OSError):
            if os.path.getsize(path) <= results.MAX_REPORT_BYTES:
                out.append(Path(path).read_bytes())
    return out


def _clear_reports(work: Path, pattern: str) -> None:
    for path in glob.glob(str(work / pattern), recursive=True) if pattern else ():
        if _inside(path, work):
            with contextlib.suppress(OSError):
                os.remove(path)


def run_tests(work: Path, command: str, parser: str, reports: str, chain: str,
              cfg: VerifyConfig, env_dir: Path | None, steps: list[Step],
              ) -> tuple[results.TestReport | None, str | None, float]:
    """One sandboxed test run: its per-test report, its violation, its wall seconds.

    The command sees ``$CODECORPUS_RESULTS``, an empty writable directory outside the work
    tree; every file written there, and every file matching ``reports``, is handed to
    ``results.parse``."""
    box, tc = _sandbox_for(cfg, chain, env_dir, install=False)
    _clear_reports(work, reports)
    with tempfile.TemporaryDirectory(prefix="results-") as out_dir:
        os.chmod(out_dir, 0o755)
        res = sb.run(command, work, box, env_dir=env_dir, extra_env=tc.test_env,
                     merge_stderr=True, results_dir=Path(out_dir))
        steps.append(_step("test", res))
        if res.violation and res.violation != sb.DAEMON_LEFT_BEHIND:
            return None, res.violation, res.wall_seconds
        files = _read_reports(work, reports, Path(out_dir))
    report = results.parse(parser, res.stdout, res.stderr, res.exit_code, junit=files, command=command)
    violation = res.violation  # a daemon left behind is recorded, the results still count
    return report, violation, res.wall_seconds


_TIME_IN_NAME = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T_]\d{2}[:_-]\d{2}|\d{2}:\d{2}:\d{2}|datetime\.datetime\(\d{4}|"
    r"(?<!\d)\d{8}[T_]\d{6}(?!\d)|(?<![\d.])1[5-9]\d{8}(?:\.\d+)?(?![\d.])")


def names_time(test_id: str) -> bool:
    """Whether a test id carries a clock reading (a date and time, a time of day, epoch
    seconds): such a name differs on every run, so the test is flaky by construction.

    >>> names_time("t.py::test_at[2026-12-07 02:47:27.1]"), names_time("t.py::test_x[3]")
    (True, False)
    >>> names_time("t.T.test_at_20261207T024727"), names_time("t.py::test_v[1.2.3]")
    (True, False)
    """
    return bool(_TIME_IN_NAME.search(test_id))


def repeated(reports: list[results.TestReport]) -> tuple[dict[str, str], list[str]]:
    """Statuses stable across runs, and the flaky test ids (status changed, went missing, or
    the name carries the time).

    >>> a = results.TestReport("t", {"x": "passed", "y": "failed"})
    >>> b = results.TestReport("t", {"x": "passed", "y": "passed"})
    >>> repeated([a, b])
    ({'x': 'passed'}, ['y'])
    """
    ids = sorted({t for r in reports for t in r.tests})
    stable, flaky = {}, []
    for t in ids:
        seen = {r.tests.get(t) for r in reports}
        if len(seen) == 1 and not names_time(t):
            stable[t] = seen.pop()
        else:
            flaky.append(t)
    return stable, flaky


def counts(tests: dict[str, str]) -> dict[str, int]:
    """Passed, failed and skipped counts of a status map."""
    values = list(tests.values())
    return {s: values.count(s) for s in (results.PASSED, results.FAILED, results.SKIPPED)}


def _counts_text(c: dict[str, int]) -> str:
    return f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"


_MISSING_RUNNER = re.compile(r"No module named (?:pytest|nose2?|unittest)\b|: not found\b|"
                             r"command not found|Cannot find module '[^']*(?:mocha|ava|jest|"
                             r"vitest|tap|nyc|c8)[^']*'")


# ---------------------------------------------------------------- the own-code proof


# find_spec does not import (no repository code runs); a package the tests reach through
# ``src`` (pytest's ``pythonpath``, a conftest) is looked up there second.
_PY_PROBE = ("import importlib.util, json, os, sys\n"
             "def find(name):\n"
             "    try:\n"
             "        spec = importlib.util.find_spec(name)\n"
             "    except (ImportError, ValueError):\n"
             "        return None\n"
             "    return spec and (spec.origin or (list(spec.submodule_search_locations or [''])[0]))\n"
             "out = {n: find(n) for n in sys.argv[1:]}\n"
             "sys.path.insert(0, os.path.abspath('src'))\n"
             "importlib.invalidate_caches()\n"
             "out = {n: o or find(n) for n, o in out.items()}\n"
             "print('CODECORPUS-PROOF ' + json.dumps(out))\n")
_NODE_PROBE = ("let r = null; try { r = require.resolve(process.argv[1], {paths: [process.cwd()]}) }"
               " catch (e) {} console.log('CODECORPUS-PROOF ' + JSON.stringify({[process.argv[1]]: r}))")


def prove_own_code(tree: Path, chain: str, cfg: VerifyConfig, env_dir: Path | None,
                   steps: list[Step]) -> dict:
    """Where the repository's own packages resolve inside the sandbox, as the tests see
    them: ``{"packages": {name: {"origin": path, "where": ...}}, "own": bool}``. ``where`` is
    ``work tree``, ``environment install of the work tree`` (a copy whose bytes equal the
    tree's file), ``elsewhere`` or ``not found``; ``own`` holds when no package resolves
    elsewhere and (for Python) at least one resolves to the tree or its install. Compiled
    toolchains build the work tree itself."""
    if chain == "python":
        names = tree_info.own_packages(tree)
        command = "python -c " + shlex.quote(_PY_PROBE) + " " + " ".join(names)
    elif chain == "node":
        name = tree_info.package_name(tree)
        names = [name] if name else []
        command = "node -e " + shlex.quote(_NODE_PROBE) + " " + shlex.quote(name)
    else:
        return {"method": "built from the work tree", "packages": {}, "own": True}
    if not names:
        return {"method": "no importable package in the tree: the tests' own files",
                "packages": {}, "own": True}
    box, tc = _sandbox_for(cfg, chain, env_dir, install=False)
    res = sb.run(command, tree, box, env_dir=env_dir, extra_env=tc.test_env, merge_stderr=True)
    steps.append(_step("proof", res))
    m = re.search(r"^CODECORPUS-PROOF (.*)$", res.stdout, re.M)
    origins = json.loads(m.group(1)) if m else {}
    packages = {n: {"origin": origins.get(n), "where": _where(origins.get(n), tree, env_dir, chain)}
                for n in names}
    wheres = [p["where"] for p in packages.values()]
    found = [w for w in wheres if w != "not found"]
    own = "elsewhere" not in wheres and (bool(found) or chain == "node")
    return {"method": "import resolution in the fresh tree", "packages": packages, "own": own}


def _where(origin: str | None, tree: Path, env_dir: Path | None, chain: str) -> str:
    """Where one resolved module lies: in the work tree, in the environment as a copy of
    the tree's file, elsewhere, or nowhere. Paths are the sandbox's (``/workspace``,
    ``/env``), or the host's for ``kind: none``."""
    if not origin:
        return "not found"
    for work in (sb.WORK, str(tree)):
        if origin.startswith(work + "/") and "/node_modules/" not in origin:
            return "work tree"
    for inside in ((sb.ENV, str(env_dir)) if env_dir else ()):
        if origin.startswith(inside + "/") and chain == "python":
            host_file = Path(str(env_dir) + origin[len(inside):])
            if tree_info.same_as_tree_file(host_file, tree):
                return "environment install of the work tree"
    return "elsewhere"


# ---------------------------------------------------------------- environments


def _cached_env(cfg: VerifyConfig, key: str) -> Path | None:
    path = Path(cfg.cache_dir) / key
    return path if (path / COMPLETE).is_file() else None


def _prepare_env(work: Path, cand: disc.Candidate, cfg: VerifyConfig, key: str,
                 steps: list[Step]) -> tuple[Path | None, str | None, bool, tuple, tuple]:
    """The environment directory for an install candidate: cached, or installed now.
    Returns (directory, failure reason, was cached, commands that ran, install notes)."""
    cacheable = cand.toolchain in toolchains.CACHEABLE
    found = _cached_env(cfg, key) if cacheable else None
    if found:
        if cand.toolchain == "node":
            _link_node_modules(work, found, False, cfg)
        done = json.loads((found / COMPLETE).read_text())
        return (found, None, True, tuple(done.get("commands", cand.commands)),
                tuple(done.get("notes", ())))
    Path(cfg.cache_dir).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cfg.cache_dir))
    tmp.chmod(0o755)  # a later worker's sandbox uid reads it
    reason, ran, notes = _install(work, cand.commands, cand.toolchain, cfg, tmp, steps)
    if reason:
        shutil.rmtree(tmp, ignore_errors=True)
        return None, reason, False, ran, notes
    if cand.toolchain == "node":
        _link_node_modules(work, tmp, True, cfg)
    if not cacheable:
        return tmp, None, False, ran, notes
    (tmp / COMPLETE).write_text(json.dumps({"commands": list(ran), "notes": list(notes)}))
    final = Path(cfg.cache_dir) / key
    try:
        os.rename(tmp, final)
    except OSError:  # another worker installed the same key first: use theirs
        shutil.rmtree(tmp, ignore_errors=True)
    if cand.toolchain == "node":
        _link_node_modules(work, final, False, cfg)
    return final, None, False, ran, notes


@dataclass
class _Outcome:
    """One test candidate's runs: the failure reason (None: it holds) and its detail."""

    reason: str | None
    detail: str = ""


def _try_tests(work: Path, cand: disc.Candidate, chain: str, cfg: VerifyConfig,
               env_dir: Path | None, out: Verification) -> _Outcome:
    """Run one test candidate ``cfg.runs`` times into ``out`` and judge it by the rules."""
    reports, walls = [], []
    runner = tree_info.runner_of(cand.commands[0], work)
    for _ in range(cfg.runs):
        report, violation, wall = run_tests(work, cand.commands[0], cand.parser, cand.reports,
                                            chain, cfg, env_dir, out.steps)
        walls.append(wall)
        if report is None:
            return _Outcome(violation, f"{runner}: {violation}")
        if report.parser == "exit-code":
            return _exit_code_only(out.steps[-1], runner, cand.commands[0])
        reports.append(report)
    stable, flaky = repeated(reports)
    out.tests, out.flaky, out.runner = stable, flaky, runner
    out.parser, out.test_seconds = reports[0].parser, max(walls)
    out.test, out.test_source = cand.commands[0], (cand.source, cand.line)
    out.reports = cand.reports
    return judge(stable, flaky, cfg, runner)


def _exit_code_only(step: Step, runner: str, command: str) -> _Outcome:
    if step.exit_code == NOT_FOUND or _MISSING_RUNNER.search(step.output_tail):
        line = _MISSING_RUNNER.search(step.output_tail)
        return _Outcome(TEST_RUNNER_MISSING, f"{runner} is not installed in the environment"
                        + (f" ({line.group(0)})" if line else f" (`{command}`: exit 127)"))
    return _Outcome(NO_PER_TEST_RESULTS, f"no per-test results from {runner} (`{command}`, "
                    f"exit {step.exit_code}): its output was read as an exit code only")


def judge(stable: dict[str, str], flaky: list[str], cfg: VerifyConfig, runner: str) -> _Outcome:
    """The verification rules on one candidate's stable statuses.

    >>> c = VerifyConfig(cache_dir="/tmp")
    >>> judge({f"t{i}": "passed" for i in range(8)} | {"f1": "failed", "f2": "failed"}, [], c, "x").reason
    >>> judge({f"t{i}": "passed" for i in range(5)} | {f"f{i}": "failed" for i in range(5)}, [], c, "x").reason
    'low_pass_rate'
    """
    c = counts(stable)
    if not c["passed"]:
        reason = FLAKY if flaky else NO_PASSING_TESTS
        return _Outcome(reason, f"{runner}: {_counts_text(c)}, {len(flaky)} flaky")
    if c["passed"] < cfg.min_passed:
        return _Outcome(TOO_FEW_PASSED, f"{runner}: {c['passed']} passed, fewer than "
                        f"min_passed={cfg.min_passed} ({_counts_text(c)}, {len(flaky)} flaky)")
    rate = c["passed"] / (c["passed"] + c["failed"])
    if rate < cfg.min_pass_rate:
        return _Outcome(LOW_PASS_RATE, f"{runner}: pass rate {rate:.2f} below "
                        f"min_pass_rate={cfg.min_pass_rate} ({_counts_text(c)})")
    return _Outcome(None, f"{runner}: {_counts_text(c)}, {len(flaky)} flaky")


_REASON_ORDER = (sb.SANDBOX_VIOLATION, sb.TIMEOUT, sb.MEMORY_LIMIT,
                 sb.PROCESS_LIMIT, sb.OUTPUT_LIMIT, sb.FILE_SIZE_LIMIT,
                 sb.CPU_LIMIT, sb.SANDBOX_ERROR, NOT_OWN_CODE, FRESH_TREE_MISMATCH, READY_FAILED,
                 LOW_PASS_RATE, TOO_FEW_PASSED, FLAKY, NO_PASSING_TESTS, NO_PER_TEST_RESULTS,
                 TEST_RUNNER_MISSING, NO_TESTS_FOUND, INSTALL_FAILED)


def _worst(attempts: list[dict]) -> dict:
    """The attempt a failed verification is dropped for: the one that got furthest (a
    tree that ran tests outranks one that did not install; a violation outranks a miss)."""
    return min(attempts, key=lambda a: (_REASON_ORDER.index(a["reason"])
                                        if a["reason"] in _REASON_ORDER else 99))


Fresh = Callable[[Path], None]
"""Makes a fresh checkout of the version under verification at the given path."""


def verify_environment(work: Path, cfg: VerifyConfig, found: disc.Discovery | None = None,
                       fresh: Fresh | None = None) -> Verification:
    """Install and test one work tree in the sandbox, then reproduce the counts in a fresh
    tree (``fresh`` makes one; by default a copy of ``work`` as it was before any install,
    made a one-commit git repository). The first install + test pair that holds every rule
    wins. The tree is the sandbox's to write (a root caller hands it to the sandbox uid):
    pass a tree made for it (``verify_revision`` does)."""
    work = Path(work)
    found = found or disc.discover(work)
    with tempfile.TemporaryDirectory(prefix="pristine-") as keep:
        if fresh is None:
            pristine = Path(keep) / "tree"
            shutil.copytree(work, pristine, symlinks=True)
            fresh = copy_of(pristine)
        return _verify(work, cfg, found, fresh)


def copy_of(pristine: Path) -> Fresh:
    """A ``Fresh`` that copies ``pristine`` (a tree before any install)."""

    def make(dest: Path) -> None:
        shutil.copytree(pristine, dest, symlinks=True)
        if not (dest / ".git").exists():
            _git_init(dest, "pristine")

    return make


def _verify(work: Path, cfg: VerifyConfig, found: disc.Discovery, fresh: Fresh) -> Verification:
    attempts: list[dict] = []
    steps: list[Step] = []
    tests_by_chain: dict[str, list[disc.Candidate]] = {}
    for t in found.tests:
        tests_by_chain.setdefault(t.toolchain, []).append(t)
    tried: dict[str, int] = {}
    for inst in found.installs:
        if tried.get(inst.toolchain, 0) >= cfg.max_installs:
            continue
        tests = tests_by_chain.get(inst.toolchain, [])
        if not tests:
            continue
        tried.setdefault(inst.toolchain, 0)
        first = len(steps)
        out = _attempt(work, inst, tests, cfg, found, steps, attempts, fresh)
        if out.verified:
            return out
        if not _not_here(steps[first:], "install"):
            tried[inst.toolchain] += 1
    for chain, tests in tests_by_chain.items():  # test commands with no install of their own
        if chain not in tried:
            out = _attempt(work, disc.Candidate((), chain, "", 0, disc.CONVENTION), tests,
                           cfg, found, steps, attempts, fresh)
            if out.verified:
                return out
    worst = _worst(attempts) if attempts else {"reason": NO_TESTS_FOUND,
                                               "detail": "no install and test candidates"}
    fail = Verification(False, worst["reason"], dependency_hash=found.dependency_hash,
                        steps=steps, detail=worst.get("detail", ""), attempts=attempts)
    fail.runner = worst.get("runner", "")
    fail.tests = worst.get("tests", {})
    fail.fresh_tests, fail.proof = worst.get("fresh_tests", {}), worst.get("proof", {})
    fail.cpu_seconds = round(sum(s.cpu_seconds for s in steps), 3)
    fail.wall_seconds = round(sum(s.wall_seconds for s in steps), 3)
    return fail


def _attempt(work: Path, inst: disc.Candidate, tests: list[disc.Candidate], cfg: VerifyConfig,
             found: disc.Discovery, steps: list[Step], attempts: list[dict],
             fresh: Fresh) -> Verification:
    tc = toolchains.toolchain(inst.toolchain, sb.ENV)
    key = disc.cache_key(found.dependency_hash, inst.toolchain, tc.version, inst.commands)
    out = Verification(False, None, inst.toolchain, tc.version, inst.commands,
                       (inst.source, inst.line), cache_key=key,
                       dependency_hash=found.dependency_hash, steps=steps, attempts=attempts)
    first = len(steps)
    env_dir, reason, out.cached, ran, out.install_notes = _prepare_env(work, inst, cfg, key, steps)
    out.install = ran if ran and not reason else inst.commands
    out.install_seconds = round(sum(s.wall_seconds for s in steps[first:]), 3)
    if reason:
        tail = steps[-1].output_tail[-300:] if len(steps) > first else ""
        attempts.append({"install": list(ran or inst.commands), "test": "", "reason": reason,
                         "detail": f"{ran[-1] if ran else ''}: {tail.strip()}",
                         "notes": list(out.install_notes)})
        out.reason = reason
        _finish(out, steps)
        return out
    out.ready = tree_info.ready_steps(out.install, inst.toolchain, work)
    reason = _install_build_requirements(work, inst.toolchain, cfg, env_dir, out, steps)
    if reason:
        attempts.append({"install": list(out.install), "test": "", "reason": reason,
                         "detail": f"{out.install[-1]}: {steps[-1].output_tail[-300:].strip()}",
                         "notes": list(out.install_notes)})
        out.reason = reason
        _finish(out, steps)
        return out
    out.system_packages = tree_info.system_packages(work, inst.toolchain)
    ran_tests = 0
    for cand in tests:
        if ran_tests >= cfg.max_tests:
            break
        first = len(steps)
        out.tests, out.flaky, out.fresh_tests, out.proof = {}, [], {}, {}
        outcome = _try_tests(work, cand, inst.toolchain, cfg, env_dir, out)
        if outcome.reason is None:
            outcome = _reproduce(inst, cand, cfg, env_dir, out, fresh)
        attempts.append({"install": list(out.install), "test": cand.commands[0],
                         "reason": outcome.reason, "detail": outcome.detail,
                         "runner": out.runner or tree_info.runner_of(cand.commands[0], work),
                         "tests": dict(out.tests) if outcome.reason else {},
                         "fresh_tests": dict(out.fresh_tests) if outcome.reason else {},
                         "proof": dict(out.proof) if outcome.reason else {},
                         "notes": list(out.install_notes)})
        if outcome.reason is None:
            out.verified, out.reason, out.detail = True, None, outcome.detail
            break
        out.reason, out.detail = outcome.reason, outcome.detail
        ran_tests += not _not_here(steps[first:], "test")
    _finish(out, steps)
    if env_dir and inst.toolchain not in toolchains.CACHEABLE:
        shutil.rmtree(env_dir, ignore_errors=True)
    return out


def _install_build_requirements(work: Path, chain: str, cfg: VerifyConfig, env_dir: Path | None,
                                out: Verification, steps: list[Step]) -> str | None:
    """Ready steps rebuild the tree without build isolation and with no network (as a
    session and a grading will): the build backend's own requirements go into the
    environment now, with the install's rights, and into the spec's install list."""
    if chain != "python" or not env_dir or not any("--no-build-isolation" in r for r in out.ready):
        return None
    # setuptools and wheel too: a task's base commit may predate the tree's own backend
    # (an older setup.py of a project now on flit or hatchling) and still use this environment
    requires = [*tree_info.build_requirements(work), "setuptools", "wheel"]
    # --upgrade: the newest release that satisfies them, as build isolation would take (a venv's
    # own older setuptools rejects newer pyproject metadata such as an SPDX `license` string)
    command = ("python -m pip install --upgrade " + " ".join(shlex.quote(r) for r in requires)
               + " && python -c " + shlex.quote(tree_info.BACKEND_REQUIRES))
    out.install = (*out.install, command)
    if out.cached:  # the verification that made the cached environment installed them
        return None
    reason, _, _ = _install(work, (command,), chain, cfg, env_dir, steps)
    return reason


def _finish(out: Verification, steps: list[Step]) -> None:
    out.cpu_seconds = round(sum(s.cpu_seconds for s in steps), 3)
    out.wall_seconds = round(sum(s.wall_seconds for s in steps), 3)


def _reproduce(inst: disc.Candidate, cand: disc.Candidate, cfg: VerifyConfig,
               env_dir: Path | None, out: Verification, fresh: Fresh) -> _Outcome:
    """The verified counts again in a fresh checkout readied by ``out.ready``, and the
    proof that the tests there import the repository's own code."""
    with tempfile.TemporaryDirectory(prefix="fresh-") as tmp:
        tree = Path(tmp) / "tree"
        fresh(tree)
        if inst.toolchain == "node" and env_dir:
            _link_node_modules(tree, env_dir, False, cfg)
        if env_dir and out.ready:
            reason, _, _ = _install(tree, out.ready, inst.toolchain, cfg, env_dir, out.steps,
                                    phase="ready")
            if reason:
                return _Outcome(reason, f"a ready step failed in the fresh tree: "
                                f"{out.steps[-1].command}: {out.steps[-1].output_tail[-300:].strip()}")
        report, violation, _ = run_tests(tree, cand.commands[0], cand.parser, cand.reports,
                                         inst.toolchain, cfg, env_dir, out.steps)
        if report is None:
            return _Outcome(violation, f"fresh tree: {violation}")
        out.fresh_tests = {t: s for t, s in report.tests.items()
                           if t not in out.flaky and not names_time(t)}
        mismatch = fresh_mismatch(out.tests, out.fresh_tests)
        if mismatch:
            return _Outcome(FRESH_TREE_MISMATCH, mismatch)
        out.proof = prove_own_code(tree, inst.toolchain, cfg, env_dir, out.steps)
    if not out.proof.get("own"):
        where = {n: p["where"] for n, p in out.proof.get("packages", {}).items()}
        return _Outcome(NOT_OWN_CODE, f"the repository's packages resolve {where}, not to the "
                        "work tree or the environment's install of it")
    return _Outcome(None, f"{out.runner}: {_counts_text(counts(out.tests))}, reproduced in a "
                    "fresh tree")


def fresh_mismatch(install_tree: dict[str, str], fresh_tree_tests: dict[str, str]) -> str:
    """What differs between the install tree's stable statuses and a fresh tree's ("" when
    the counts agree).

    >>> fresh_mismatch({"a": "passed", "b": "passed"}, {"a": "passed", "b": "skipped"})
    'install tree: 2 passed, 0 failed, 0 skipped; fresh tree: 1 passed, 0 failed, 1 skipped; e.g. b: passed -> skipped'
    """
    a, b = counts(install_tree), counts(fresh_tree_tests)
    if a == b:
        return ""
    changed = [f"{t}: {install_tree.get(t, 'missing')} -> {fresh_tree_tests.get(t, 'missing')}"
               for t in sorted(set(install_tree) | set(fresh_tree_tests))
               if install_tree.get(t) != fresh_tree_tests.get(t)]
    return (f"install tree: {_counts_text(a)}; fresh tree: {_counts_text(b)}; e.g. "
            + "; ".join(changed[:3]))


def _not_here(steps: list[Step], phase: str) -> bool:
    """Whether the last ``phase`` step of an attempt failed for a program the sandbox does
    not have (exit 127: ``uv``, ``uvx``, ``hatch`` ...): a candidate that could not start
    is not one of the ``max_installs``/``max_tests`` tried."""
    last = [s for s in steps if s.phase == phase][-1:]
    return bool(last) and last[0].exit_code == NOT_FOUND and last[0].violation is None


def verify_revision(repo: Path, commit: str, cfg: VerifyConfig) -> Verification:
    """Verify the environment of ``repo`` at ``commit`` in a fresh checkout, reproduced in
    another, leaving the repository as it was (the sandbox takes ownership of the trees)."""
    with tempfile.TemporaryDirectory(prefix="env-") as tmp:
        tree = Path(tmp) / "tree"
        fresh_tree(Path(repo), commit, tree)
        return verify_environment(tree, cfg, fresh=lambda dest: fresh_tree(Path(repo), commit, dest))


def environment_dir(cfg: VerifyConfig, env: Verification) -> Path | None:
    """The cached installed environment a verification used (None for per-commit builds)."""
    return _cached_env(cfg, env.cache_key) if env.toolchain in toolchains.CACHEABLE else None


# ---------------------------------------------------------------- tasks


def run_git(repo: Path, *args: str, stdin: bytes | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """git itself (never the repository's code) on a repository: no system config, no prompt."""
    full_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", **(env or {})}
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(repo), *args],
                          input=stdin, capture_output=True, env=full_env, timeout=600, check=False)



def fresh_tree(repo: Path, commit: str, dest: Path) -> None:
    """``dest`` holds ``commit``'s files, read from the repository's tree (every file,
    ``export-ignore`` or not: ``git archive`` would drop ``.github/`` for some), and a
    one-commit git repository carrying the tags that point at ``commit`` (VCS-versioned
    builds such as setuptools-scm and hatch-vcs read them); none of the repository's other
    history or hooks come along."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="index-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        for args in (("read-tree", commit), ("checkout-index", "-a", "-f")):
            res = run_git(repo, f"--work-tree={dest}", *args, env=index)
            if res.returncode != 0:
                raise ValueError(f"git {args[0]} {commit} in {repo} failed: "
                                 f"{res.stderr.decode(errors='replace')[:300]}")
    tags = run_git(repo, "tag", "--points-at", commit).stdout.decode().split()
    _git_init(dest, commit, tags)


def _git_init(dest: Path, message: str, tags: list[str] | tuple[str, ...] = ()) -> None:
    """Make ``dest`` a one-commit git repository of its files (fixed author and dates)."""
    env = {"GIT_AUTHOR_DATE": "1980-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "1980-01-01T00:00:00Z"}
    for args in (("init", "-q"), ("add", "-A"),
                 ("-c", "user.name=codecorpus", "-c", "user.email=codecorpus@localhost",
                  "commit", "-q", "--no-verify", "--allow-empty", "-m", message),
                 *(("tag", t) for t in tags if re.fullmatch(r"[\w.+/-]+", t))):
        subprocess.run(["git", "-c", "safe.directory=*", "-c", "init.defaultBranch=main",
                        "-C", str(dest), *args], env={**os.environ, **env},
                       capture_output=True, check=False)


def apply_patch(tree: Path, patch: str) -> bool:
    """``git apply`` a unified diff to a tree; False when it does not apply."""
    if not patch.strip():
        return True
    res = run_git(tree, "apply", "--whitespace=nowarn", "-", stdin=patch.encode())
    return res.returncode == 0


def _state(tree: Path, env: Verification, cfg: VerifyConfig, env_dir: Path | None,
           steps: list[Step]) -> tuple[dict[str, str], list[str], str | None]:
    """Stable statuses and flaky ids of the tree as it is now, readied first (the spec's
    ready steps: a per-commit build, or the tree's re-install into the environment)."""
    if env_dir and env.ready:
        reason, _, _ = _install(tree, env.ready, env.toolchain, cfg, env_dir, steps, phase="ready")
        if reason:
            return {}, [], reason
    reports = []
    for _ in range(cfg.runs):
        report, violation, _ = run_tests(tree, env.test, env.parser, env.reports, env.toolchain,
                                         cfg, env_dir, steps)
        if report is None:
            return {}, [], violation
        reports.append(report)
    stable, flaky = repeated(reports)
    return stable, flaky, None


def validate_task(repo: Path, base_commit: str, patch: str, test_patch: str,
                  env: Verification, cfg: VerifyConfig) -> TaskValidation:
    """FAIL_TO_PASS and PASS_TO_PASS of one task candidate, or the reason it is dropped."""
    if not env.verified:
        return TaskValidation(False, NO_ENVIRONMENT)
    steps: list[Step] = []
    with tempfile.TemporaryDirectory(prefix="task-") as tmp:
        tree = Path(tmp) / "tree"
        fresh_tree(repo, base_commit, tree)
        env_dir = _env_for_tree(tree, env, cfg, steps)
        if env_dir is False:
            return TaskValidation(False, INSTALL_FAILED, steps=steps)
        if not apply_patch(tree, test_patch):
            return TaskValidation(False, PATCH_DOES_NOT_APPLY, steps=steps)
        before, flaky_before, reason = _state(tree, env, cfg, env_dir, steps)
        if reason is None and not apply_patch(tree, patch):
            reason = PATCH_DOES_NOT_APPLY
        after, flaky_after, reason = (({}, [], reason) if reason else
                                      _state(tree, env, cfg, env_dir, steps))
        if env_dir and env.toolchain not in toolchains.CACHEABLE:
            shutil.rmtree(env_dir, ignore_errors=True)
    cpu = round(sum(s.cpu_seconds for s in steps), 3)
    if reason:
        return TaskValidation(False, reason, cpu_seconds=cpu, steps=steps)
    f2p = sorted(t for t, s in after.items() if s == results.PASSED
                 and before.get(t) != results.PASSED and t not in flaky_before)
    known = set(env.known_failures)
    p2p = sorted(t for t, s in after.items() if s == results.PASSED
                 and before.get(t) == results.PASSED and t not in known)
    flaky = set(flaky_before) | set(flaky_after)
    if not f2p:
        reason = FLAKY if flaky else NO_FAIL_TO_PASS
        return TaskValidation(False, reason, cpu_seconds=cpu, steps=steps)
    return TaskValidation(True, None, f2p, [t for t in p2p if t not in flaky], cpu, steps)


def _env_for_tree(tree: Path, env: Verification, cfg: VerifyConfig,
                  steps: list[Step]) -> Path | bool | None:
    """The environment directory for a fresh tree: the cached one (linked in for Node), or
    for per-commit builds (cmake, make) a new one, built again before each test state.
    False when the install fails."""
    cand = disc.Candidate(env.install, env.toolchain, *env.install_source, disc.MANIFEST)
    env_dir, reason, *_ = _prepare_env(tree, cand, cfg, env.cache_key, steps)
    if reason:
        return False
    return env_dir


def environment_for_tree(tree: Path, env: Verification, cfg: VerifyConfig,
                         steps: list[Step]) -> Path | bool | None:
    """The environment directory of a verified environment for a fresh tree (the node's
    cached install, made once when missing); False when the install fails. Sessions
    (``envs/session.py``) open their trees with it."""
    return _env_for_tree(tree, env, cfg, steps)


def verification_record(env: Verification) -> dict:
    """A JSON-ready dict of a verification (steps included)."""
    return asdict(env)


def validate_instances(repo: Path, instances: list[dict], env: Verification, cfg: VerifyConfig,
                       max_per_repo: int = 20, cpu_seconds: dict[str, float] | None = None,
                       ) -> tuple[list[dict], list[tuple[str, str]]]:
    """Validate a repository's SWE-bench task candidates: the newest ``max_per_repo`` (by
    ``created_at``) are run; each valid one comes back with ``FAIL_TO_PASS`` and
    ``PASS_TO_PASS`` filled (JSON-encoded lists, as SWE-bench's datasets hold them), each
    other one as ``(instance_id, reason)``. Candidates past the cap are dropped as
    ``over_max_per_repo``, so every input is accounted for. ``cpu_seconds``, when given,
    receives each validated candidate's sandboxed CPU-seconds by instance id."""
    ordered = sorted(instances, key=lambda r: (r.get("created_at") or "", r["instance_id"]),
                     reverse=True)
    kept, dropped = [], []
    for row in ordered[max_per_repo:]:
        dropped.append((row["instance_id"], OVER_MAX_PER_REPO))
    for row in ordered[:max_per_repo]:
        task = validate_task(repo, row["base_commit"], row["patch"], row["test_patch"], env, cfg)
        if cpu_seconds is not None:
            cpu_seconds[row["instance_id"]] = task.cpu_seconds
        if task.valid:
            kept.append({**row, "FAIL_TO_PASS": json.dumps(task.fail_to_pass),
                         "PASS_TO_PASS": json.dumps(task.pass_to_pass)})
        else:
            dropped.append((row["instance_id"], task.reason or NO_FAIL_TO_PASS))
    return kept, dropped

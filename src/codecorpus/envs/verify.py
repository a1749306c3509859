"""Verify an environment by running it, and validate a task against a verified environment.

``verify_environment``: for one repository work tree, try the ranked install candidates (in
the sandbox, network on, the environment directory writable), then the test candidates of
the same toolchain (network off, the environment read-only), each ``runs`` times. A test
whose status changes between runs is flaky. The environment is verified when it installs
and at least one test passes in every run. Installs are cached by content: the directory
is named by the dependency-file hash, toolchain and install commands, so the next commit
with the same dependency files costs a test run, not an install.

``validate_task``: in a fresh tree at ``base_commit`` (exported from git: the tests cannot
see later history), apply ``test_patch`` and run the tests (the touched tests must fail),
then apply ``patch`` and run them again (they must pass). ``FAIL_TO_PASS`` are the tests
that did not pass before and pass after, ``PASS_TO_PASS`` those that pass in both.

Every failure is a drop with one machine-readable reason (``DROP_REASONS``).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from codecorpus.envs import discover as disc
from codecorpus.envs import results, toolchains
from codecorpus.envs import sandbox as sb

PATCH_DOES_NOT_APPLY = "patch_does_not_apply"
INSTALL_FAILED = "install_failed"
NO_TESTS_FOUND = "no_tests_found"
NO_PASSING_TESTS = "no_passing_tests"
NO_FAIL_TO_PASS = "no_fail_to_pass"
FLAKY = "flaky"
NO_ENVIRONMENT = "no_environment"
OVER_MAX_PER_REPO = "over_max_per_repo"
DROP_REASONS = (PATCH_DOES_NOT_APPLY, INSTALL_FAILED, NO_TESTS_FOUND, NO_PASSING_TESTS,
                NO_FAIL_TO_PASS, FLAKY, NO_ENVIRONMENT, OVER_MAX_PER_REPO, *sb.VIOLATIONS)
COMPLETE = ".complete.json"
NOT_FOUND = 127  # the shell's exit status for a command it cannot find


class VerifyConfig(BaseModel):
    """How environments are verified and tasks validated."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    sandbox: sb.SandboxConfig = sb.SandboxConfig()
    install_limits: sb.Limits = sb.Limits(wall_seconds=1200)
    cache_dir: str = Field(..., description="installed environments, one directory per key")
    runs: int = Field(3, ge=1, description="test runs; a status that changes is flaky")
    max_installs: int = Field(3, ge=1, description="install candidates tried per toolchain")
    max_tests: int = Field(3, ge=1, description="test candidates tried per install")


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


def _install(work: Path, cand: disc.Candidate, cfg: VerifyConfig, env_dir: Path,
             steps: list[Step]) -> str | None:
    """Run an install candidate's commands in order; the failure reason, or None."""
    box, _ = _sandbox_for(cfg, cand.toolchain, env_dir, install=True)
    for command in cand.commands:
        res = sb.run(command, work, box, env_dir=env_dir, network=True, env_writable=True,
                          merge_stderr=True)
        steps.append(_step("install", res))
        if res.violation and res.violation != sb.DAEMON_LEFT_BEHIND:
            return res.violation
        if res.exit_code != 0:
            return INSTALL_FAILED
    return None


def _link_node_modules(work: Path, env_dir: Path, fresh: bool, cfg: VerifyConfig) -> None:
    """Node installs into the work tree: move ``node_modules`` into the environment once,
    and link it back into every tree (Node resolves through the link). The link names the
    path the sandboxed command sees."""
    link, store = work / "node_modules", env_dir / "node_modules"
    if fresh and link.is_dir() and not link.is_symlink():
        shutil.move(str(link), str(store))
    if link.is_symlink():
        link.unlink()
    if store.is_dir() and not link.exists():
        link.symlink_to(f"{sb.ENV}/node_modules" if cfg.sandbox.kind == "bwrap" else store)


def _read_reports(work: Path, pattern: str) -> list[bytes]:
    if not pattern:
        return []
    out = []
    for path in sorted(glob.glob(str(work / pattern), recursive=True)):
        with contextlib.suppress(OSError):
            if os.path.getsize(path) <= results.MAX_REPORT_BYTES:
                out.append(Path(path).read_bytes())
    return out


def _clear_reports(work: Path, pattern: str) -> None:
    for path in glob.glob(str(work / pattern), recursive=True) if pattern else ():
        with contextlib.suppress(OSError):
            os.remove(path)


def run_tests(work: Path, command: str, parser: str, reports: str, chain: str,
              cfg: VerifyConfig, env_dir: Path | None, steps: list[Step],
              ) -> tuple[results.TestReport | None, str | None, float]:
    """One sandboxed test run: its per-test report, its violation, its wall seconds."""
    box, tc = _sandbox_for(cfg, chain, env_dir, install=False)
    _clear_reports(work, reports)
    res = sb.run(command, work, box, env_dir=env_dir, extra_env=tc.test_env,
                      merge_stderr=True)
    steps.append(_step("test", res))
    if res.violation and res.violation != sb.DAEMON_LEFT_BEHIND:
        return None, res.violation, res.wall_seconds
    report = results.parse(parser, res.stdout, res.stderr, res.exit_code,
                           _read_reports(work, reports), command)
    violation = res.violation  # a daemon left behind is recorded, the results still count
    return report, violation, res.wall_seconds


def repeated(reports: list[results.TestReport]) -> tuple[dict[str, str], list[str]]:
    """Statuses stable across runs, and the flaky test ids (status changed or went missing).

    >>> a = results.TestReport("t", {"x": "passed", "y": "failed"})
    >>> b = results.TestReport("t", {"x": "passed", "y": "passed"})
    >>> repeated([a, b])
    ({'x': 'passed'}, ['y'])
    """
    ids = sorted({t for r in reports for t in r.tests})
    stable, flaky = {}, []
    for t in ids:
        seen = {r.tests.get(t) for r in reports}
        if len(seen) == 1:
            stable[t] = seen.pop()
        else:
            flaky.append(t)
    return stable, flaky


# ---------------------------------------------------------------- environments


def _cached_env(cfg: VerifyConfig, key: str) -> Path | None:
    path = Path(cfg.cache_dir) / key
    return path if (path / COMPLETE).is_file() else None


def _prepare_env(work: Path, cand: disc.Candidate, cfg: VerifyConfig, key: str,
                 steps: list[Step]) -> tuple[Path | None, str | None, bool]:
    """The environment directory for an install candidate: cached, or installed now.
    Returns (directory, failure reason, was cached)."""
    cacheable = cand.toolchain in toolchains.CACHEABLE
    found = _cached_env(cfg, key) if cacheable else None
    if found:
        if cand.toolchain == "node":
            _link_node_modules(work, found, False, cfg)
        return found, None, True
    Path(cfg.cache_dir).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cfg.cache_dir))
    tmp.chmod(0o755)  # a later worker's sandbox uid reads it
    reason = _install(work, cand, cfg, tmp, steps)
    if reason:
        shutil.rmtree(tmp, ignore_errors=True)
        return None, reason, False
    if cand.toolchain == "node":
        _link_node_modules(work, tmp, True, cfg)
    if not cacheable:
        return tmp, None, False
    (tmp / COMPLETE).write_text(json.dumps({"commands": list(cand.commands)}))
    final = Path(cfg.cache_dir) / key
    try:
        os.rename(tmp, final)
    except OSError:  # another worker installed the same key first: use theirs
        shutil.rmtree(tmp, ignore_errors=True)
    if cand.toolchain == "node":
        _link_node_modules(work, final, False, cfg)
    return final, None, False


def _try_tests(work: Path, cand: disc.Candidate, chain: str, cfg: VerifyConfig,
               env_dir: Path | None, out: Verification) -> str | None:
    """Run one test candidate ``cfg.runs`` times into ``out``; its failure reason or None."""
    reports, walls = [], []
    for _ in range(cfg.runs):
        report, violation, wall = run_tests(work, cand.commands[0], cand.parser, cand.reports,
                                            chain, cfg, env_dir, out.steps)
        walls.append(wall)
        if report is None:
            return violation
        if cand.parser not in ("auto", "exit-code") and report.parser == "exit-code":
            return NO_TESTS_FOUND  # the named runner printed no test: it ran nothing
        reports.append(report)
    stable, flaky = repeated(reports)
    out.tests, out.flaky = stable, flaky
    out.parser, out.test_seconds = reports[0].parser, max(walls)
    out.test, out.test_source = cand.commands[0], (cand.source, cand.line)
    out.reports = cand.reports
    if any(s == results.PASSED for s in stable.values()):
        return None
    if flaky:
        return FLAKY
    only_exit = all(r.parser == "exit-code" for r in reports)
    return NO_TESTS_FOUND if only_exit else NO_PASSING_TESTS


_REASON_ORDER = (sb.SANDBOX_VIOLATION, sb.TIMEOUT, sb.MEMORY_LIMIT,
                 sb.PROCESS_LIMIT, sb.OUTPUT_LIMIT, sb.FILE_SIZE_LIMIT,
                 sb.CPU_LIMIT, sb.SANDBOX_ERROR, FLAKY, NO_PASSING_TESTS,
                 NO_TESTS_FOUND, INSTALL_FAILED)


def _worst(reasons: list[str]) -> str:
    """The reason a failed verification is dropped for: a violation outranks a plain miss."""
    return min(reasons, key=lambda r: _REASON_ORDER.index(r) if r in _REASON_ORDER else 99)


def verify_environment(work: Path, cfg: VerifyConfig,
                       found: disc.Discovery | None = None) -> Verification:
    """Install and test one work tree in the sandbox; the first install + test pair whose
    tests pass deterministically wins. The tree is the sandbox's to write (a root caller
    hands it to the sandbox uid): pass a tree made for it (``verify_revision`` does)."""
    work = Path(work)
    found = found or disc.discover(work)
    reasons: list[str] = []
    steps: list[Step] = []
    tests_by_chain = {}
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
        out = _attempt(work, inst, tests, cfg, found, steps, reasons)
        if out.verified:
            return out
        if not _not_here(steps[first:], "install"):
            tried[inst.toolchain] += 1
    for chain, tests in tests_by_chain.items():  # test commands with no install of their own
        if chain not in tried:
            out = _attempt(work, disc.Candidate((), chain, "", 0, disc.CONVENTION), tests,
                           cfg, found, steps, reasons)
            if out.verified:
                return out
    fail = Verification(False, _worst(reasons) if reasons else NO_TESTS_FOUND,
                        dependency_hash=found.dependency_hash, steps=steps)
    fail.cpu_seconds = round(sum(s.cpu_seconds for s in steps), 3)
    return fail


def _attempt(work: Path, inst: disc.Candidate, tests: list[disc.Candidate], cfg: VerifyConfig,
             found: disc.Discovery, steps: list[Step], reasons: list[str]) -> Verification:
    tc = toolchains.toolchain(inst.toolchain, sb.ENV)
    key = disc.cache_key(found.dependency_hash, inst.toolchain, tc.version, inst.commands)
    out = Verification(False, None, inst.toolchain, tc.version, inst.commands,
                       (inst.source, inst.line), cache_key=key,
                       dependency_hash=found.dependency_hash, steps=steps)
    first = len(steps)
    env_dir, reason, out.cached = _prepare_env(work, inst, cfg, key, steps)
    out.install_seconds = round(sum(s.wall_seconds for s in steps[first:]), 3)
    if reason:
        reasons.append(reason)
        out.reason = reason
        return out
    ran = 0
    for cand in tests:
        if ran >= cfg.max_tests:
            break
        first = len(steps)
        reason = _try_tests(work, cand, inst.toolchain, cfg, env_dir, out)
        if reason is None:
            out.verified, out.reason = True, None
            break
        reasons.append(reason)
        out.reason = reason
        ran += not _not_here(steps[first:], "test")
    out.cpu_seconds = round(sum(s.cpu_seconds for s in steps), 3)
    if env_dir and inst.toolchain not in toolchains.CACHEABLE:
        shutil.rmtree(env_dir, ignore_errors=True)
    return out


def _not_here(steps: list[Step], phase: str) -> bool:
    """Whether the last ``phase`` step of an attempt failed for a program the sandbox does
    not have (exit 127: ``uv``, ``uvx``, ``hatch`` ...): a candidate that could not start
    is not one of the ``max_installs``/``max_tests`` tried."""
    last = [s for s in steps if s.phase == phase][-1:]
    return bool(last) and last[0].exit_code == NOT_FOUND and last[0].violation is None


def verify_revision(repo: Path, commit: str, cfg: VerifyConfig) -> Verification:
    """Verify the environment of ``repo`` at ``commit`` in a fresh exported tree, leaving the
    repository as it was (the sandbox takes ownership of the tree it writes to)."""
    with tempfile.TemporaryDirectory(prefix="env-") as tmp:
        tree = Path(tmp) / "tree"
        fresh_tree(Path(repo), commit, tree)
        return verify_environment(tree, cfg)


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
    """``dest`` holds ``commit``'s files and a one-commit git repository (build tools such as
    setuptools-scm want one); none of the repository's history or hooks come along."""
    disc.checkout(repo, commit, dest)  # the tree, export-ignore paths included
    env = {"GIT_AUTHOR_DATE": "1980-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "1980-01-01T00:00:00Z"}
    for args in (("init", "-q"), ("add", "-A"),
                 ("-c", "user.name=codecorpus", "-c", "user.email=codecorpus@localhost",
                  "commit", "-q", "--no-verify", "-m", commit)):
        subprocess.run(["git", "-c", "safe.directory=*", "-C", str(dest), *args],
                       env={**os.environ, **env}, capture_output=True, check=False)


def apply_patch(tree: Path, patch: str) -> bool:
    """``git apply`` a unified diff to a tree; False when it does not apply."""
    if not patch.strip():
        return True
    res = run_git(tree, "apply", "--whitespace=nowarn", "-", stdin=patch.encode())
    return res.returncode == 0


def _state(tree: Path, env: Verification, cfg: VerifyConfig, env_dir: Path | None,
           steps: list[Step]) -> tuple[dict[str, str], list[str], str | None]:
    """Stable statuses and flaky ids of the tree as it is now (a per-commit build first)."""
    if env_dir and env.toolchain not in toolchains.CACHEABLE:
        cand = disc.Candidate(env.install, env.toolchain, *env.install_source, disc.MANIFEST)
        reason = _install(tree, cand, cfg, env_dir, steps)
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
    p2p = sorted(t for t, s in after.items() if s == results.PASSED
                 and before.get(t) == results.PASSED)
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
    env_dir, reason, _ = _prepare_env(tree, cand, cfg, env.cache_key, steps)
    if reason:
        return False
    return env_dir


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

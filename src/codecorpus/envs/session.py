"""Rollout sessions: a policy acts in a task's verified environment, and a patch is graded.

A session is a fresh tree of the task's repository at ``base_commit`` with the task's
verified environment ready (the spec's ``ready`` steps run in the tree), in which every
command runs inside the bubblewrap sandbox (``envs/sandbox.py``) with the network off::

    with open_session(entry, cfg) as s:   # entry: manifest_tasks.tasks_of(manifest)[instance_id]
        s.run("python -m unittest -v", timeout=60)   # -> CommandResult(exit code, output, seconds)
        s.write_file("calc.py", fixed)
        report = s.evaluate()                  # the session's diff, graded on a fresh copy
        report["resolved"], report["reward"]

What it promises and how:

- **Isolation.** Each session owns a private directory (its tree, and a private copy of the
  environment when the spec has ``ready`` steps, which write into it). Two sessions of one
  task share nothing writable: the cached environment is mounted read-only. The sandbox
  sees only its own tree (``/workspace``), the environment (``/env``, read-only), the
  system directories read-only and per-command private ``/tmp`` and ``$HOME``; another
  session's tree and the host's home are not in its mount namespace, and its pid namespace
  holds only its own processes.
- **The policy never sees the test patch.** The session's tree is the base commit; the
  test patch is applied only in ``evaluate``'s own fresh tree, which no session command
  can reach.
- **File calls are confined to the tree.** ``read_file``, ``write_file`` and
  ``list_files`` take paths relative to the tree; an absolute path, ``..`` out of it, a
  path through a symlink leading out, and the tree's ``.git`` are refused
  (``PathOutsideTree``).
- **Limits.** A command has a wall-time cap (``timeout``), the sandbox's process, memory,
  file-size and CPU limits, and an output cap (``CommandResult.output`` keeps the first
  ``output_bytes``). After each command the tree's size is measured; past ``disk_bytes``
  the session ends (``closed_reason == "disk_limit"``) and its tree is deleted. A command
  may write up to its file-size limit per file before that check runs.
- **Grading as SWE-bench does it.** ``evaluate(patch)`` makes a fresh tree at the base
  commit, applies the patch (the session's ``diff()`` when None), puts every file the test
  patch touches back to the base commit's version (a patch that rewrote the tests does not
  grade itself), applies the test patch, readies the tree and runs the spec's test command
  once. A FAIL_TO_PASS or PASS_TO_PASS test known to be flaky (the spec's
  ``tests.flaky``, the task's ``flaky``) that did not pass is rerun up to
  ``flaky_reruns`` times and passes if any run passed it. ``resolved`` is SWE-bench's
  rule: every FAIL_TO_PASS and every PASS_TO_PASS test passes (a test with no status is a
  failure). The report carries SWE-bench's ``report.json`` keys (``tests_status`` with
  ``success``/``failure`` lists, ``patch_successfully_applied``, ``resolved``) and a
  ``reward``: 1.0/0.0 by default, or the caller's function of the report.
- **Determinism.** The sandbox fixes ``TZ``, the locale, ``PYTHONHASHSEED``,
  ``SOURCE_DATE_EPOCH`` and ``CI`` for every command and passes no host variable through
  (the sandbox module's one list of variables), so the same patch gives the same report.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from codecorpus.envs import results, toolchains, verify
from codecorpus.envs import sandbox as sb

DISK_LIMIT = "disk_limit"
CLOSED = "closed"
TEST_PATCH_DOES_NOT_APPLY = "test_patch_does_not_apply"
UNKNOWN_INSTANCE = "unknown_instance"
Reward = Callable[[dict], float]
"""A reward function: the evaluation report -> a number."""


class SessionConfig(BaseModel):
    """Where sessions live and what limits their commands and tests run under."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    cache_dir: str = Field(..., description="installed environments by cache key (a run's env_cache)")
    work_root: str | None = Field(None, description="where session directories are made (default: the temp dir)")
    sandbox: sb.SandboxConfig = sb.SandboxConfig()
    command_limits: sb.Limits = sb.Limits(
        wall_seconds=600, cpu_seconds=600, memory_bytes=2 << 30, processes=256,
        file_size_bytes=256 << 20, output_bytes=1 << 20, tmpfs_bytes=256 << 20)
    test_limits: sb.Limits = sb.Limits(wall_seconds=1200)
    install_limits: sb.Limits = Field(sb.Limits(wall_seconds=1200),
                                      description="a node's one install of an environment it lacks")
    disk_bytes: int = Field(1 << 30, gt=0, description="the tree's size past which a session ends")
    flaky_reruns: int = Field(2, ge=0, description="reruns of a known-flaky graded test that did not pass")


@dataclass(frozen=True)
class TaskEntry:
    """One task of an RL manifest: its record, its environment spec and its repository."""

    task: dict
    spec: dict
    repo: Path


@dataclass(frozen=True)
class CommandResult:
    """What one session command did."""

    exit_code: int | None
    """The command's exit status; None when the sandbox killed it (``violation`` says why)."""
    output: str
    """stdout and stderr in order, the first ``output_bytes`` of them."""
    seconds: float
    violation: str | None
    truncated: bool


class SessionClosed(RuntimeError):
    """A call on a session that has ended (``closed_reason`` says why)."""


class PathOutsideTree(ValueError):
    """A file call named a path that leaves the session's tree."""


def verification_of_spec(spec: dict) -> verify.Verification:
    """The verification a spec records, as the install and test helpers take it."""
    test = spec["test"]
    return verify.Verification(
        True, None, toolchain=spec["toolchain"]["name"], toolchain_version=spec["toolchain"]["version"],
        install=tuple(spec["install"]), test=test["command"], parser=test["parser"],
        reports=test.get("reports", ""), cache_key=spec["cache_key"],
        dependency_hash=spec["dependency_hash"], ready=tuple(spec.get("ready", ())),
        flaky=list(spec["tests"].get("flaky", [])))


# ---------------------------------------------------------------- trees and environments


def _prepared(entry: TaskEntry, cfg: SessionConfig, home: Path) -> tuple[Path, Path | None, list]:
    """A fresh tree of the task's base commit in ``home`` and its environment directory
    (the cached one, installed once per node; a private copy when ready steps write it)."""
    env = verification_of_spec(entry.spec)
    tree = home / "tree"
    verify.fresh_tree(entry.repo, entry.task["base_commit"], tree)
    steps: list[verify.Step] = []
    vcfg = _vcfg(cfg, cfg.test_limits)
    with _install_lock(cfg.cache_dir, env.cache_key):  # one install per node, however many sessions
        env_dir = verify.environment_for_tree(tree, env, vcfg, steps)
    if env_dir is False:
        raise RuntimeError(f"{entry.task['instance_id']}: the environment did not install: "
                           f"{steps[-1].output_tail[-300:] if steps else ''}")
    if env_dir and env.ready:
        private = home / "env"
        shutil.copytree(env_dir, private, symlinks=True)
        env_dir = private
    return tree, env_dir, steps


@contextlib.contextmanager
def _install_lock(cache_dir: str, key: str) -> Iterator[None]:
    """Sessions of one node opening the same environment wait for its one install
    (``flock`` on ``cache_dir/.<key>.lock``) instead of installing it side by side."""
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(cache_dir) / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _vcfg(cfg: SessionConfig, limits: sb.Limits) -> verify.VerifyConfig:
    return verify.VerifyConfig(sandbox=cfg.sandbox.model_copy(update={"limits": limits}),
                               install_limits=cfg.install_limits, cache_dir=cfg.cache_dir, runs=1)


def _box(cfg: SessionConfig, chain: str, limits: sb.Limits) -> tuple[sb.SandboxConfig, dict]:
    inside = sb.ENV if cfg.sandbox.kind == "bwrap" else ""
    tc = toolchains.toolchain(chain, inside)
    box = toolchains.with_toolchain(cfg.sandbox.model_copy(update={"limits": limits}), tc)
    return box, dict(tc.test_env)


def _ready(tree: Path, env: verify.Verification, env_dir: Path | None, cfg: SessionConfig) -> str | None:
    """Run the spec's ready steps in a tree, network off, into its private environment."""
    if not (env_dir and env.ready):
        return None
    box, _ = _box(cfg, env.toolchain, cfg.test_limits)
    for command in env.ready:
        res = sb.run(command, tree, box, env_dir=env_dir, env_writable=True, merge_stderr=True)
        if res.violation and res.violation != sb.DAEMON_LEFT_BEHIND:
            return res.violation
        if res.exit_code != 0:
            return verify.READY_FAILED
    return None


def tree_bytes(tree: Path) -> int:
    """Bytes of the files under ``tree`` (links not followed)."""
    total = 0
    for root, _dirs, files in os.walk(tree):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


# ---------------------------------------------------------------- the session


class Session:
    """One rollout: a task's tree and environment, commands in the sandbox, a graded patch."""

    def __init__(self, entry: TaskEntry, cfg: SessionConfig) -> None:
        self.entry, self.cfg = entry, cfg
        self.instance_id = entry.task["instance_id"]
        self.env = verification_of_spec(entry.spec)
        root = cfg.work_root or None
        if root:
            Path(root).mkdir(parents=True, exist_ok=True)
        self.home = Path(tempfile.mkdtemp(prefix="session-", dir=root))
        self.home.chmod(0o700)
        self.closed_reason: str | None = None
        self.commands = 0
        try:
            self.tree, self.env_dir, self.setup_steps = _prepared(entry, cfg, self.home)
            reason = _ready(self.tree, self.env, self.env_dir, cfg)
            if reason:
                raise RuntimeError(f"{self.instance_id}: a ready step failed: {reason}")
        except BaseException:
            shutil.rmtree(self.home, ignore_errors=True)
            raise
        self._box, self._test_env = _box(cfg, self.env.toolchain, cfg.command_limits)

    # -- lifecycle

    def close(self, reason: str = CLOSED) -> None:
        """End the session and delete its directory (idempotent; the first reason stays)."""
        if self.closed_reason is None:
            self.closed_reason = reason
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _live(self) -> None:
        if self.closed_reason is not None:
            raise SessionClosed(f"session {self.instance_id} has ended: {self.closed_reason}")

    # -- commands

    def run(self, command: str, timeout: float = 60.0) -> CommandResult:
        """Run a ``/bin/sh -c`` command in the tree, in the sandbox, network off."""
        self._live()
        limits = self.cfg.command_limits
        wall = max(0.1, min(float(timeout), limits.wall_seconds))
        box = self._box.model_copy(update={"limits": limits.model_copy(update={"wall_seconds": wall})})
        res = sb.run(command, self.tree, box, env_dir=self.env_dir, extra_env=self._test_env,
                     merge_stderr=True)
        self.commands += 1
        out = CommandResult(res.exit_code, res.stdout, round(res.wall_seconds, 4), res.violation,
                            res.output_bytes > len(res.stdout.encode()))
        if tree_bytes(self.tree) > self.cfg.disk_bytes:
            self.close(DISK_LIMIT)
        return out

    # -- files

    def _path(self, rel: str, *, for_write: bool = False) -> Path:
        """The host path of a tree-relative path, refused when it leaves the tree."""
        self._live()
        if not rel or os.path.isabs(rel) or "\0" in rel:
            raise PathOutsideTree(f"{rel!r}: give a path relative to the tree")
        tree = self.tree.resolve()
        path = tree / rel
        parts = Path(os.path.normpath(rel)).parts
        if not parts or parts[0] in ("..", ".git"):
            raise PathOutsideTree(f"{rel!r}: outside the tree (or its .git)")
        real = Path(os.path.realpath(path.parent if for_write else path))
        if real != tree and tree not in real.parents:
            raise PathOutsideTree(f"{rel!r}: resolves to {real}, outside the tree")
        if for_write and path.is_symlink():
            raise PathOutsideTree(f"{rel!r}: is a symlink; write the file it names instead")
        return path

    def read_file(self, rel: str, max_bytes: int = 1 << 20) -> str:
        """A file of the tree as text (the first ``max_bytes``)."""
        with self._path(rel).open("rb") as f:
            return f.read(max_bytes).decode("utf-8", "replace")

    def write_file(self, rel: str, text: str) -> None:
        """Write (create or replace) a file of the tree, making its folders."""
        path = self._path(rel, for_write=True)
        data = text.encode()
        if tree_bytes(self.tree) + len(data) > self.cfg.disk_bytes:
            raise OSError(f"{rel}: writing {len(data)} bytes would pass the session's disk_bytes")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        sb.grant(path.parent, self.cfg.sandbox)

    def list_files(self, rel: str = ".") -> list[str]:
        """The tree's files under ``rel`` (relative paths, sorted; ``.git`` left out)."""
        base = self.tree if rel in ("", ".") else self._path(rel)
        out = []
        for root, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            out += [os.path.relpath(os.path.join(root, f), self.tree) for f in files]
        return sorted(out)

    def diff(self) -> str:
        """The tree's change against ``base_commit`` (new files included, binary-safe), read
        by host git from the tree as files: nothing in the tree's ``.git`` is trusted."""
        self._live()
        return diff_against_base(self.entry, self.tree, self.home)

    # -- grading

    def evaluate(self, patch: str | None = None, reward: Reward | None = None) -> dict:
        """Grade ``patch`` (the session's ``diff()`` when None) in a fresh tree of its own."""
        self._live()
        return evaluate_patch(self.entry, self.diff() if patch is None else patch, self.cfg, reward)


def open_session(entry: TaskEntry, cfg: SessionConfig) -> Session:
    """A new session on one task (see the module docstring)."""
    return Session(entry, cfg)


# ---------------------------------------------------------------- diff and grading

_DIFF_PATHS = re.compile(r"^(?:diff --git a/(\S+) b/(\S+)|(?:---|\+\+\+) [ab]/(\S+))", re.M)


def diff_against_base(entry: TaskEntry, tree: Path, scratch: Path) -> str:
    """``git diff`` of ``tree``'s files against a fresh checkout of the base commit: a
    private repository made in ``scratch``, the tree read as its work tree."""
    with tempfile.TemporaryDirectory(prefix="diff-", dir=scratch) as tmp:
        base = Path(tmp) / "base"
        verify.fresh_tree(entry.repo, entry.task["base_commit"], base)
        git = ("-c", "core.hooksPath=/dev/null", f"--git-dir={base / '.git'}", f"--work-tree={tree}")
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        verify.run_git(base, *git, "read-tree", "HEAD", env=env)
        verify.run_git(base, *git, "add", "-A", env=env)
        res = verify.run_git(base, *git, "diff", "--cached", "--binary", "HEAD", env=env)
    return res.stdout.decode("utf-8", "replace")


def _test_files(test_patch: str) -> list[str]:
    """The paths a unified diff touches (with or without ``diff --git`` lines).

    >>> _test_files("--- a/t/x.py\\n+++ b/t/x.py\\n--- /dev/null\\n+++ b/t/new.py\\n")
    ['t/new.py', 't/x.py']
    """
    return sorted({p for found in _DIFF_PATHS.findall(test_patch) for p in found if p})


def _reset_test_files(tree: Path, test_patch: str) -> None:
    """Every file the test patch touches back to the base commit's (deleted when new):
    SWE-bench's eval script does the same before applying the test patch."""
    for rel in _test_files(test_patch):
        tracked = verify.run_git(tree, "-c", "core.hooksPath=/dev/null", "cat-file", "-e", f"HEAD:{rel}")
        if tracked.returncode == 0:
            verify.run_git(tree, "-c", "core.hooksPath=/dev/null", "checkout", "HEAD", "--", rel)
        else:
            _unlink_leading_link(tree, rel)
            path = tree / rel
            real_parent = Path(os.path.realpath(path.parent))
            if real_parent != tree.resolve() and tree.resolve() not in real_parent.parents:
                continue  # a patched-in symlink leads out: nothing there is the tree's to delete
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.is_dir():
                shutil.rmtree(path)


def _unlink_leading_link(tree: Path, rel: str) -> None:
    """Remove a symlink among ``rel``'s folders inside the tree (the link, never what it
    names), as git's checkout does: a patched-in link must not carry a test file out."""
    here = tree
    for part in Path(rel).parts[:-1]:
        here = here / part
        if here.is_symlink():
            here.unlink()
            return
        if not here.is_dir():
            return


def _graded(task: dict) -> tuple[list[str], list[str]]:
    def ids(key: str) -> list[str]:
        value = task.get(key) or "[]"
        return list(json.loads(value) if isinstance(value, str) else value)

    return ids("FAIL_TO_PASS"), ids("PASS_TO_PASS")


def graded_status(statuses: dict[str, str], f2p: list[str], p2p: list[str]) -> dict:
    """SWE-bench's ``tests_status``: each graded list split into success and failure.

    >>> graded_status({"a": "passed", "b": "failed"}, ["a"], ["b", "c"])["PASS_TO_PASS"]
    {'success': [], 'failure': ['b', 'c']}
    """
    def split(ids: list[str]) -> dict[str, list[str]]:
        return {"success": [t for t in ids if statuses.get(t) == results.PASSED],
                "failure": [t for t in ids if statuses.get(t) != results.PASSED]}

    empty = {"success": [], "failure": []}
    return {"FAIL_TO_PASS": split(f2p), "PASS_TO_PASS": split(p2p),
            "FAIL_TO_FAIL": dict(empty), "PASS_TO_FAIL": dict(empty)}


def resolved_by(status: dict) -> bool:
    """SWE-bench's rule: every FAIL_TO_PASS and every PASS_TO_PASS test passed."""
    return not status["FAIL_TO_PASS"]["failure"] and not status["PASS_TO_PASS"]["failure"]


def _report(task: dict, patch: str, applied: bool, statuses: dict[str, str], reason: str | None,
            runs: int, reward: Reward | None) -> dict:
    f2p, p2p = _graded(task)
    status = graded_status(statuses, f2p, p2p)
    report = {"instance_id": task["instance_id"], "patch_is_None": False,
              "patch_exists": bool(patch.strip()), "patch_successfully_applied": applied,
              "resolved": bool(applied and reason is None and resolved_by(status)),
              "tests_status": status, "reason": reason, "test_runs": runs,
              "statuses": {t: statuses.get(t, "missing") for t in sorted({*f2p, *p2p})}}
    report["reward"] = float(reward(report)) if reward else (1.0 if report["resolved"] else 0.0)
    return report


def evaluate_patch(entry: TaskEntry, patch: str, cfg: SessionConfig,
                   reward: Reward | None = None) -> dict:
    """Grade one patch for one task in a fresh tree (see the module docstring)."""
    task, env = entry.task, verification_of_spec(entry.spec)
    root = cfg.work_root or None
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="evaluate-", dir=root))
    try:
        tree, env_dir, _ = _prepared(entry, cfg, home)
        if not verify.apply_patch(tree, patch):
            return _report(task, patch, False, {}, verify.PATCH_DOES_NOT_APPLY, 0, reward)
        _reset_test_files(tree, task["test_patch"])
        if not verify.apply_patch(tree, task["test_patch"]):
            return _report(task, patch, True, {}, TEST_PATCH_DOES_NOT_APPLY, 0, reward)
        reason = _ready(tree, env, env_dir, cfg)
        if reason:
            return _report(task, patch, True, {}, reason, 0, reward)
        statuses, runs, reason = _run_graded(tree, env, env_dir, cfg, task)
        return _report(task, patch, True, statuses, reason, runs, reward)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _run_graded(tree: Path, env: verify.Verification, env_dir: Path | None, cfg: SessionConfig,
                task: dict) -> tuple[dict[str, str], int, str | None]:
    """The test command's statuses, known-flaky graded tests that did not pass rerun."""
    vcfg = _vcfg(cfg, cfg.test_limits)
    f2p, p2p = _graded(task)
    flaky = set(env.flaky) | set(task.get("flaky") or ())
    statuses: dict[str, str] = {}
    runs = 0
    for attempt in range(1 + cfg.flaky_reruns):
        report, violation, _ = verify.run_tests(tree, env.test, env.parser, env.reports,
                                                env.toolchain, vcfg, env_dir, [])
        runs += 1
        if report is None:
            return statuses, runs, violation
        for test, status in report.tests.items():
            if attempt == 0 or (test in flaky and statuses.get(test) != results.PASSED):
                statuses[test] = status
        if not [t for t in (*f2p, *p2p) if t in flaky and statuses.get(t) != results.PASSED]:
            break
    return statuses, runs, None


GOLD_UNRESOLVED = "gold_patch_unresolved"
EMPTY_RESOLVED = "empty_patch_resolved"
NAMED_TESTS = 5
"""Tests a by-use drop's detail names, then how many more: enough to find the culprit, short
enough to read in a drop table."""


def named_tests(tests: list[str], limit: int = NAMED_TESTS, chars: int = 300) -> str:
    """``tests`` as a drop detail names them: the first ``limit`` ids, within ``chars``
    characters (a longer id is cut), then how many were left off.

    >>> named_tests(["t.a", "t.b", "t.c"], limit=2)
    't.a, t.b (+1 more)'
    >>> named_tests(["x" * 20], chars=10)
    'xxxxxxx...'
    """
    shown: list[str] = []
    for test in tests[:limit]:
        test = test if len(test) <= chars else test[: chars - 3] + "..."
        if shown and len(", ".join([*shown, test])) > chars:
            break
        shown.append(test)
    more = len(tests) - len(shown)
    return ", ".join(shown) + (f" (+{more} more)" if more else "")


def validate_by_use(entry: TaskEntry, cfg: SessionConfig) -> tuple[str | None, str]:
    """A task graded as a trainer will grade it: its gold patch must resolve it and an
    empty patch must not. Returns (drop reason or None, what decided it: the graded tests
    the gold patch left failing, or the FAIL_TO_PASS tests the empty patch passed)."""
    gold = evaluate_patch(entry, entry.task["patch"], cfg)
    if not gold["resolved"]:
        status = gold["tests_status"]
        failing = [f"{kind} failing: {named_tests(status[kind]['failure'])}"
                   for kind in ("FAIL_TO_PASS", "PASS_TO_PASS") if status[kind]["failure"]]
        return GOLD_UNRESOLVED, "; ".join([f"gold patch: {gold['reason'] or 'tests failing'}", *failing])
    empty = evaluate_patch(entry, "", cfg)
    if empty["resolved"]:
        passed = empty["tests_status"]["FAIL_TO_PASS"]["success"]
        return EMPTY_RESOLVED, f"empty patch: every FAIL_TO_PASS test passes: {named_tests(passed) or 'none listed'}"
    return None, "gold resolves, empty does not"

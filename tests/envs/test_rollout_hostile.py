"""Hostile policies: each planted action is contained (the command fails or the session ends
with a reason) and a sentinel check shows nothing outside the session changed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest
from envs_helpers import FIXED, host_processes_with, needs_bwrap
from rollout_helpers import F2P, planted_task

from codecorpus.envs import sandbox as sb
from codecorpus.envs import session as ses

pytestmark = needs_bwrap
TOKEN = f"hostile{os.getpid()}"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    entry, cfg = planted_task(tmp_path_factory.mktemp("hostile"))
    small_tmp = cfg.command_limits.model_copy(update={"tmpfs_bytes": 16 << 20})
    return entry, cfg.model_copy(update={"command_limits": small_tmp})


@pytest.fixture
def outside(tmp_path):
    """A host directory beside the session's with a sentinel file; its digest after the test
    must be what it was."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "sentinel.txt").write_text("keep me\n")
    before = _digest(d)
    yield d
    assert _digest(d) == before, "a file outside the session changed"


def _digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        h.update(str(p).encode() + (p.read_bytes() if p.is_file() else b"/"))
    return h.hexdigest()


def _no_escaped_processes() -> None:
    deadline = time.monotonic() + 5
    while host_processes_with(TOKEN) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert host_processes_with(TOKEN) == []


def test_fork_bomb(planted, outside):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as s:
        s.write_file(f"bomb_{TOKEN}.sh", f"sh bomb_{TOKEN}.sh & sh bomb_{TOKEN}.sh & wait\n")
        res = s.run(f"sh bomb_{TOKEN}.sh", timeout=20)
        assert res.violation in (sb.PROCESS_LIMIT, sb.TIMEOUT), res
        _no_escaped_processes()
        assert s.run("echo alive", timeout=10).output == "alive\n"


def test_network_is_off(planted, outside):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as s:
        for code in ("import socket; socket.create_connection(('1.1.1.1', 53), timeout=5)",
                     "import socket; socket.getaddrinfo('pypi.org', 443)"):
            res = s.run(f'python -c "{code}"', timeout=20)
            assert res.exit_code != 0 and res.violation == sb.SANDBOX_VIOLATION, res
        devices = s.run("cat /proc/net/dev", timeout=10).output.splitlines()[2:]
        assert [line.split(":")[0].strip() for line in devices] == ["lo"]


def test_writes_outside_the_tree(planted, outside):
    entry, cfg = planted
    targets = [f"/usr/{TOKEN}", f"/etc/{TOKEN}", f"{outside}/{TOKEN}", f"/tmp/{TOKEN}",
               f"{Path.home()}/{TOKEN}", f"{cfg.cache_dir}/{TOKEN}", f"/env/{TOKEN}"]
    with ses.open_session(entry, cfg) as s:
        for target in targets:
            s.run(f"echo x > {target}; mkdir -p {target}.d", timeout=10)
        assert s.run(f"echo x > {outside}/sentinel.txt", timeout=10).exit_code != 0
    for target in targets:
        assert not os.path.exists(target) and not os.path.exists(target + ".d"), target


def test_reading_outside_the_tree(planted, outside):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as other, ses.open_session(entry, cfg) as s:
        other.write_file("secret.txt", TOKEN)
        assert (other.tree / "secret.txt").read_text() == TOKEN
        for path in (other.tree / "secret.txt", outside / "sentinel.txt", other.home):
            res = s.run(f"cat {path} || ls {path}", timeout=10)
            assert res.exit_code != 0 and TOKEN not in res.output and "keep me" not in res.output, res
        # The host's home: at most the folders leading to a toolchain's prefix (a pyenv
        # interpreter lives under it), none of its files.
        home = s.run(f"find {Path.home()} -maxdepth 2", timeout=10).output.split()
        prefixes = s._box.toolchain_paths
        assert all(any(p.startswith(h) for p in prefixes) for h in home if h != str(Path.home())), home
        assert not [h for h in home if h.endswith((".bashrc", ".gitconfig", ".npmrc", ".profile"))]
        found = s.run(f"grep -rl {TOKEN} / --exclude-dir=proc --exclude-dir=sys 2>/dev/null", timeout=60)
        assert found.output == "", found
        with pytest.raises(ses.PathOutsideTree):
            s.read_file(os.path.relpath(other.tree / "secret.txt", s.tree))


def test_killing_processes_not_its_own(planted, outside):
    entry, cfg = planted
    host = subprocess.Popen(["sleep", "300"])
    try:
        with ses.open_session(entry, cfg) as s:
            res = s.run(f"kill -9 {host.pid}; kill -9 -1; pkill -9 sleep; echo done", timeout=10)
            assert "done" in res.output or res.exit_code != 0
        time.sleep(0.2)
        assert host.poll() is None, "a host process was killed from inside the sandbox"
    finally:
        host.kill()
        host.wait()


def test_filling_the_disk(planted, outside):
    entry, cfg = planted
    free = shutil.disk_usage(cfg.work_root).free
    s = ses.open_session(entry, cfg)
    big = s.run("head -c 20000000 /dev/zero > big.bin", timeout=30)
    assert big.violation == sb.FILE_SIZE_LIMIT, big
    tmp = s.run("for i in 1 2 3 4; do head -c 6000000 /dev/zero > /tmp/f$i || exit 1; done", timeout=30)
    assert tmp.exit_code != 0 and "No space left" in tmp.output, tmp
    many = s.run("for i in 1 2 3 4 5 6; do head -c 7000000 /dev/zero > f$i.bin; done", timeout=30)
    assert many.exit_code == 0
    assert s.closed_reason == ses.DISK_LIMIT and not s.home.exists()
    with pytest.raises(ses.SessionClosed):
        s.run("true")
    assert shutil.disk_usage(cfg.work_root).free > free - (16 << 20)


def test_endless_output(planted, outside):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as s:
        res = s.run("yes", timeout=30)
        assert res.violation == sb.OUTPUT_LIMIT and res.truncated
        assert len(res.output.encode()) <= cfg.command_limits.output_bytes
        assert s.run("echo alive", timeout=10).output == "alive\n"


def test_a_command_that_never_returns(planted, outside):
    entry, cfg = planted
    with ses.open_session(entry, cfg) as s:
        t0 = time.monotonic()
        res = s.run(f"sleep 100000 & sleep 100000 # {TOKEN}", timeout=2)
        assert res.violation == sb.TIMEOUT and res.exit_code is None
        assert time.monotonic() - t0 < 15
        _no_escaped_processes()


def test_a_patch_rewriting_the_tests_does_not_grade_itself(planted, outside):
    entry, cfg = planted
    cheat = ("import unittest\nclass TestCalc(unittest.TestCase):\n"
             "    def test_add(self):\n        pass\n")
    with ses.open_session(entry, cfg) as s:
        s.write_file("tests/test_calc.py", cheat)
        s.write_file("tests/test_more.py", "raise SystemExit(0)\n")
        report = s.evaluate()
        assert report["patch_successfully_applied"] and report["reason"] is None, report
        assert not report["resolved"]
        assert report["tests_status"]["FAIL_TO_PASS"]["failure"] == [F2P]
        s.run("rm tests/test_more.py", timeout=10)
        s.write_file("calc.py", FIXED)  # the fix beside the rewritten tests: graded on the task's tests
        assert s.evaluate()["resolved"]
        s.run("rm -rf tests", timeout=10)
        assert s.evaluate()["resolved"]


def test_a_patch_linking_the_tests_out_of_the_tree_deletes_nothing_there(planted, outside):
    """The test patch adds a file; the policy's patch made its folder a link to a host
    directory holding a file of that name. Grading removes the link (as git's checkout
    does), never the host file (it runs as root), and grades the task's tests."""
    entry, cfg = planted
    new = "import unittest\n\n\nclass TestNew(unittest.TestCase):\n    def test_new(self):\n        pass\n"
    test_patch = entry.task["test_patch"] + ("--- /dev/null\n+++ b/checks/test_new.py\n@@ -0,0 +1,6 @@\n"
                                             + "".join(f"+{ln}" for ln in new.splitlines(keepends=True)))
    (outside / "test_new.py").write_text("host file\n")
    task = replace(entry, task={**entry.task, "test_patch": test_patch})
    with ses.open_session(task, cfg) as s:
        assert s.run(f"ln -s {outside} checks", timeout=10).exit_code == 0
        report = s.evaluate()
    assert report["patch_successfully_applied"] and report["reason"] is None, report
    assert not report["resolved"]
    assert (outside / "test_new.py").read_text() == "host file\n"
    (outside / "test_new.py").unlink()  # the sentinel fixture's digest covers the rest

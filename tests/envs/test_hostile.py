"""Hostile repositories: each test suite below attacks the machine. Each is stopped and
recorded with its reason, nothing outside the sandbox changes, no process survives, and the
next repository is verified as usual (the run goes on)."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest
from envs_helpers import host_processes_with, needs_bwrap, write_tree

from codecorpus.envs import sandbox as sb
from codecorpus.envs import verify

pytestmark = needs_bwrap

# Limits small enough that an escape would be harmless on a shared 2-core machine.
LIMITS = sb.Limits(wall_seconds=8, cpu_seconds=8, memory_bytes=256 << 20, processes=32,
                   file_size_bytes=8 << 20, output_bytes=256 << 10, tmpfs_bytes=16 << 20)


@pytest.fixture
def guard(tmp_path):
    """A sentinel in the real $HOME and a file beside (outside) the work tree, checked after."""
    sentinel = Path.home() / f".codecorpus-sentinel-{uuid.uuid4().hex}"
    sentinel.write_text("keep me")
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    token = f"hostile-{uuid.uuid4().hex}"
    yield {"home": str(Path.home()), "sentinel": str(sentinel), "outside": str(outside),
           "token": token}
    assert sentinel.read_text() == "keep me"
    assert outside.read_text() == "untouched"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "outside.txt", "repo"]
    assert host_processes_with(token) == []
    sentinel.unlink()


def _verify(tmp_path: Path, body: str, g: dict) -> verify.Verification:
    test = ("import os, shutil, socket, subprocess, sys, time, unittest\n"
            f"HOME, SENTINEL, OUTSIDE, TOKEN = {g['home']!r}, {g['sentinel']!r}, "
            f"{g['outside']!r}, {g['token']!r}\n"
            "class Hostile(unittest.TestCase):\n"
            "    def test_attack(self):\n" + "".join(f"        {ln}\n" for ln in body.splitlines())
            + "".join(f"    def test_fine_{i}(self):\n        self.assertTrue(True)\n" for i in range(4)))
    repo = write_tree(tmp_path / "repo", {"test_hostile.py": test})
    cfg = verify.VerifyConfig(
        cache_dir=str(tmp_path / "cache"), max_tests=1,
        sandbox=sb.SandboxConfig(limits=LIMITS), install_limits=LIMITS)
    return verify.verify_environment(repo, cfg)


HOSTILE = {
    "fork_bomb": ("while True:\n    os.fork()", sb.PROCESS_LIMIT),
    "sleep_forever": ("time.sleep(10 ** 6)", sb.TIMEOUT),
    "allocate_past_limit": ("blocks = [bytearray(64 << 20) for _ in range(1000)]",
                            sb.MEMORY_LIMIT),
    # The host path beside the work tree does not exist in the sandbox; /usr is read-only.
    "write_outside": ("try:\n    open(OUTSIDE, 'w').write('pwned')\nexcept OSError:\n    pass\n"
                      "open('/usr/pwned', 'w').write('x')", sb.SANDBOX_VIOLATION),
    "delete_home": ("shutil.rmtree(os.path.expanduser('~'))\nos.remove(SENTINEL)\n"
                    "shutil.rmtree(HOME)", sb.SANDBOX_VIOLATION),
    "socket": ("socket.create_connection(('1.1.1.1', 443), timeout=5)", sb.SANDBOX_VIOLATION),
    "print_gigabytes": ("while True:\n    sys.stdout.write('x' * (1 << 20))",
                        sb.OUTPUT_LIMIT),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_suite_is_stopped_with_its_reason(tmp_path, guard, name):
    body, reason = HOSTILE[name]
    env = _verify(tmp_path, body, guard)
    assert not env.verified
    assert env.reason == reason, [(s.command, s.violation, s.output_tail[-300:]) for s in env.steps]
    assert any(s.violation == reason for s in env.steps if s.phase == "test")


def test_daemon_left_behind_is_recorded_and_killed(tmp_path, guard):
    body = ("subprocess.Popen(['bash', '-c', f'exec -a {TOKEN} sleep 600'],\n"
            "                 start_new_session=True, stdout=subprocess.DEVNULL)\n"
            "time.sleep(0.3)")
    env = _verify(tmp_path, body, guard)
    test_steps = [s for s in env.steps if s.phase == "test"]
    # three runs, then the fresh tree's
    assert [s.violation for s in test_steps] == [sb.DAEMON_LEFT_BEHIND] * 4
    # The suite passes; the daemon is recorded on every run and dies with the namespace.
    assert env.verified and env.tests == {
        "test_hostile.Hostile.test_attack": "passed",
        **{f"test_hostile.Hostile.test_fine_{i}": "passed" for i in range(4)}}


def test_the_run_goes_on_after_a_hostile_repository(tmp_path, guard):
    bad = _verify(tmp_path, "while True:\n    os.fork()", guard)
    assert bad.reason == sb.PROCESS_LIMIT
    good = write_tree(tmp_path / "repo", {"test_hostile.py": (
        "import unittest\nclass T(unittest.TestCase):\n"
        "    def test_ok(self):\n        self.assertEqual(hashlib_free(), 3)\n"
        "def hashlib_free():\n    return 3\n")})
    cfg = verify.VerifyConfig(cache_dir=str(tmp_path / "cache"), min_passed=1,
                              sandbox=sb.SandboxConfig(limits=LIMITS), install_limits=LIMITS)
    env = verify.verify_environment(good, cfg)
    assert env.verified and env.tests == {"test_hostile.T.test_ok": "passed"}
    assert hashlib.sha256(b"").hexdigest() == env.dependency_hash  # no dependency files

"""Helpers of the environment tests: skip where bubblewrap cannot run, tiny repos, host processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from codecorpus.envs import sandbox as sb

_WHY_NOT = sb.available()
needs_bwrap = pytest.mark.skipif(_WHY_NOT is not None, reason=f"no sandbox: {_WHY_NOT}")


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def git_repo(root: Path, files: dict[str, str]) -> str:
    """Make ``root`` a git repository with ``files`` committed; returns the commit id."""
    write_tree(root, files)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(root), "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, env=env, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def host_processes_with(token: str) -> list[int]:
    """Host pids whose command line contains ``token`` (a daemon that escaped)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            pids.append(int(proc.name))
    return pids


# The planted calc repository shared by the verify and rollout tests: a bug in add, five
# tests that pass with and without it, and the task that fixes it.
LIB = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
KEEPS = tuple(f"test_keeps_{n}" for n in range(1, 5))
# Five tests that pass with LIB and FIXED alike (min_passed is 5), test_zero last.
UNITTESTS = ("import unittest\nfrom calc import add\n"
             "class TestCalc(unittest.TestCase):\n"
             + "".join(f"    def test_keeps_{n}(self):\n        self.assertEqual(add({n}, 0), {n})\n"
                       for n in range(1, 5))
             + "    def test_zero(self):\n        self.assertEqual(add(0, 0), 0)\n")
TEST_PATCH = """--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -11,3 +11,5 @@
         self.assertEqual(add(4, 0), 4)
     def test_zero(self):
         self.assertEqual(add(0, 0), 0)
+    def test_add(self):
+        self.assertEqual(add(2, 3), 5)
"""
PATCH = """--- a/calc.py
+++ b/calc.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""

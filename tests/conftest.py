"""Shared fixtures: one local Ray per test session, and small real repositories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

MAIN_PY = '''"""A tiny module."""


def greet(name: str) -> str:
    return f"hello {name}"


if __name__ == "__main__":
    print(greet("world"))
'''

UTIL_JS = """export function add(a, b) {
  return a + b;
}

export const PI = 3.14159;
"""

LIB_RS = """pub fn fib(n: u64) -> u64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}
"""

README_MD = """# Demo

A demo repository with a few languages.
"""

MAIN_GO = """package main

import "fmt"

func main() {
\tfmt.Println("hi")
}
"""

OTHER_JAVA = """public class Other {
    public static int twice(int x) {
        return 2 * x;
    }
}
"""

SCRIPT_SH = """#!/usr/bin/env bash
set -euo pipefail
echo "building"
"""


def write_repos(root: Path) -> Path:
    """Two repositories with planted cases (13 entries: 4 dropped at ingest, 1 by filters, 1 duplicate).

    repo-a: main.py, util.js, lib.rs, README.md, main.go, build (shebang, no extension),
            logo.bin (binary), legacy.py (latin-1: undecodable), empty.txt (empty),
            long.js (a 2000-char line: fails max_line_len), .git/ (skipped dir)
    repo-b: copy.py (exact duplicate of repo-a/main.py), Other.java
    """
    a, b = root / "repo-a", root / "repo-b"
    (a / ".git" / "objects").mkdir(parents=True)
    (a / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (a / ".git" / "objects" / "x").write_bytes(b"\x00\x01")
    (a / "src").mkdir()
    b.mkdir()
    (a / "main.py").write_text(MAIN_PY)
    (a / "src" / "util.js").write_text(UTIL_JS)
    (a / "src" / "lib.rs").write_text(LIB_RS)
    (a / "README.md").write_text(README_MD)
    (a / "main.go").write_text(MAIN_GO)
    (a / "build").write_text(SCRIPT_SH)
    (a / "logo.bin").write_bytes(b"\x89PNG\x00\x00\x00\rIHDR" + bytes(range(256)))
    (a / "legacy.py").write_bytes("# caf\u00e9\nx = 1\n".encode("latin-1"))
    (a / "empty.txt").write_bytes(b"")
    (a / "long.js").write_text("var x = '" + "a" * 2000 + "';\n")
    (b / "copy.py").write_text(MAIN_PY)
    (b / "Other.java").write_text(OTHER_JAVA)
    return root


@pytest.fixture(scope="session")
def ray_local():
    """A 2-CPU local Ray shared by the tests that run pipelines."""
    from codecorpus.runtime.executor import init_ray

    init_ray(2, None)
    yield

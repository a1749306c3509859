"""Small real repositories for the tasks tests, made with git itself.

``build_project`` makes ``acme/proj`` with one commit of every kind the commits
source must handle (see ``EXPECTED_DROPS``), on fixed dates so that every run
makes the same shas. ``build_fork`` clones it and cherry-picks its last fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codecorpus.tasks.commits import Repository

MIT = """MIT License

Copyright (c) 2024 Acme

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND.
"""
APACHE = """                                 Apache License
                           Version 2.0, January 2004
                        http://www.apache.org/licenses/
"""
CALC = '''"""A small calculator."""


def add(a, b):
    return a + b


def divide(a, b):
    return a / b
'''
CALC_FIXED = CALC.replace("    return a / b\n", '    if b == 0:\n        raise ZeroDivisionError("b is zero")\n    return a / b\n')
TESTS = '''from calc import add, divide


def test_add():
    assert add(1, 2) == 3
'''
TESTS_FIXED = TESTS + '''

def test_divide_by_zero():
    import pytest
    with pytest.raises(ZeroDivisionError):
        divide(1, 0)
'''
SQRT = '''import math


def root(x):
    return math.sqrt(x)
'''
SQRT_FIXED = SQRT.replace("    return math.sqrt(x)\n", "    if x < 0:\n        raise ValueError(x)\n    return math.sqrt(x)\n")

EXPECTED_DROPS = {
    "bot_author": 1, "binary_only": 1, "vendored_only": 1, "lockfile_only": 1, "undecodable_path": 1,
    "undecodable_message": 1, "submodule_bump": 2, "empty": 1,
}  # fmt: skip
"""Drop reasons of ``build_project``'s first-parent walk and how many commits each (its merge is a change: a row)."""

CP1251_MESSAGE = "Добавить отрицание: не повторять значения, уже показанные на экране"
LATIN1_MESSAGE = "Corrige la détection des paramètres réglés à la main: éviter les valeurs répétées déjà vues"


class Repo:
    """A work tree where each commit gets the next fixed date."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.day = 0

    def git(self, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> str:
        full = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.path.parent), "LC_ALL": "C", **(env or {})}
        proc = subprocess.run(["git", "-C", str(self.path), *args], env=full, input=input, capture_output=True, check=True)
        return proc.stdout.decode("utf-8", "replace").strip()

    def write(self, rel: str | bytes, data: str | bytes) -> None:
        target = os.path.join(os.fsencode(self.path), os.fsencode(rel))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)

    def commit(self, message: str | bytes, *, author: str = "Ann Dev <ann@example.com>", encoding: str = "UTF-8",
               stage_all: bool = True) -> str:
        self.day += 1
        date = f"2024-01-{self.day:02d}T12:00:00+02:00"
        name, email = author[:-1].split(" <")
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
               "GIT_COMMITTER_NAME": "Ann Dev", "GIT_COMMITTER_EMAIL": "ann@example.com", "GIT_COMMITTER_DATE": date}
        msg_file = self.path.parent / f".msg-{self.path.name}"
        msg_file.write_bytes(message if isinstance(message, bytes) else message.encode())
        if stage_all:
            self.git("add", "-A")
        self.git("-c", f"i18n.commitEncoding={encoding}", "commit", "-q", "--allow-empty", "--cleanup=verbatim",
                 "-F", str(msg_file), env=env)
        return self.git("rev-parse", "HEAD")

    def raw_commit(self, message: bytes) -> str:
        """A commit whose message is these bytes exactly, with no encoding header (git commit would
        re-encode a non-UTF-8 message as Latin-1), written as a raw object."""
        self.day += 1
        self.git("add", "-A")
        tree, parent = self.git("write-tree"), self.git("rev-parse", "HEAD")
        stamp = 1704103200 + self.day * 86400
        obj = (f"tree {tree}\nparent {parent}\nauthor Ann Dev <ann@example.com> {stamp} +0000\n"
               f"committer Ann Dev <ann@example.com> {stamp} +0000\n\n").encode() + message
        sha = self.git("hash-object", "-t", "commit", "-w", "--stdin", input=obj)
        self.git("update-ref", "HEAD", sha)
        return sha


def init(path: Path) -> Repo:
    path.mkdir(parents=True)
    repo = Repo(path)
    repo.git("init", "-q", "-b", "main")
    repo.git("config", "user.name", "Ann Dev")
    repo.git("config", "user.email", "ann@example.com")
    return repo


def build_project(root: Path) -> Repo:
    r = init(root / "proj")
    r.write("LICENSE", MIT)
    r.write("README.md", "# proj\n")
    r.write("src/calc.py", CALC)
    r.write("tests/test_calc.py", TESTS)
    r.commit("Add a calculator with tests")
    r.write("src/calc.py", CALC_FIXED)
    r.write("tests/test_calc.py", TESTS_FIXED)
    r.commit("Fix division by zero in divide\n\nRaise a clear error instead of a bare ZeroDivisionError.\n")
    r.write("requirements.txt", "requests==2.31.0\n")
    r.commit("Bump requests from 2.30.0 to 2.31.0", author="dependabot[bot] <49699333+dependabot[bot]@users.noreply.github.com>")
    r.write("assets/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    r.commit("Add the logo")
    r.write("node_modules/left-pad/index.js", "module.exports = function leftPad(s) { return s; };\n")
    r.commit("Vendor left-pad")
    r.write("package-lock.json", '{"lockfileVersion": 3}\n')
    r.commit("Update the lockfile")
    r.git("mv", "src/calc.py", "src/calculator.py")
    r.write("src/calculator.py", CALC_FIXED.replace("A small calculator", "A small calculator module"))
    r.commit("Rename calc to calculator")
    r.write(b"docs/caf\xe9.txt", "menu\n")
    r.commit("Add the menu")
    r.write("src/calculator.py", CALC_FIXED + "\n\ndef mul(a, b):\n    return a * b\n")
    r.commit(LATIN1_MESSAGE.encode("latin-1"), encoding="ISO-8859-1")
    r.write("src/calculator.py", CALC_FIXED + "\n\ndef mul(a, b):\n    return a * b\n\n\ndef sub(a, b):\n    return a - b\n")
    r.raw_commit("Ajoute sub, caf\xe9".encode("latin-1"))
    r.write("src/calculator.py", CALC_FIXED + "\n\ndef mul(a, b):\n    return a * b\n\n\ndef sub(a, b):\n    return a - b\n"
            "\n\ndef neg(a):\n    return -a\n")
    r.raw_commit(CP1251_MESSAGE.encode("cp1251"))
    r.write(".gitmodules", '[submodule "lib"]\n\tpath = lib\n\turl = https://example.com/lib.git\n')
    r.git("update-index", "--add", "--cacheinfo", f"160000,{'a' * 40},lib")
    r.git("add", ".gitmodules")
    r.commit("Add lib as a submodule", stage_all=False)
    r.git("update-index", "--add", "--cacheinfo", f"160000,{'b' * 40},lib")
    r.commit("Bump lib", stage_all=False)
    r.git("update-index", "--add", "--cacheinfo", f"160000,{'c' * 40},lib")
    r.commit("Bump lib again", stage_all=False)
    r.git("checkout", "-q", "-b", "feature")
    r.write("src/feature.py", "def feature():\n    return 1\n")
    r.commit("Add a feature")
    r.git("checkout", "-q", "main")
    r.day += 1
    date = f"2024-01-{r.day:02d}T12:00:00+02:00"
    r.git("merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature",
          env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
    r.commit("Nothing changed")
    r.write("LICENSE", APACHE)
    r.commit("Relicense under Apache-2.0")
    r.write("src/sqrt.py", SQRT)
    r.write("tests/test_sqrt.py", "from sqrt import root\n\n\ndef test_root():\n    assert root(4) == 2\n")
    r.commit("Add a square root")
    r.write("src/sqrt.py", SQRT_FIXED)
    r.write("tests/test_sqrt.py", "from sqrt import root\n\n\ndef test_root():\n    assert root(4) == 2\n\n\n"
            "def test_negative():\n    import pytest\n    with pytest.raises(ValueError):\n        root(-1)\n")
    r.commit("Reject negative numbers in root")
    return r


def build_fork(root: Path, project: Repo, *, cherry_pick: str) -> Repo:
    """``acme-fork/proj``: a clone of the project up to ``cherry_pick``'s parent, then the cherry-pick."""
    path = root / "fork"
    subprocess.run(["git", "clone", "-q", str(project.path), str(path)], check=True, capture_output=True)
    fork = Repo(path)
    fork.day = 28
    fork.git("config", "user.name", "Bo Fork")
    fork.git("config", "user.email", "bo@example.com")
    fork.git("reset", "-q", "--hard", f"{cherry_pick}~1")
    date = "2024-02-20T08:00:00+00:00"
    fork.git("cherry-pick", cherry_pick, env={"GIT_COMMITTER_DATE": date, "GIT_COMMITTER_NAME": "Bo Fork",
                                              "GIT_COMMITTER_EMAIL": "bo@example.com"})
    return fork


def bare_clone(src: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--bare", "--no-local", str(src), str(dest)], check=True, capture_output=True)
    return dest


def copy_repo(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


# --- fixtures (imported by the test modules) ------------------------------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Repo:
    return build_project(tmp_path_factory.mktemp("repos"))


@pytest.fixture(scope="module")
def project_repo(project) -> Repository:
    return Repository("fixture", "acme/proj", str(project.path / ".git"))


@pytest.fixture(scope="module")
def fork(project, tmp_path_factory) -> Repo:
    return build_fork(tmp_path_factory.mktemp("forks"), project, cherry_pick=project.git("rev-parse", "HEAD"))


@pytest.fixture(scope="module")
def fork_repo(fork) -> Repository:
    return Repository("fixture", "acme-fork/proj", str(fork.path / ".git"))

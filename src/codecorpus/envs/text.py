"""Text helpers of the readers of repository files (``discover.py``, ``tox.py``): read a
file, find the line a candidate came from, quote a word for the shell."""

from __future__ import annotations

import re
from pathlib import Path

_SHELL_SAFE = re.compile(r"[\w@%+=:,./-]+")


def read_text(path: Path) -> str:
    """A file's text (undecodable bytes replaced); empty when it is not a readable file."""
    try:
        return path.read_text("utf-8", "replace") if path.is_file() else ""
    except OSError:
        return ""


def line_of(text: str, needle: str) -> int:
    """1-based line of the first occurrence of ``needle`` in ``text`` (0 when absent or empty).

    >>> line_of("[tox]\\ncommands = pytest\\n", "commands"), line_of("a", "b"), line_of("a", "")
    (2, 0, 0)
    """
    pos = text.find(needle) if needle else -1
    return text.count("\n", 0, pos) + 1 if pos >= 0 else 0


def quote(word: str) -> str:
    """``word`` as one shell word: unchanged when it holds only safe characters, else in
    single quotes (a quote inside written ``'\\''``).

    >>> print(quote("requirements/tests.txt"), quote("pytest>=8"), quote("it's"), quote(""))
    requirements/tests.txt 'pytest>=8' 'it'\\''s' ''
    """
    if _SHELL_SAFE.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"

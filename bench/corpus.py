"""Real code for the benchmarks: the Python standard library this interpreter ships."""

from __future__ import annotations

import sysconfig
from pathlib import Path


def stdlib_texts(mb: float) -> list[str]:
    """UTF-8 ``.py`` files of the standard library in path order, until ``mb`` megabytes.

    Installed packages under the stdlib folder (``site-packages``) are not the
    standard library and are skipped.
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    texts, total = [], 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.relative_to(root).parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(text)
        total += len(text.encode())
        if total >= mb * 1e6:
            break
    return texts

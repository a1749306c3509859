"""Real code for the benchmarks: the standard library, and N renamed copies of a source's files.

A corpus ``N`` times larger that dedup keeps whole: copy ``k`` renames every identifier of
three or more characters to ``<name>_c<k>`` (deterministic; keywords stay, so it parses
like its original). It stays real code of the same size and shape, but shares no
identifier 5-gram with the other copies, so neither exact nor near dedup removes it and
every stage after dedup really processes ``N`` times the data.
"""

from __future__ import annotations

import keyword
import re
import sysconfig
from pathlib import Path
from typing import Any

IDENT = re.compile(rb"\b([A-Za-z_][A-Za-z0-9_]{2,})\b")
KEYWORDS = frozenset(w.encode() for w in (
    *keyword.kwlist, *keyword.softkwlist, "self", "cls", "True", "False", "None",
    # C / C++ / JavaScript / shell words of the other files in the corpus
    "int", "char", "void", "return", "const", "var", "let", "function", "class", "struct", "static",
    "unsigned", "long", "short", "float", "double", "typedef", "enum", "union", "extern", "sizeof",
    "switch", "case", "default", "break", "continue", "while", "for", "else", "goto", "new", "this",
    "typeof", "instanceof", "export", "extends", "then", "done", "esac", "elif", "echo", "cdef", "cpdef",
    "ctypedef", "include", "define", "ifdef", "ifndef", "endif", "pragma", "null", "true", "false",
))


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


def base_files(source: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(repository, relative path, absolute path) of every file codecorpus's planner reads."""
    from codecorpus.config import IngestConfig, load_recipe_data
    from codecorpus.ingest.plan import plan_source

    recipe = load_recipe_data({"sources": [source], "stages": {"ingest": {}}})
    return [(u.repo, u.path, u.abspath) for u in plan_source(recipe.sources[0], IngestConfig()) if u.skip is None]


def copy_bytes(data: bytes, copy: int) -> bytes:
    """Copy 0 is the file itself; copy k renames identifiers (see the module docstring).

    Keywords stay as they are, so a copy parses like its original (langid's tree-sitter
    ``parse_error_frac`` and the filter on it see the same code).
    """
    if copy == 0:
        return data
    suffix = f"_c{copy}".encode()
    return IDENT.sub(lambda m: m.group(1) if m.group(1) in KEYWORDS else m.group(1) + suffix, data)


def build_corpus(files: list[tuple[str, str, str]], factor: int, root: Path) -> int:
    """Write ``factor`` copies as repositories ``<repo>`` and ``<repo>-c<k>``; returns bytes."""
    total = 0
    for copy in range(factor):
        for repo, rel, src in files:
            dest = root / (repo if copy == 0 else f"{repo}-c{copy}") / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            data = copy_bytes(Path(src).read_bytes(), copy)
            dest.write_bytes(data)
            total += len(data)
    return total

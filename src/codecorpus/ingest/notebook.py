"""Jupyter notebooks -> scripts: code cells as they are, markdown cells as comments.

Outputs (images, tracebacks, dataframes) are dropped: they are not code a model
should learn to write, and they are most of a notebook's bytes. The comment
prefix follows the notebook's language (``#`` for Python, R, Julia, shells;
``//`` for C-family kernels; ``--`` for SQL/Haskell/Lua). Cells are separated by
``# %%`` markers (the jupytext "percent" format), so the script stays readable
as a notebook by the tools that know it.
"""

from __future__ import annotations

import json

_PREFIX = {
    "python": "#", "r": "#", "julia": "#", "ruby": "#", "bash": "#", "sh": "#", "perl": "#",
    "javascript": "//", "typescript": "//", "c++": "//", "cpp": "//", "c": "//", "java": "//",
    "scala": "//", "go": "//", "rust": "//", "c#": "//", "csharp": "//", "kotlin": "//",
    "sql": "--", "haskell": "--", "lua": "--", "matlab": "%", "octave": "%",
}


class NotebookError(ValueError):
    """Not a notebook we can read: the message is the drop log's detail."""


def to_script(text: str) -> tuple[str, str]:
    """(script, language) of a notebook's JSON text.

    >>> nb = {"cells": [{"cell_type": "markdown", "source": ["# Title"]},
    ...                 {"cell_type": "code", "source": "x = 1", "outputs": [1]}],
    ...       "metadata": {"kernelspec": {"language": "python"}}}
    >>> print(to_script(json.dumps(nb))[0])
    # %% [markdown]
    # # Title
    <BLANKLINE>
    # %%
    x = 1
    <BLANKLINE>
    """
    try:
        nb = json.loads(text)
    except ValueError as err:
        raise NotebookError(f"not JSON: {err}") from None
    except RecursionError:  # json recurses per nesting level: a hostile `[[[[...` notebook
        raise NotebookError("JSON nested deeper than the parser's recursion limit") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells", nb.get("worksheets")), list):
        raise NotebookError("no `cells` list")
    cells = nb.get("cells")
    if cells is None:  # nbformat 3
        cells = [c for ws in nb["worksheets"] for c in ws.get("cells", [])]
    language = _language(nb)
    prefix = _PREFIX.get(language, "#")
    parts = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        source = cell.get("source", cell.get("input", ""))
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "code":
            parts.append(f"{prefix} %%\n{source.rstrip()}\n")
        elif cell.get("cell_type") in ("markdown", "raw", "heading") and source.strip():
            body = "\n".join(f"{prefix} {line}".rstrip() for line in source.rstrip().splitlines())
            parts.append(f"{prefix} %% [markdown]\n{body}\n")
    if not parts:
        raise NotebookError("no code or markdown cells")
    return "\n".join(parts), language


def _language(nb: dict) -> str:
    meta = nb.get("metadata") or {}
    lang = (meta.get("kernelspec") or {}).get("language") or (meta.get("language_info") or {}).get("name")
    return str(lang or "python").lower()

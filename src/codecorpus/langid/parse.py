"""Parse quality: the share of a file's bytes that tree-sitter could not parse.

``parse_error_frac`` = bytes under ``ERROR`` nodes (plus one byte per ``MISSING``
node, which has no width) / file bytes, for the languages with a prebuilt grammar
in ``tree-sitter-language-pack==0.13.0`` (pinned: its 1.x releases download
grammars at run time and fail offline). A clean parse costs one ``has_error``
check; only trees with errors are walked, and only into subtrees that contain
one. Other languages get null. Filters use it to drop truncated, templated or
mislabelled files.
"""

from __future__ import annotations

import functools
from typing import Any

TREE_SITTER_NAMES = {
    "Python": "python", "JavaScript": "javascript", "TypeScript": "typescript", "TSX": "tsx",
    "Java": "java", "Go": "go", "Rust": "rust", "C": "c", "C++": "cpp", "C#": "csharp",
    "Ruby": "ruby", "PHP": "php", "Shell": "bash",
}


@functools.lru_cache(maxsize=32)
def _parser(name: str) -> Any:
    from tree_sitter_language_pack import get_parser

    return get_parser(name)  # type: ignore[arg-type]


def parse_error_frac(lang: str, text: str) -> float | None:
    """Share of bytes under error nodes, or None for a language without a grammar.

    >>> parse_error_frac("Python", "def f(x):\\n    return x\\n")
    0.0
    >>> 0 < parse_error_frac("Python", "def f(:\\n    return x\\n") < 1
    True
    >>> parse_error_frac("Haskell", "main = pure ()") is None
    True
    """
    name = TREE_SITTER_NAMES.get(lang)
    if name is None:
        return None
    data = text.encode("utf-8", "surrogatepass")
    if not data:
        return 0.0
    root = _parser(name).parse(data).root_node
    if not root.has_error:
        return 0.0
    return min(1.0, _error_bytes(root) / len(data))


def _error_bytes(root: Any) -> int:
    total = 0
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error:
            total += node.end_byte - node.start_byte
        elif node.is_missing:
            total += 1
        elif node.has_error:
            stack.extend(node.children)
    return total

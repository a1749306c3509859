"""The key that groups exact duplicates: the content hash, or a whitespace-normalised one.

Exact duplicates are resolved together with near-duplicates (``dedup/near.py``):
equal keys become cluster edges, so every cluster has one keeper, and a dropped
row whose key equals its keeper's is logged ``exact_duplicate``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema

# --- the key of exact grouping (optionally whitespace-normalised) -------------------


def normalized_whitespace_hash(texts: pa.Array | pa.ChunkedArray) -> list[str]:
    """sha256 hex of each text with every whitespace run collapsed to one space, ends trimmed.

    A re-indented, CRLF or trailing-whitespace copy gets the same hash; a change
    inside a token does not. The regex pass is Arrow's (RE2) over the whole column.

    >>> a, b, c = normalized_whitespace_hash(pa.array(["def f():\\n    return 1\\n", "def f():\\r\\n\\treturn 1", "def f(): return 2"]))
    >>> a == b, a == c
    (True, False)
    """
    folded = pc.utf8_trim_whitespace(pc.replace_substring_regex(texts, r"\s+", " "))
    return [schema.content_hash(t.encode("utf-8", "surrogatepass")) for t in folded.to_pylist()]


def exact_keys(table: pa.Table, whitespace: bool) -> list[str]:
    """The hex hash that groups exact duplicates: ``content_hash``, or the whitespace-normalised one."""
    if whitespace:
        return normalized_whitespace_hash(table.column(schema.TEXT))
    return table.column(schema.CONTENT_HASH).to_pylist()

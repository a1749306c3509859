"""Which document of a duplicate cluster survives: a deterministic, configurable order.

The default order (``DedupConfig.keep_policy``) is the one code-corpus builders
use: a permissive license beats an unknown one beats a non-permissive one
(so the copy we keep is the one we may train on), then more stars, then the
newest last commit, then the longest text (most complete copy), and the
smallest document id last, so every tie is broken the same way on any worker.
``stars`` and ``last_commit`` count only where the rows carry those columns;
absent or null values rank last.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema

KEEP_CRITERIA = ("license", "stars", "last_commit", "length", "id")

PERMISSIVE_LICENSES = frozenset(
    s.lower()
    for s in (
        "MIT", "MIT-0", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "BSD-3-Clause-Clear", "0BSD", "ISC",
        "Unlicense", "CC0-1.0", "Zlib", "BSL-1.0", "PSF-2.0", "Python-2.0", "X11", "WTFPL", "NCSA",
        "UPL-1.0", "MulanPSL-2.0", "CC-BY-4.0", "AFL-3.0", "Artistic-2.0", "PostgreSQL",
    )
)


def license_rank(licenses: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """0 permissive, 1 unknown (or empty), 2 anything else (copyleft, proprietary, custom).

    >>> license_rank(pa.array(["MIT", "unknown", "GPL-3.0-only", "apache-2.0"])).tolist()
    [0, 1, 2, 0]
    """
    values = pc.utf8_lower(pc.fill_null(licenses, schema.UNKNOWN)).to_pylist()
    unknown = {schema.UNKNOWN, "", "noassertion", "none"}
    return np.array([0 if v in PERMISSIVE_LICENSES else 1 if v in unknown else 2 for v in values], np.int8)


def policy_attributes(table: pa.Table) -> dict[str, pa.Array]:
    """The per-document values the keep policy compares (present columns only)."""
    out = {
        "license": pa.array(license_rank(table.column(schema.LICENSE)), pa.int8()),
        "length": table.column(schema.BYTES).combine_chunks().cast(pa.int64()),
        "id": table.column(schema.ID).combine_chunks(),
    }
    out["stars"] = _int_or(table, schema.STARS, -1)
    out["last_commit"] = _int_or(table, schema.LAST_COMMIT, np.iinfo(np.int64).min)
    return out


def _int_or(table: pa.Table, column: str, missing: int) -> pa.Array:
    """A column as int64 (timestamps as their epoch count), ``missing`` where absent or null."""
    if column not in table.column_names:
        return pa.array(np.full(table.num_rows, missing, np.int64))
    values = table.column(column).combine_chunks()
    if pa.types.is_timestamp(values.type):
        values = values.cast(pa.int64())
    return pc.fill_null(values.cast(pa.int64()), missing)


_DIRECTION = {"license": "ascending", "stars": "descending", "last_commit": "descending",
              "length": "descending", "id": "ascending"}


def sort_keys(policy: Sequence[str], prefix: str = "") -> list[tuple[str, str]]:
    """Arrow ``sort_by`` keys for a policy; ``id`` is always the final tie-break.

    >>> sort_keys(["stars", "license"])
    [('stars', 'descending'), ('license', 'ascending'), ('id', 'ascending')]
    """
    order = [c for c in policy if c != "id"] + ["id"]
    return [(prefix + c, _DIRECTION[c]) for c in order]

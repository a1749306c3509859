"""Optional repository metadata from a side file: stars, forks, last commit date.

The side file (``.jsonl``, ``.csv`` or ``.parquet``) has one row per repository with
a ``repo`` column and any of ``stars``, ``forks``, ``last_commit`` (ISO 8601 date or
datetime, or epoch seconds). dedup's keep policy reads the typed columns
``schema.STARS`` and ``schema.LAST_COMMIT``; :data:`FORKS` is ingest's own (nothing
else reads it). Repositories not in the file get nulls.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from codecorpus import schema
from codecorpus.model import RecipeError

FORKS = "forks"
"""The repository's fork count (int64; null when the side file does not give it)."""

Meta = tuple[int | None, int | None, dt.datetime | None]
_NONE: Meta = (None, None, None)


@functools.lru_cache(maxsize=8)
def load(path: str) -> dict[str, Meta]:
    """{repo: (stars, forks, last_commit)} from a side file (cached per worker process)."""
    p = Path(path)
    if not p.is_file():
        raise RecipeError(f"metadata side file {p} does not exist: fix the source's `metadata:` key")
    if p.suffix == ".parquet":
        rows = pq.ParquetFile(p).read().to_pylist()  # not read_table: no pyarrow.dataset import
    elif p.suffix == ".csv":
        with p.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    else:
        rows = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    out: dict[str, Meta] = {}
    for row in rows:
        if "repo" not in row:
            raise RecipeError(f"metadata side file {p}: every row needs a `repo` column")
        out[str(row["repo"])] = (_int(row.get("stars")), _int(row.get("forks")), _date(row.get("last_commit")))
    return out


def _int(value: object) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _date(value: object) -> dt.datetime | None:
    """ISO date/datetime or epoch seconds -> aware UTC datetime.

    >>> _date("2024-05-01")
    datetime.datetime(2024, 5, 1, 0, 0, tzinfo=datetime.timezone.utc)
    """
    if value in (None, ""):
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, int | float):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc)
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def columns(repos: list[str], meta_paths: list[str]) -> dict[str, pa.Array]:
    """Typed stars/forks/last_commit columns for rows of (repo, side file path or '')."""
    values = [load(m).get(r, _NONE) if m else _NONE for r, m in zip(repos, meta_paths, strict=True)]
    return {
        schema.STARS: pa.array([v[0] for v in values], schema.STAGE_COLUMNS[schema.STARS]),
        FORKS: pa.array([v[1] for v in values], pa.int64()),
        schema.LAST_COMMIT: pa.array([v[2] for v in values], schema.STAGE_COLUMNS[schema.LAST_COMMIT]),
    }

"""The planned units of ingest: repositories, file entries, archives and dataset slices.

A shard is a list of units. A :class:`FileRef` is one planned document (a file on
disk, a git blob or an S3 object). An :class:`ArchiveRef` or a :class:`RecordRef`
is one planned unit that the read task expands into many rows (archive members,
dataset records); the task counts what it enumerated beyond the unit
(``schema.EXPANDED_ROWS``) so ``rows_in = rows_out + dropped`` holds per shard.
Every unit has ``size`` (planned input bytes) and ``skip`` (a drop reason decided
at plan time), which is all the planner and the executor look at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

NOT_DOCUMENTS = frozenset({
    "skipped_dir", "vendored_dir", "unreadable_dir", "symlink", "not_regular_file", "submodule",
    "hardlink", "special_file",
})
"""Skip reasons of entries that are not documents: directories the walk stepped over (and
the files a listing names inside them), links, special files, submodule pointers."""


@dataclass(frozen=True)
class S3Conn:
    """Connection settings for a task's boto3 client; secrets stay out of repr and plans."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class RepoInfo:
    """What every document of one repository shares."""

    license: str = "unknown"
    license_method: str = "unknown"
    meta: str = ""
    """Repository metadata side file (stars, forks, last_commit), '' for none."""


@dataclass(frozen=True)
class FileRef:
    """One planned entry. ``skip`` is a drop reason decided without reading the file.

    ``store`` says where the bytes are: ``fs`` (``abspath``), ``git`` (blob ``key`` in
    the git directory ``container``) or ``s3`` (object ``key`` in bucket ``container``).
    A ``git`` entry's ``abspath`` is the URL ``container`` was cloned from ('' for a local
    repository): a read task on a node without that clone makes it there (``git.clone_here``).
    """

    source: str
    repo: str
    path: str
    abspath: str
    size: int
    revision: str
    license: str
    skip: str | None = None
    store: str = "fs"
    container: str = ""
    key: str = ""
    kind: str = "code"
    license_method: str = "unknown"
    meta: str = ""
    s3: S3Conn | None = None
    detail: str | None = None


@dataclass(frozen=True)
class ArchiveRef:
    """A whole archive, read member by member inside one task (never unpacked to disk)."""

    source: str
    location: str
    """A local path or ``s3://bucket/key``."""
    size: int
    repo: str
    """Repository name for layout ``repo``; ignored for ``repos`` (top folder = repository)."""
    layout: str = "repo"
    strip_components: int = 0
    revision: str = ""
    license: str | None = None
    meta: str = ""
    max_member_bytes: int = 1_000_000
    max_total_bytes: int = 2_000_000_000
    s3: S3Conn | None = None
    skip: str | None = None


@dataclass(frozen=True)
class RecordRef:
    """A slice of a file-level dataset: Parquet row groups, a JSONL file, an Arrow file."""

    source: str
    location: str
    fmt: str
    """``parquet`` | ``jsonl`` | ``arrow`` (a saved Hugging Face dataset's file)."""
    size: int
    columns: tuple[tuple[str, str | None], ...]
    row_groups: tuple[int, ...] = ()
    license: str = "unknown"
    meta: str = ""
    max_file_bytes: int = 1_000_000
    s3: S3Conn | None = None
    skip: str | None = None
    detail: str | None = None
    """Why ``skip`` (e.g. the error of a Parquet footer that could not be read)."""


Unit = FileRef | ArchiveRef | RecordRef


@dataclass(frozen=True)
class Repository:
    source: str
    name: str
    root: Path
    revision: str
    license: str
    files: tuple[str, ...] | None = None
    """Explicit file list (relative paths), e.g. a distribution's RECORD; None = walk ``root``."""
    exclude: tuple[str, ...] = ()
    """Relative directory paths under ``root`` logged as one ``skipped_dir`` entry each (not a document), not read."""
    license_method: str = "unknown"
    kind: str = "code"
    meta: str = ""

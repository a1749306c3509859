"""The planned units of ingest: repositories and the file entries listed from them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileRef:
    """One planned entry. ``skip`` is a drop reason decided without reading the file."""

    source: str
    repo: str
    path: str
    abspath: str
    size: int
    revision: str
    license: str
    skip: str | None = None


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
    """Relative directory paths under ``root`` logged as one ``skipped_dir`` drop each, not read."""

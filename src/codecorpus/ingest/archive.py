"""Archives of repositories, read member by member without unpacking to disk.

``.tar`` / ``.tar.gz`` / ``.tgz`` / ``.tar.bz2`` / ``.tar.xz`` / ``.tar.zst`` are read
as a stream (``tarfile`` mode ``r|*``, zstd through ``zstandard``), so an archive on
S3 is never downloaded whole; ``.zip`` needs its central directory, so it reads a
seekable file (a range-reading object on S3).

An archive is planned as one unit: listing a compressed tar costs a full
decompression, which the plan (run on every invocation) must not pay. The task
counts what it enumerated (``schema.EXPANDED_ROWS``), so the shard's
``rows_in = rows_out + dropped`` still holds. Hostile members are dropped with
reasons, never extracted: ``unsafe_path`` (absolute, or ``..`` escaping the root),
``symlink``, ``hardlink``, ``special_file`` (devices, FIFOs), ``too_large``
(above ``max_file_bytes``). ``archive_cap`` ends the archive once
``max_archive_bytes`` of uncompressed data were read (zip bombs), and a corrupt
archive keeps the members read before the damage plus one ``corrupt_archive``
drop row.
"""

from __future__ import annotations

import posixpath
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

import zstandard

from codecorpus.ingest import license
from codecorpus.ingest.collect import Collector, Origin
from codecorpus.ingest.refs import ArchiveRef

SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst", ".tzst", ".zip")
_CORRUPT = (tarfile.TarError, zipfile.BadZipFile, zlib.error, EOFError, zstandard.ZstdError, OSError, ValueError)


def store_errors() -> tuple[type[Exception], ...]:
    """S3 client errors: an object that cannot be fetched is ``unreadable`` data, not a crash."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def is_archive(name: str) -> bool:
    return name.lower().endswith(SUFFIXES)


def stem(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base


@dataclass
class Member:
    """One archive entry as both formats describe it."""

    name: str
    size: int
    kind: str
    """``file`` | ``dir`` | ``symlink`` | ``hardlink`` | ``special``."""


class _Budget:
    def __init__(self, cap: int) -> None:
        self.left = cap


class ArchiveCapError(Exception):
    pass


def read_archive(ref: ArchiveRef, out: Collector) -> None:
    """Append every member of one archive to ``out`` (documents or drops)."""
    before = out.entries()
    repo_files: dict[str, dict[str, str]] = {}
    budget = _Budget(ref.max_total_bytes)
    archive_origin = Origin(ref.source, ref.repo, ref.location.rsplit("/", 1)[-1], ref.revision)
    seen = 0
    try:
        with _open(ref) as members:
            for member, read in members:
                seen += _member(ref, member, read, out, repo_files, budget)
    except ArchiveCapError:
        out.drop(archive_origin, ref.size, "archive_cap", f"more than {ref.max_total_bytes} uncompressed bytes")
        seen += 1
    except _CORRUPT as err:
        out.drop(archive_origin, ref.size, "corrupt_archive", f"{type(err).__name__}: {err}"[:300])
        seen += 1
    except store_errors() as err:
        out.drop(archive_origin, ref.size, "unreadable", type(err).__name__)
        seen += 1
    if seen == 0:
        out.drop(archive_origin, ref.size, "empty_archive")
        seen = 1
    emitted = out.entries() - before
    assert emitted == seen, f"archive {ref.location}: {seen} entries enumerated, {emitted} rows"
    out.expanded += emitted - 1
    _set_licenses(ref, out, repo_files)


def _member(ref: ArchiveRef, m: Member, read, out: Collector, repo_files: dict, budget: _Budget) -> int:
    """Handle one member; returns the rows it produced (0 for directories)."""
    if m.kind == "dir":
        return 0
    repo, path, unsafe = _place(ref, m.name)
    origin = Origin(ref.source, repo, path, ref.revision, ref.license or "unknown",
                    "recipe" if ref.license else "unknown", "code", ref.meta)
    reason = "unsafe_path" if unsafe else {"symlink": "symlink", "hardlink": "hardlink",
                                            "special": "special_file"}.get(m.kind)
    if reason is None and not path:
        reason = "no_repository"
    if reason is None and any(p in out.skip_dirs for p in path.split("/")[:-1]):
        reason = "skipped_dir"
    if reason is None:
        from codecorpus.ingest import exclusions

        reason = exclusions.path_exclusion(path, out.vendored_dirs, out.exclude_generated)
    if reason is None and m.size > ref.max_member_bytes:
        reason = "too_large"
    if reason is not None:
        out.drop(origin, m.size, reason, m.name if unsafe else None)
        return 1
    if m.size > budget.left:
        raise ArchiveCapError
    data = read(m.size + 1)
    budget.left -= len(data)
    if len(data) > ref.max_member_bytes:
        out.drop(origin, len(data), "too_large", "size header understated the content")
        return 1
    if "/" not in path and license.is_candidate(path):
        repo_files.setdefault(repo, {})[path] = data[:200_000].decode("utf-8", "replace")
    out.add_bytes(origin, data)
    return 1


def _place(ref: ArchiveRef, name: str) -> tuple[str, str, bool]:
    """(repo, path inside it, unsafe) of a member name."""
    if name.startswith("/") or "\\" in name.split("/", 1)[0] or (len(name) > 1 and name[1] == ":"):
        return ref.repo, name, True
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../") or "/../" in f"/{name}/":
        return ref.repo, name, True
    parts = [p for p in norm.split("/") if p not in ("", ".")][ref.strip_components:]
    if ref.layout == "repos":
        if len(parts) < 2:
            return ref.repo, "/".join(parts), not parts
        return parts[0], "/".join(parts[1:]), False
    return ref.repo, "/".join(parts), False


def _set_licenses(ref: ArchiveRef, out: Collector, repo_files: dict[str, dict[str, str]]) -> None:
    if ref.license:
        return
    for repo, files in sorted(repo_files.items()):
        spdx, method = license.detect(files)
        if spdx != "unknown":
            out.set_license(ref.source, repo, spdx, method)


# --- opening ----------------------------------------------------------------------


@contextmanager
def _open(ref: ArchiveRef) -> Iterator[Iterator[tuple[Member, object]]]:
    with _raw(ref) as raw:
        if ref.location.lower().endswith(".zip"):
            yield _zip_members(raw)
        else:
            yield _tar_members(_decompressed(ref.location, raw))


@contextmanager
def _raw(ref: ArchiveRef) -> Iterator[IO[bytes]]:
    if ref.location.startswith("s3://"):
        from codecorpus.ingest import s3

        seekable = ref.location.lower().endswith(".zip")
        with s3.open_url(ref.location, ref.s3, seekable=seekable) as f:
            yield f
    else:
        with open(ref.location, "rb") as f:
            yield f


def _decompressed(location: str, raw: IO[bytes]) -> IO[bytes]:
    if location.lower().endswith((".tar.zst", ".tzst")):
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    return raw


def _tar_members(stream: IO[bytes]) -> Iterator[tuple[Member, object]]:
    with tarfile.open(fileobj=stream, mode="r|*") as tar:
        for info in tar:
            kind = ("file" if info.isreg() else "dir" if info.isdir() else "symlink" if info.issym()
                    else "hardlink" if info.islnk() else "special")
            f = tar.extractfile(info) if kind == "file" else None
            yield Member(info.name, info.size, kind), (f.read if f is not None else _nothing)


def _nothing(n: int) -> bytes:
    return b""


def _zip_members(raw: IO[bytes]) -> Iterator[tuple[Member, object]]:
    zf = zipfile.ZipFile(raw)
    for info in zf.infolist():
        mode = info.external_attr >> 16
        kind = "dir" if info.is_dir() else "file"
        if mode and (mode & 0o170000) == 0o120000:
            kind = "symlink"
        elif mode and (mode & 0o170000) not in (0, 0o100000, 0o040000):
            kind = "special"

        def read(n: int, info: zipfile.ZipInfo = info) -> bytes:
            with zf.open(info) as f:
                return f.read(n)

        yield Member(info.filename, info.file_size, kind), read

"""Crash-safe file writes and file hashing, shared by every writer of run outputs.

A reader must never see half a file under its final name: a shard, an index or a
manifest is either absent or complete. So everything is written to a temporary
name in the same directory (same filesystem, so the rename is atomic), flushed
and fsynced, renamed over the final name, and the directory is fsynced so the
rename itself survives a power loss. This module never imports ray.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from codecorpus.storage import mirror as store
from codecorpus.storage.faults import checkpoint

_HASH_CHUNK = 1 << 20


def fsync_dir(directory: Path) -> None:
    """Persist a rename: on POSIX the directory entry is only durable once the directory is."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OutputWriteError(OSError):
    """A write into the run directory failed (disk full, read-only, file too large ...).

    The temporary file is already removed, so nothing half-written carries a final name.
    """

    def __init__(self, path: Path, cause: OSError):
        reason = cause.strerror or str(cause)
        super().__init__(
            cause.errno,
            f"cannot write {path}: {reason}. Free space on that device, make it writable, "
            "or choose another --out; completed shards are kept for the rerun",
        )
        self.path = path

    def __str__(self) -> str:
        return self.strerror or super().__str__()


@contextlib.contextmanager
def atomic_writer(path: Path | str) -> Iterator[BinaryIO]:
    """Open a binary file that appears at ``path`` only if the ``with`` block succeeds.

    The temporary name is hidden (leading dot) and unique per writer, so two
    attempts at the same shard (a retried task) never write into each other's
    file; the last rename wins, and both wrote the same bytes anyway. It is
    created with ``os.open`` mode 0o666 so the umask applies, unlike mkstemp's 0o600.
    A file of an S3 run lands in this node's mirror (``mirror.node_path``) and is
    published to the bucket once renamed.
    """
    path = store.node_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputWriteError(path, err) from err
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as err:
        raise OutputWriteError(path, err) from err
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        checkpoint(f"write:{path.name}")
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if isinstance(err, OSError) and not isinstance(err, OutputWriteError):
            raise OutputWriteError(path, err) from err
        raise
    fsync_dir(path.parent)
    store.publish(path)  # an S3 run directory gets the finished file (storage/mirror.py)


TEMP_GLOB = ".*.tmp"


def remove_stale_temps(directory: Path) -> int:
    """Delete temporary files a killed writer left behind (they never carry a final name)."""
    removed = 0
    directory = store.node_path(directory)  # temporaries are never published: a local listing
    if directory.exists():
        for tmp in directory.rglob(TEMP_GLOB):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed


def atomic_write_bytes(path: Path | str, data: bytes | memoryview) -> None:
    with atomic_writer(path) as f:
        f.write(data)


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path | str) -> str:
    """sha256 hex of a file, read in 1 MiB chunks so a multi-GB shard needs no memory."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_digests(paths: tuple[str, ...] | list[str]) -> list[str]:
    """Each file's sha256 (``missing:PATH`` for one that is not there): what a stage's hash
    takes from the files its config names."""
    out = []
    for p in paths:
        try:
            out.append(sha256_file(p))
        except OSError:
            out.append(f"missing:{p}")
    return out

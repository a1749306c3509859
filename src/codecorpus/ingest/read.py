"""Reading a planned shard: units -> document rows, or drop rows with a reason.

Bad input is data: a file that vanished, cannot be read, is binary, empty,
generated, or not text in any confidently detected encoding becomes a drop row,
never an exception. Each unit type has its reader: local files here, git blobs
(one ``git cat-file --batch`` per repository and shard), S3 objects, archives
(member by member) and dataset slices (record by record). They all feed one
:class:`Collector` (``ingest/collect.py``, which the archive and dataset readers
use too), which owns decoding, exclusions, notebook and HTML conversion, and the
row layout.

The collector keeps the byte accounts of the shard: every document row carries its
input size (the planned size of a file, the size of an archive member or record as
read), and ``bytes_changed`` is what decoding and conversion (re-encoding to UTF-8,
notebooks to scripts, HTML to text) added or removed, so that
``bytes_in + bytes_changed = bytes_out + bytes_dropped`` holds for the shard.
Entries that are not documents (:data:`codecorpus.ingest.refs.NOT_DOCUMENTS`) go to
``MapResult.skipped`` instead of the drop log.
"""

from __future__ import annotations

from collections import defaultdict

from codecorpus import schema
from codecorpus.ingest import archive, exclusions, records
from codecorpus.ingest.collect import Collector, Origin
from codecorpus.ingest.config import IngestConfig
from codecorpus.ingest.refs import ArchiveRef, FileRef, RecordRef, Unit
from codecorpus.stage import MapResult

BINARY_SNIFF_BYTES = exclusions.BINARY_SNIFF_BYTES


def read_shard(refs: list[Unit], cfg: IngestConfig | None = None) -> MapResult:
    """Read every unit of a shard, in plan order."""
    cfg = cfg or IngestConfig()
    out = Collector(
        cfg.min_encoding_evidence, cfg.exclude_generated, frozenset(cfg.vendored_dirs), frozenset(cfg.skip_dirs)
    )
    git_blobs = _prefetch_git([r for r in refs if isinstance(r, FileRef) and r.store == "git" and r.skip is None])
    expanded_bytes = 0
    for ref in refs:
        if isinstance(ref, ArchiveRef | RecordRef):
            before = out.bytes_read
            _read_container(ref, out)
            expanded_bytes += out.bytes_read - before  # the plan sized the container, not its documents
        else:
            _read_file(ref, out, git_blobs)
    result = out.result()
    if expanded_bytes:
        result.counters[schema.EXPANDED_BYTES] = expanded_bytes
    return result


def _read_container(ref: ArchiveRef | RecordRef, out: Collector) -> None:
    if isinstance(ref, ArchiveRef):
        archive.read_archive(ref, out)
    else:
        records.read_records(ref, out)


def origin_of(ref: FileRef) -> Origin:
    return Origin(ref.source, ref.repo, ref.path, ref.revision, ref.license, ref.license_method, ref.kind, ref.meta)


def _read_file(ref: FileRef, out: Collector, git_blobs: dict[tuple[str, str], bytes | str]) -> None:
    origin = origin_of(ref)
    if ref.skip is not None:
        return out.drop(origin, ref.size, ref.skip, ref.detail)
    if ref.store == "git":
        blob = git_blobs.get((ref.container, ref.key), "missing")
        if isinstance(blob, str):
            return out.drop(origin, ref.size, blob)
        return out.add_bytes(origin, blob, ref.size)
    if ref.store == "s3":
        from codecorpus.ingest import s3

        data, reason, detail = s3.read_object(ref)
    else:
        data, reason, detail = _read_local(ref)
    if reason is not None:
        return out.drop(origin, ref.size, reason, detail)
    return out.add_bytes(origin, data, ref.size)


def _read_local(ref: FileRef) -> tuple[bytes, str | None, str | None]:
    """(bytes, drop reason, detail). Reads the file once; nothing is executed or followed."""
    try:
        with open(ref.abspath, "rb") as f:
            data = f.read(ref.size + 1)
    except FileNotFoundError:
        return b"", "missing", None
    except OSError as err:
        return b"", "unreadable", err.strerror
    return data, None, None


def _prefetch_git(refs: list[FileRef]) -> dict[tuple[str, str], bytes | str]:
    if not refs:
        return {}
    from codecorpus.ingest import git

    by_repo: dict[str, list[str]] = defaultdict(list)
    urls: dict[str, str] = {}
    for r in refs:
        by_repo[r.container].append(r.key)
        if r.abspath:  # the URL the planner cloned ``container`` from
            urls[r.container] = r.abspath
    blobs: dict[tuple[str, str], bytes | str] = {}
    for gitdir, shas in sorted(by_repo.items()):
        if gitdir in urls:
            git.clone_here(urls[gitdir], gitdir)
        for sha, data in git.cat_blobs(gitdir, shas).items():
            blobs[(gitdir, sha)] = data
    return blobs

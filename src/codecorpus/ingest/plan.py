"""Planning: list every file of every source, in a deterministic order, into shards.

The plan is a pure function of the sources on disk: files are sorted by
(source position, repository, path) and cut into shards of about
``shard_bytes`` input bytes. Entries that will not become documents (a symlink,
a version-control directory, a file over the size cap) are planned too, with
their drop reason decided here, so that the shard that owns them logs the drop
and every shard obeys ``rows_in = rows_out + dropped``.

Entries that are not documents at all (a directory stepped over, a symlink, a
device, a submodule pointer: :data:`NOT_DOCUMENTS`) are planned the same way but
counted apart, as ``skipped_entries`` by reason and in the ``_skipped`` log, so
they never count as dropped documents nor carry bytes into the byte accounting.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path
from typing import TYPE_CHECKING

from codecorpus.ingest import docs, exclusions, git, license, pyenv
from codecorpus.ingest.config import (
    ArchiveSource,
    DocsSource,
    GitSource,
    IngestConfig,
    LocalSource,
    PythonEnvSource,
    RecordColumns,
    RecordsSource,
    S3Source,
)
from codecorpus.ingest.git import GitListing, Planned
from codecorpus.ingest.refs import NOT_DOCUMENTS, ArchiveRef, FileRef, Repository, Unit
from codecorpus.model import RecipeError

if TYPE_CHECKING:
    from codecorpus.config.recipe import Source

NON_INGEST_SOURCES = ("traces",)
"""Source types another part of the pipeline reads itself (the SFT traces)."""


def plan_shards(sources: Iterable[Source], cfg: IngestConfig) -> list[list[Unit]]:
    units = [u for src in sources if src.type not in NON_INGEST_SOURCES for u in plan_source(src, cfg)]
    return cut_into_shards(units, cfg.shard_bytes)


def plan_source(src: Source, cfg: IngestConfig) -> list[Unit]:
    """Every unit of one source, in a deterministic order."""
    if isinstance(src, GitSource):
        return list(git.plan(src, cfg))
    if isinstance(src, ArchiveSource):
        return _archive_units(src, cfg)
    if isinstance(src, S3Source):
        return _s3_units(src, cfg)
    if isinstance(src, RecordsSource):
        from codecorpus.ingest import records

        return list(records.plan(src, cfg))
    return [ref for repo in repositories(src) for ref in list_files(repo, cfg)]


def is_document(unit: Unit) -> bool:
    """Whether a planned unit is a document (kept or dropped), not a stepped-over entry."""
    return getattr(unit, "skip", None) not in NOT_DOCUMENTS


def document_bytes(shard: list[Unit]) -> int:
    """Input bytes of a shard's planned files that are documents, too large ones included.

    Archives and record files count nothing here: their reader counts the bytes of the
    members and records it finds (``schema.EXPANDED_BYTES``).
    """
    return sum(unit_document_bytes(u) for u in shard)


def unit_document_bytes(unit: Unit) -> int:
    """A unit's share of ``document_bytes``: its size when it is a document file, else 0."""
    return unit.size if isinstance(unit, FileRef) and is_document(unit) else 0


def counted_bytes(unit: Unit) -> int:
    """The bytes the shard cut counts for a unit: its size unless it is skipped."""
    return unit.size if unit.skip is None else 0


def plan_fingerprint(shard: list[Unit]) -> str:
    """Hash of a shard's plan (paths and sizes): a changed input tree invalidates its marker.

    It is :func:`fingerprint_of_lines` over the units' :func:`unit_line` texts: the sha256
    of ``json.dumps`` of the list of the units' fields, keys sorted. S3 connection settings
    (and their secrets) are left out: where the bytes come from is not what they are.
    """
    return fingerprint_of_lines(unit_line(u) for u in shard)


def fingerprint_of_lines(lines: Iterable[str]) -> str:
    """The plan fingerprint of a shard given as its units' :func:`unit_line` texts, in order.

    The lines are hashed as ``json.dumps`` joins a list (``[``, ``, ``, ``]``), one at a
    time, so a planner that streams a shard's lines from batch files never holds them all.

    >>> want = hashlib.sha256(b'[{"a": 1}, {"b": 2}]').hexdigest()
    >>> fingerprint_of_lines(['{"a": 1}', '{"b": 2}']) == want
    True
    """
    h = hashlib.sha256(b"[")
    separator = b""
    for line in lines:
        h.update(separator)
        h.update(line.encode("ascii"))
        separator = b", "
    h.update(b"]")
    return h.hexdigest()


def unit_line(unit: Unit) -> str:
    """A unit's text in the plan fingerprint: ``json.dumps`` of its fields, keys sorted (ASCII).

    A file's line is built field by field from :data:`_FILE_TEMPLATE`: the same text, a few
    times sooner (planning writes one per file); a value not of its field's declared type
    leaves it to ``json.dumps``.
    """
    line = _file_line(unit) if type(unit) is FileRef and unit.s3 is None else None
    if line is None:
        line = json.dumps(_fingerprint_fields(unit), sort_keys=True, default=str)
    return line


def _fingerprint_fields(unit: Unit) -> dict:
    fields = {f.name: getattr(unit, f.name) for f in dataclasses.fields(unit) if f.name != "s3"}
    fields["_unit"] = type(unit).__name__
    return fields


def _json_int(value: object) -> str:
    if type(value) is not int:  # a bool is an int to Python, not to JSON
        raise TypeError(type(value).__name__)
    return int.__repr__(value)


def _json_optional_string(value: str | None) -> str:
    return "null" if value is None else _json_string(value)


_ENCODERS = {"str": _json_string, "int": _json_int, "str | None": _json_optional_string}
"""JSON text of a FileRef field by its declared type (each raises TypeError on another type)."""
_FILE_FIELDS = sorted([(f.name, f.type) for f in dataclasses.fields(FileRef) if f.name != "s3"] + [("_unit", "")])
_FILE_VALUES = operator.attrgetter(*(k for k, _ in _FILE_FIELDS if k != "_unit"))
_FILE_ENCODERS = tuple(_ENCODERS[t] for k, t in _FILE_FIELDS if k != "_unit")
_FILE_TEMPLATE = "{" + ", ".join('"_unit": "FileRef"' if k == "_unit" else f'"{k}": %s' for k, _ in _FILE_FIELDS) + "}"


def _file_line(unit: FileRef) -> str | None:
    try:
        return _FILE_TEMPLATE % tuple(map(operator.call, _FILE_ENCODERS, _FILE_VALUES(unit)))
    except TypeError:  # a value not of its field's type: json.dumps decides
        return None


def cut_into_shards(refs: list[FileRef], shard_bytes: int) -> list[list[FileRef]]:
    """Greedy, order-preserving cut: a new shard starts once the current one holds ``shard_bytes``.

    >>> refs = [FileRef("s", "r", str(i), "", 5, "", "") for i in range(5)]
    >>> [len(s) for s in cut_into_shards(refs, 10)]
    [2, 2, 1]
    """
    shards: list[list[FileRef]] = []
    current: list[FileRef] = []
    size = 0
    for ref in refs:
        current.append(ref)
        size += counted_bytes(ref)
        if size >= shard_bytes:
            shards.append(current)
            current, size = [], 0
    if current or not shards:
        shards.append(current)
    return shards


# --- listings: the repositories a planning task lists -----------------------------


@dataclass(frozen=True)
class LocalListing:
    """One repository folder of a local or docs source, listed on its own."""

    src: LocalSource | DocsSource
    name: str
    path: str

    @property
    def location(self) -> str:
        """The repository's folder, for messages."""
        return self.path

    def plan(self, cfg: IngestConfig) -> Planned:
        return Planned(self.name, list_files(local_repository(self.src, self.name, Path(self.path)), cfg))


@dataclass(frozen=True)
class RepositoryListing:
    """One repository already described (a distribution of a python-env source), listed on its own."""

    repo: Repository

    @property
    def location(self) -> str:
        """The repository's root, for messages."""
        return str(self.repo.root)

    def plan(self, cfg: IngestConfig) -> Planned:
        return Planned(self.repo.name, list_files(self.repo, cfg))


Listing = LocalListing | RepositoryListing | GitListing


def source_listings(src: Source, cfg: IngestConfig) -> list[Listing | list[Unit]]:
    """A source as its plan's pieces in order: repositories to list, or units planned already.

    Repositories on disk or in git (local, docs, python-env, git sources) are listings,
    each listed by itself, so a planner can fan them out over tasks. Archives, record
    files and S3 prefixes are planned here as today, as one block of units: an archive
    or a dataset slice is one unit for however many files it holds, and an S3 prefix is
    one flat object listing that names every object already.
    """
    if isinstance(src, GitSource):
        return list(git.listings(src))
    if isinstance(src, ArchiveSource | S3Source | RecordsSource):
        return [plan_source(src, cfg)]
    if isinstance(src, LocalSource | DocsSource):
        return [LocalListing(src, name, str(path)) for name, path in local_repository_dirs(src)]
    return [RepositoryListing(r) for r in repositories(src)]


# --- repositories of each source type ----------------------------------------------


def repositories(src: LocalSource | PythonEnvSource | DocsSource) -> list[Repository]:
    if isinstance(src, LocalSource | DocsSource):
        return _local_repositories(src)
    return [
        dataclasses.replace(r, license_method="package_metadata" if r.license != "unknown" else "unknown")
        for r in pyenv.repositories(src)
    ]


def _local_repositories(src: LocalSource | DocsSource) -> list[Repository]:
    return [local_repository(src, name, path) for name, path in local_repository_dirs(src)]


def local_repository_dirs(src: LocalSource | DocsSource) -> list[tuple[str, Path]]:
    """(name, folder) of each repository of a local or docs source, sorted by name (one scandir)."""
    root = Path(src.path)
    if not root.is_dir():
        raise RecipeError(f"sources[{src.name}].path: {root} is not a directory; point it at a repository or a folder of them")
    layout = src.layout
    if layout == "auto":
        has_git = (root / ".git").exists()
        has_files = any(e.is_file() for e in os.scandir(root))
        layout = "repo" if has_git or has_files else "repos"
    if layout == "repo":
        return [(root.name, root)]
    return [(d, root / d) for d in sorted(e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False))]


def local_repository(src: LocalSource | DocsSource, name: str, path: Path) -> Repository:
    """One repository folder: its license (recipe's or detected) and the commit its work tree is at."""
    kind = "docs" if isinstance(src, DocsSource) else "code"
    recipe_license = src.license if src.license not in (None, "unknown") else None
    spdx, method = (recipe_license, "recipe") if recipe_license else _detect_license(path)
    return Repository(src.name, name, path, _git_head(path), spdx, license_method=method, kind=kind, meta=src.metadata or "")


def _detect_license(root: Path) -> tuple[str, str]:
    """License of a repository directory from its top-level LICENSE/COPYING/README files."""
    texts = {}
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return "unknown", "unknown"
    for e in entries:
        if license.is_candidate(e.name) and e.is_file(follow_symlinks=False):
            try:
                with open(e.path, "rb") as f:
                    texts[e.name] = f.read(200_000).decode("utf-8", "replace")
            except OSError:
                continue
    return license.detect(texts)


def _git_head(repo: Path) -> str:
    """The commit a working tree is at, read from .git without running git ('' if none)."""
    git = repo / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            ref_file = git / ref
            if ref_file.exists():
                return ref_file.read_text().strip()
            packed = git / "packed-refs"
            if packed.exists():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
            return ""
        return head
    except OSError:
        return ""


# --- files of a repository --------------------------------------------------------


def list_files(repo: Repository, cfg: IngestConfig) -> list[FileRef]:
    skip_dirs = set(cfg.skip_dirs)
    vendored = frozenset(cfg.vendored_dirs)
    if repo.files is not None:
        entries = _explicit(repo, skip_dirs)
    else:
        entries = _walk(repo.root, skip_dirs, set(repo.exclude), vendored)
    refs = []
    root = str(repo.root)
    for rel, st, skip in entries:
        size = st.st_size if st is not None else 0
        if skip is None:
            skip = exclusions.path_exclusion(rel, vendored, cfg.exclude_generated)
        if skip is None and repo.kind == "docs" and not docs.is_doc(rel):
            skip = "not_docs"
        if skip is None and st is not None and size > cfg.max_file_bytes:
            skip = "too_large"
        refs.append(FileRef(repo.source, repo.name, rel, _joined(root, rel), size, repo.revision,
                            repo.license, skip, kind=repo.kind, license_method=repo.license_method,
                            meta=repo.meta))
    refs.sort(key=lambda r: r.path)
    return refs


def _joined(root: str, rel: str) -> str:
    """``str(Path(root) / rel)`` without pathlib's parsing for a plain relative path (the walk's).

    >>> _joined("/r", "a/b.py"), _joined("/r", "."), _joined("/r", "a//b"), _joined("/", "x")
    ('/r/a/b.py', '/r', '/r/a/b', '/x')
    """
    if root.endswith("/") or not rel or rel[0] in "./" or "//" in rel or "/." in rel or rel.endswith("/"):
        return str(Path(root) / rel)
    return f"{root}/{rel}"


Entry = tuple[str, "os.stat_result | None", "str | None"]


def _walk(root: Path, skip_dirs: set[str], exclude: set[str], vendored: frozenset[str] = frozenset()) -> Iterator[Entry]:
    """Every entry under ``root`` without following symlinks; skipped dirs become one entry each."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            yield rel_dir or ".", None, "unreadable_dir"
            continue
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if rel in exclude:
                yield rel, None, "skipped_dir"
            else:
                yield from _classify(e, rel, skip_dirs, stack, vendored)


def _classify(
    e: os.DirEntry, rel: str, skip_dirs: set[str], stack: list[str], vendored: frozenset[str]
) -> Iterator[Entry]:
    try:
        st = e.stat(follow_symlinks=False)
    except OSError:
        yield rel, None, "unreadable"
        return
    if stat.S_ISLNK(st.st_mode):
        yield rel, st, "symlink"
    elif stat.S_ISDIR(st.st_mode):
        if e.name in skip_dirs:
            yield rel, None, "skipped_dir"
        elif e.name in vendored:
            yield rel, None, "vendored_dir"
        else:
            stack.append(rel)
    elif stat.S_ISREG(st.st_mode):
        yield rel, st, None
    else:
        yield rel, st, "not_regular_file"


def _explicit(repo: Repository, skip_dirs: set[str]) -> Iterator[Entry]:
    """Files named by a list (a distribution's RECORD): installer metadata is logged, not read."""
    for rel in repo.files or ():
        parts = rel.split("/")
        if any(p in skip_dirs for p in parts[:-1]):
            yield rel, None, "skipped_dir"
            continue
        if any(p.endswith(".dist-info") for p in parts[:-1]):
            yield rel, None, "package_metadata"
            continue
        path = repo.root / rel
        try:
            st = os.lstat(path)
        except OSError:
            yield rel, None, "missing"
            continue
        if stat.S_ISLNK(st.st_mode):
            yield rel, st, "symlink"
        elif not stat.S_ISREG(st.st_mode):
            yield rel, st, "not_regular_file"
        else:
            yield rel, st, None


# --- archives and S3 ----------------------------------------------------------------


def _archive_units(src: ArchiveSource, cfg: IngestConfig) -> list[Unit]:
    from codecorpus.ingest import archive, s3

    conn = s3.conn_from(src.s3) if src.path.startswith("s3://") else None
    if conn is not None:
        bucket, _ = s3.split_url(src.path)
        found = [(f"s3://{bucket}/{k}", n) for k, n in s3.list_objects(src.path, conn)]
    else:
        root = Path(src.path)
        if root.is_file():
            found = [(str(root), root.stat().st_size)]
        elif root.is_dir():
            found = [(str(p), p.stat().st_size) for p in sorted(root.rglob("*")) if p.is_file()]
        else:
            raise RecipeError(f"sources[{src.name}].path: {root} does not exist; name an archive or a folder of them")
    found = [(loc, n) for loc, n in found if archive.is_archive(loc)]
    if not found:
        raise RecipeError(f"sources[{src.name}].path: no .tar/.tar.gz/.tar.zst/.zip archives at {src.path}")
    # the tighter of the source's and the stage's zip-bomb caps (the source's key was once ignored)
    cfg = cfg.model_copy(update={"max_archive_bytes": min(cfg.max_archive_bytes, src.max_archive_bytes)})
    return [_archive_ref(src.name, loc, n, src.layout, src.strip_components, src.license,
                         src.metadata or "", cfg, conn) for loc, n in found]


def _archive_ref(source: str, loc: str, size: int, layout: str, strip: int, spdx: str | None,
                 meta: str, cfg: IngestConfig, conn) -> ArchiveRef:
    from codecorpus.ingest import archive

    return ArchiveRef(source, loc, size, archive.stem(loc), layout, strip, "", spdx, meta,
                      cfg.max_file_bytes, cfg.max_archive_bytes, conn)


def _s3_units(src: S3Source, cfg: IngestConfig) -> list[Unit]:
    """Objects under the prefix: archives and datasets by suffix, the rest are repository files."""
    from codecorpus.ingest import archive, records, s3

    conn = s3.conn_from(src.s3)
    bucket, prefix = s3.split_url(src.url)
    prefix = prefix.rstrip("/")
    vendored = frozenset(cfg.vendored_dirs)
    units: list[Unit] = []
    for key, size in s3.list_objects(src.url, conn):
        loc = f"s3://{bucket}/{key}"
        rel = key[len(prefix):].lstrip("/") if prefix else key
        if archive.is_archive(key):
            units.append(_archive_ref(src.name, loc, size, "repo", 0, src.license, src.metadata or "", cfg, conn))
        elif records.fmt_of(key) is not None and (src.columns or records.fmt_of(key) == "parquet"):
            units.extend(records.plan(
                RecordsSource(type=records.fmt_of(key), name=src.name, path=loc,
                              columns=RecordColumns(**src.columns), license=src.license or "unknown",
                              s3=src.s3, metadata=src.metadata),
                cfg,
            ))
        else:
            units.append(_s3_file(src, rel, key, size, bucket, conn, vendored, cfg))
    return units if src.license else _s3_licenses(units)


def _s3_licenses(units: list[Unit]) -> list[Unit]:
    """Detect each S3 repository's license from its top-level LICENSE/README objects."""
    from codecorpus.ingest import s3

    texts: dict[str, dict[str, str]] = {}
    for u in units:
        if isinstance(u, FileRef) and u.skip is None and "/" not in u.path and license.is_candidate(u.path):
            data, reason, _ = s3.read_object(u)
            if reason is None:
                texts.setdefault(u.repo, {})[u.path] = data[:200_000].decode("utf-8", "replace")
    found = {repo: license.detect(files) for repo, files in texts.items()}
    return [
        dataclasses.replace(u, license=found[u.repo][0], license_method=found[u.repo][1])
        if isinstance(u, FileRef) and u.repo in found else u
        for u in units
    ]


def _s3_file(src: S3Source, rel: str, key: str, size: int, bucket: str, conn, vendored, cfg) -> FileRef:
    parts = rel.split("/")
    if src.layout == "repos" and len(parts) > 1:
        repo, path = parts[0], "/".join(parts[1:])
    else:
        repo, path = src.url.rstrip("/").rsplit("/", 1)[-1], rel
    skip = exclusions.path_exclusion(path, vendored, cfg.exclude_generated)
    if skip is None and size > cfg.max_file_bytes:
        skip = "too_large"
    spdx = src.license or "unknown"
    return FileRef(src.name, repo, path, "", size, "", spdx, skip, store="s3", container=bucket, key=key,
                   license_method="recipe" if src.license else "unknown", meta=src.metadata or "", s3=conn)

"""Planning: list every file of every source, in a deterministic order, into shards.

The plan is a pure function of the sources on disk: files are sorted by
(source position, repository, path) and cut into shards of about
``shard_bytes`` input bytes. Entries that will not become documents (a symlink,
a version-control directory, a file over the size cap) are planned too, with
their drop reason decided here, so that the shard that owns them logs the drop
and every shard obeys ``rows_in = rows_out + dropped``.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path

from codecorpus.config import IngestConfig, LocalSource, PythonEnvSource, RecipeError
from codecorpus.ingest import pyenv
from codecorpus.ingest.refs import FileRef, Repository


def plan_shards(sources: Iterable[LocalSource | PythonEnvSource], cfg: IngestConfig) -> list[list[FileRef]]:
    refs = [ref for src in sources for repo in repositories(src) for ref in list_files(repo, cfg)]
    return cut_into_shards(refs, cfg.shard_bytes)


def plan_fingerprint(shard: list[FileRef]) -> str:
    """Hash of a shard's plan (paths and sizes): a changed input tree invalidates its marker."""
    payload = json.dumps([asdict(r) for r in shard], sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()


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
        size += ref.size if ref.skip is None else 0
        if size >= shard_bytes:
            shards.append(current)
            current, size = [], 0
    if current or not shards:
        shards.append(current)
    return shards


# --- repositories of each source type ----------------------------------------------


def repositories(src: LocalSource | PythonEnvSource) -> list[Repository]:
    if isinstance(src, LocalSource):
        return _local_repositories(src)
    return pyenv.repositories(src)


def _local_repositories(src: LocalSource) -> list[Repository]:
    root = Path(src.path)
    if not root.is_dir():
        raise RecipeError(f"sources[{src.name}].path: {root} is not a directory; point it at a repository or a folder of them")
    layout = src.layout
    if layout == "auto":
        has_git = (root / ".git").exists()
        has_files = any(e.is_file() for e in os.scandir(root))
        layout = "repo" if has_git or has_files else "repos"
    if layout == "repo":
        return [Repository(src.name, root.name, root, _git_head(root), src.license)]
    subdirs = sorted(e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False))
    return [Repository(src.name, d, root / d, _git_head(root / d), src.license) for d in subdirs]


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
    if repo.files is not None:
        entries = _explicit(repo, skip_dirs)
    else:
        entries = _walk(repo.root, skip_dirs, set(repo.exclude))
    refs = []
    for rel, st, skip in entries:
        size = st.st_size if st is not None else 0
        if skip is None and st is not None and size > cfg.max_file_bytes:
            skip = "too_large"
        refs.append(FileRef(repo.source, repo.name, rel, str(repo.root / rel), size, repo.revision, repo.license, skip))
    refs.sort(key=lambda r: r.path)
    return refs


Entry = tuple[str, "os.stat_result | None", "str | None"]


def _walk(root: Path, skip_dirs: set[str], exclude: set[str]) -> Iterator[Entry]:
    """Every entry under ``root`` without following symlinks; skipped dirs become one entry each."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            yield rel_dir or ".", None, "unreadable"
            continue
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if rel in exclude:
                yield rel, None, "skipped_dir"
            else:
                yield from _classify(e, rel, skip_dirs, stack)


def _classify(e: os.DirEntry, rel: str, skip_dirs: set[str], stack: list[str]) -> Iterator[Entry]:
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

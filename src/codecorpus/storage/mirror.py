"""A run directory on S3: a local mirror that publishes every write, fetches on read, lists the bucket.

Every file of a run is written through ``atomic.atomic_writer``; when a run store is
active, the writer uploads the finished file to ``s3://bucket/prefix/<same
relative path>`` after the local rename (an S3 PUT is atomic: an object is
complete or absent, like our renamed files). Readers of a named run file call
``ensure_local(path)``, which downloads the object when the mirror lacks it;
``exists(path)`` asks the same question without a reader. Readers that *list*
a run directory call ``list_files(directory, pattern)``, which lists the bucket
(ListObjectsV2 under the directory's prefix), never the mirror. So a job on
any node, a resumed run on another machine, ``manifest verify`` and ``report``
from a fresh process all see the files every node wrote, and the bytes in the
bucket are the bytes a local run writes.

The bucket is the truth of a listing, not a merge with the mirror: a mirror
can hold files another node has since removed (a stage reset, the members of a
merged token shard), and every file a writer finishes is in the bucket before
the writer returns. It is the truth of a file's bytes too: a mirror copy is
read only while it is the version the bucket holds. Each node notes the ETag
of every object it uploads or downloads (``<mirror>.versions/<path>.etag``,
beside the mirror, never in it); ``ensure_local`` and ``exists`` compare it
with the bucket's (one HEAD, or the ETag a listing already returned), so a
copy that a stage reset on another machine replaced is fetched again and one
it removed is deleted, never read. A file in the mirror with no noted version
was never published (a node-local working folder) and is left alone.
Temporary files are the one local-only thing (never published);
``atomic.remove_stale_temps`` lists them locally on purpose.

Each node keeps its own mirror: its root is ``mirror_root(url)`` under that
node's ``CODECORPUS_CACHE_DIR`` (default ``~/.cache/codecorpus/runs``). The store
travels to Ray workers as the environment variable ``CODECORPUS_RUN_STORE``
(the URL and the driver's mirror root, never a credential). Paths the driver
names (a job's ``RunPaths``, any path under the driver's root) are rebased
onto the worker's own root by ``node_path``, so nodes whose cache
directories differ need no shared file system and no shared path layout.
Credentials come from the usual AWS variables or files on each node
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

STORE_ENV = "CODECORPUS_RUN_STORE"
CACHE_ENV = "CODECORPUS_CACHE_DIR"


@dataclass(frozen=True)
class RunStore:
    """An S3 run directory as this process sees it.

    ``local_root`` is this node's mirror; ``origin_root`` is the mirror root of the
    process that activated the store (the driver), under which the paths in task
    arguments are spelled. On the driver, and wherever the two agree, they are equal.
    """

    url: str
    local_root: str
    origin_root: str = ""

    @property
    def bucket(self) -> str:
        return self.url.removeprefix("s3://").partition("/")[0]

    @property
    def prefix(self) -> str:
        return self.url.removeprefix("s3://").partition("/")[2].strip("/")

    def relative(self, path: Path | str) -> str | None:
        """``path`` relative to the run (under this node's or the driver's root), or None outside it."""
        resolved = Path(path).resolve()
        for root in dict.fromkeys((self.local_root, self.origin_root or self.local_root)):
            with contextlib.suppress(ValueError):
                rel = resolved.relative_to(Path(root).resolve()).as_posix()
                return "" if rel == "." else rel
        return None

    def key(self, path: Path | str) -> str | None:
        """The object key of a run path, or None when the path is not in the run."""
        rel = self.relative(path)
        if rel is None:
            return None
        return "/".join(part for part in (self.prefix, rel) if part)

    def node_path(self, path: Path | str) -> Path:
        """Where a run path lives on this node (a path outside the run is returned as it is)."""
        return self._under(self.local_root, path)

    def origin_path(self, path: Path | str) -> Path:
        """A run path spelled under the driver's root, which every node's ``node_path`` rebases
        (a path outside the run is returned as it is)."""
        return self._under(self.origin_root or self.local_root, path)

    def _under(self, root: str, path: Path | str) -> Path:
        rel = self.relative(path)
        return Path(path) if rel is None else Path(root, rel) if rel else Path(root)


def mirror_root(url: str) -> Path:
    """Where this node's mirror of an S3 run lives (stable per URL, so a rerun reuses it)."""
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "codecorpus" / "runs")
    return base / hashlib.sha256(url.encode()).hexdigest()[:16]


def activate(url: str) -> RunStore:
    """Make ``url`` this process's (and its future Ray workers') run store."""
    if not url.startswith("s3://") or not url.removeprefix("s3://").partition("/")[0]:
        raise ValueError(f"--out {url!r}: an S3 run directory is s3://BUCKET/PREFIX")
    url = url.rstrip("/")
    root = str(mirror_root(url))
    Path(root).mkdir(parents=True, exist_ok=True)
    os.environ[STORE_ENV] = json.dumps({"url": url, "local_root": root})
    _active.cache_clear()
    return RunStore(url, root, root)


def deactivate() -> None:
    os.environ.pop(STORE_ENV, None)
    _active.cache_clear()


@functools.cache
def _active() -> RunStore | None:
    raw = os.environ.get(STORE_ENV)
    if not raw:
        return None
    sent = json.loads(raw)
    return RunStore(sent["url"], str(mirror_root(sent["url"])), sent["local_root"])


def active() -> RunStore | None:
    return _active()


def node_path(path: Path | str) -> Path:
    """``path`` on this node: a path under the driver's mirror of the active run is rebased
    onto this node's mirror; any other path (a local run, an input) is unchanged."""
    store = active()
    return store.node_path(path) if store else Path(path)


def origin_path(path: Path | str) -> Path:
    """``path`` as a task records it in its output (a row naming a run file): a path under this
    node's mirror is spelled under the driver's, so ``node_path`` finds it on any node; any
    other path (a local run, an input) is unchanged."""
    store = active()
    return store.origin_path(path) if store else Path(path)


@functools.cache
def _client() -> Any:
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3",
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        region_name=os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or "us-east-1",
        config=Config(retries={"max_attempts": 5, "mode": "standard"}, s3={"addressing_style": "path"}),
    )


def _objects(store: RunStore, prefix: str, recursive: bool = True) -> Iterator[tuple[str, str]]:
    """(key, ETag) of the objects under ``prefix`` (one directory level only when not ``recursive``)."""
    pages = _client().get_paginator("list_objects_v2").paginate(
        Bucket=store.bucket, Prefix=prefix, **({} if recursive else {"Delimiter": "/"}))
    for page in pages:
        for obj in page.get("Contents", []):
            yield obj["Key"], obj["ETag"]


def _subdirectories(store: RunStore, prefix: str) -> Iterator[str]:
    """The key prefixes one level below ``prefix`` (each ending in ``/``): S3's CommonPrefixes."""
    pages = _client().get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix=prefix, Delimiter="/")
    for page in pages:
        for sub in page.get("CommonPrefixes", []):
            yield sub["Prefix"]


def _matching(store: RunStore, prefix: str, want: list[str]) -> Iterator[tuple[str, str]]:
    """(key, ETag) of the objects whose path under ``prefix`` matches ``want`` part by part,
    with one delimited listing per directory level it descends (never the subtree's every key)."""
    if len(want) == 1:
        for key, etag in _objects(store, prefix, recursive=False):
            if fnmatch.fnmatchcase(key[len(prefix):], want[0]):
                yield key, etag
        return
    if not _GLOB_CHARS.intersection(want[0]):
        yield from _matching(store, f"{prefix}{want[0]}/", want[1:])
        return
    for sub in _subdirectories(store, prefix):
        if fnmatch.fnmatchcase(sub[len(prefix):-1], want[0]):
            yield from _matching(store, sub, want[1:])


_GLOB_CHARS = frozenset("*?[")


def _keys(store: RunStore, prefix: str) -> Iterator[str]:
    """Every object key under ``prefix``, at any depth."""
    return (key for key, _ in _objects(store, prefix))


def _not_found(err: Exception) -> bool:
    """Whether a botocore ClientError says the object is not there."""
    return getattr(err, "response", {}).get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound")


_DELETE_BATCH = 1000
"""Keys per DeleteObjects request (S3's limit)."""


_SINGLE_PUT_BYTES = 8 * 1024 * 1024
"""Files up to this size go up in one PutObject, whose answer names the new ETag (boto3's
``upload_file`` does the same below its 8 MB multipart threshold, but returns nothing)."""


def publish(path: Path) -> None:
    """Upload a just-renamed run file (no-op without an active store or outside the run)."""
    store = active()
    key = store.key(path) if store else None
    if key is None:
        return
    local = store.node_path(path)
    if local.stat().st_size <= _SINGLE_PUT_BYTES:
        with open(local, "rb") as f:
            etag = _client().put_object(Bucket=store.bucket, Key=key, Body=f)["ETag"]
    else:
        _client().upload_file(str(local), store.bucket, key)
        head = _head(store, key)
        etag = head["ETag"] if head else None
    _note_version(store, local, etag)


def _versions(store: RunStore, local: Path) -> Path:
    """The folder of this node's version notes that mirrors ``local`` (a run folder)."""
    return Path(f"{store.local_root}.versions", Path(local).relative_to(store.local_root))


def _version_file(store: RunStore, local: Path) -> Path:
    """Where this node notes the version (ETag) of its mirror copy of a run file: beside the
    mirror, named ``<file>.etag`` (so no listing or glob of run files ever meets one)."""
    folder = _versions(store, Path(local).parent)
    return folder / f"{Path(local).name}.etag"


def _note_version(store: RunStore, local: Path, etag: str | None) -> None:
    note = _version_file(store, local)
    if etag is None:
        note.unlink(missing_ok=True)
        return
    note.parent.mkdir(parents=True, exist_ok=True)
    tmp = note.with_name(f".{note.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_text(etag)
    os.replace(tmp, note)


def _noted_version(store: RunStore, local: Path) -> str | None:
    try:
        return _version_file(store, local).read_text()
    except OSError:
        return None


def _head(store: RunStore, key: str) -> dict[str, Any] | None:
    """The object's HEAD answer, or None when the bucket does not hold it."""
    from botocore.exceptions import ClientError

    try:
        return _client().head_object(Bucket=store.bucket, Key=key)
    except ClientError as err:
        if _not_found(err):
            return None
        raise


def ensure_local(path: Path | str) -> Path:
    """``path`` on this node, holding the bucket's version: downloaded when the mirror lacks it
    or holds another version; a copy of an object the bucket no longer has is removed (the
    path is returned either way, and is then missing)."""
    store = active()
    if store is None:
        return Path(path)
    key, local = store.key(path), store.node_path(path)
    if key is None:
        return local
    _fresh(store, key, local, None)
    return local


def _fresh(store: RunStore, key: str, local: Path, etag: str | None) -> bool:
    """Bring this node's copy of ``key`` to the bucket's version and say whether there is one.

    ``etag`` is the bucket's version when a listing already named it, else a HEAD asks. A copy
    whose noted version is the bucket's is kept; any other is downloaded again. When the bucket
    has no such object, a copy that was published once (it has a noted version) is removed;
    one that never was is this node's own working file, and stays.
    """
    noted = _noted_version(store, local) if local.exists() else None
    if etag is None:
        head = _head(store, key)
        if head is None:
            if noted is not None:
                _forget(store, local)
            return local.exists()
        etag = head["ETag"]
    if noted == etag:
        return True
    from botocore.exceptions import ClientError

    tmp = local.with_name(f".{local.name}.{os.getpid()}-{threading.get_ident()}.download.tmp")
    local.parent.mkdir(parents=True, exist_ok=True)
    try:
        _client().download_file(store.bucket, key, str(tmp))
    except ClientError as err:
        if _not_found(err):  # removed between the listing and the download
            return False
        raise
    os.replace(tmp, local)
    _note_version(store, local, etag)
    return True


def _forget(store: RunStore, local: Path) -> None:
    """Remove this node's copy of an object the bucket no longer holds, and its noted version."""
    local.unlink(missing_ok=True)
    _note_version(store, local, None)


def exists(path: Path | str) -> bool:
    """Whether a run file is in the store (a HEAD request: nothing is downloaded, so checking a
    multi-GB shard costs no transfer; readers call ``ensure_local``); a node-local file that was
    never published counts as there. A mirror copy of an object the bucket no longer has is removed."""
    store = active()
    key = store.key(path) if store else None
    if key is None:
        return Path(path).is_file()
    local = store.node_path(path)
    noted = _noted_version(store, local) if local.is_file() else None
    if local.is_file() and noted is None:
        return True  # never published: this node's own working file
    if _head(store, key) is not None:
        return True
    if noted is not None:
        _forget(store, local)
    return False


def list_files(directory: Path | str, pattern: str = "*", *, fetch: bool = False) -> list[Path]:
    """The files under ``directory`` whose relative path matches ``pattern``, sorted.

    ``pattern`` is matched part by part like ``Path.glob`` (``*/_stats.json``: one
    level down; ``**`` is not supported). With an active store the listing is the
    bucket's, so it holds what every node wrote, and it descends one directory level
    per pattern part (``*/_stats.json`` lists the run's directories, then each one's
    top level: never the parts below them); ``fetch`` also downloads each
    file into the mirror, for readers (pyarrow datasets) that open them by path.
    Without a store, or outside the run, it is the local directory's.
    """
    if "**" in pattern:
        raise ValueError(f"list_files({directory}, {pattern!r}): '**' is not supported; name each level")
    store = active()
    prefix = store.key(directory) if store else None
    if prefix is None:
        return sorted(p for p in Path(directory).glob(pattern) if p.is_file())
    prefix = f"{prefix}/" if prefix else ""
    want = pattern.split("/")
    local = store.node_path(directory)
    found = sorted((local.joinpath(*key[len(prefix):].split("/")), key, etag) for key, etag in _matching(store, prefix, want))
    if fetch:
        found = [f for f in found if _fresh(store, f[1], f[0], f[2])]
    return [path for path, _, _ in found]


def remove_tree(path: Path) -> None:
    """Delete a run subtree locally and in the store (a stage reset)."""
    path = node_path(path)
    shutil.rmtree(path, ignore_errors=True)
    store = active()
    key = store.key(path) if store else None
    if key is None:
        return
    shutil.rmtree(_versions(store, path), ignore_errors=True)
    keys = list(_keys(store, f"{key}/" if key else ""))
    for start in range(0, len(keys), _DELETE_BATCH):
        objects = [{"Key": k} for k in keys[start:start + _DELETE_BATCH]]
        _client().delete_objects(Bucket=store.bucket, Delete={"Objects": objects})


def remove_file(path: Path) -> None:
    path = node_path(path)
    path.unlink(missing_ok=True)
    store = active()
    key = store.key(path) if store else None
    if key is not None:
        _note_version(store, path, None)
        with contextlib.suppress(Exception):
            _client().delete_object(Bucket=store.bucket, Key=key)


def sync_down(path: Path) -> None:
    """Fetch every object under a run subtree into the mirror (verify reads every shard file)."""
    store = active()
    key = store.key(path) if store else None
    if key is None:
        return
    prefix = f"{key}/" if key else ""
    local = store.node_path(path)
    for found, etag in _objects(store, prefix):
        _fresh(store, found, local.joinpath(*found[len(prefix):].split("/")), etag)

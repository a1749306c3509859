"""A run directory on S3: a local mirror that publishes every write and fetches on read.

Every file of a run is written through ``io.atomic_writer``; when a run store is
active, the writer uploads the finished file to ``s3://bucket/prefix/<same
relative path>`` after the local rename (an S3 PUT is atomic: an object is
complete or absent, like our renamed files). Readers of run files call
``ensure_local(path)``, which downloads the object when the mirror lacks it.
So a run resumed on another machine, or a task scheduled on another node,
finds the completion markers and shard files it needs in S3, and the bytes in
the bucket are the bytes a local run writes.

The store is process-global and travels to Ray workers as the environment
variable ``CODECORPUS_RUN_STORE`` (the URL and the local mirror root, never a
credential): credentials come from the usual AWS variables or files on each
node (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``).

Limits: a reader that *lists* a run directory (rather than opening a named
file) sees only the local mirror; the runtime's task inputs are all named
files, and ``sync_down`` fetches a whole subtree for the report and verify.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STORE_ENV = "CODECORPUS_RUN_STORE"
CACHE_ENV = "CODECORPUS_CACHE_DIR"


@dataclass(frozen=True)
class RunStore:
    url: str
    local_root: str

    @property
    def bucket(self) -> str:
        return self.url.removeprefix("s3://").partition("/")[0]

    @property
    def prefix(self) -> str:
        return self.url.removeprefix("s3://").partition("/")[2].strip("/")

    def key(self, path: Path | str) -> str | None:
        """The object key of a local mirror path, or None when the path is not in the run."""
        try:
            rel = Path(path).resolve().relative_to(Path(self.local_root).resolve())
        except ValueError:
            return None
        return f"{self.prefix}/{rel.as_posix()}" if self.prefix else rel.as_posix()


def mirror_root(url: str) -> Path:
    """Where the local mirror of an S3 run lives (stable per URL, so a rerun reuses it)."""
    base = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "codecorpus" / "runs")
    return base / hashlib.sha256(url.encode()).hexdigest()[:16]


def activate(url: str) -> RunStore:
    """Make ``url`` this process's (and its future Ray workers') run store."""
    if not url.startswith("s3://") or not url.removeprefix("s3://").partition("/")[0]:
        raise ValueError(f"--out {url!r}: an S3 run directory is s3://BUCKET/PREFIX")
    store = RunStore(url.rstrip("/"), str(mirror_root(url)))
    Path(store.local_root).mkdir(parents=True, exist_ok=True)
    os.environ[STORE_ENV] = json.dumps(asdict(store))
    _active.cache_clear()
    return store


def deactivate() -> None:
    os.environ.pop(STORE_ENV, None)
    _active.cache_clear()


@functools.cache
def _active() -> RunStore | None:
    raw = os.environ.get(STORE_ENV)
    return RunStore(**json.loads(raw)) if raw else None


def active() -> RunStore | None:
    return _active()


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


def publish(path: Path) -> None:
    """Upload a just-renamed run file (no-op without an active store or outside the run)."""
    store = active()
    key = store.key(path) if store else None
    if key is not None:
        _client().upload_file(str(path), store.bucket, key)


def ensure_local(path: Path | str) -> Path:
    """``path``, downloaded from the store first if the mirror lacks it (and the store has it)."""
    path = Path(path)
    store = active()
    if store is None or path.exists():
        return path
    key = store.key(path)
    if key is None:
        return path
    from botocore.exceptions import ClientError

    tmp = path.with_name(f".{path.name}.download.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        _client().download_file(store.bucket, key, str(tmp))
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return path
        raise
    os.replace(tmp, path)
    return path


def remove_tree(path: Path) -> None:
    """Delete a run subtree locally and in the store (a stage reset)."""
    shutil.rmtree(path, ignore_errors=True)
    store = active()
    key = store.key(path) if store else None
    if key is None:
        return
    client = _client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix=key.rstrip("/") + "/"):
        objects = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if objects:
            client.delete_objects(Bucket=store.bucket, Delete={"Objects": objects})


def remove_file(path: Path) -> None:
    path.unlink(missing_ok=True)
    store = active()
    key = store.key(path) if store else None
    if key is not None:
        with contextlib.suppress(Exception):
            _client().delete_object(Bucket=store.bucket, Key=key)


def sync_down(path: Path) -> None:
    """Fetch every object under a run subtree into the mirror (for listings: report, verify)."""
    store = active()
    key = store.key(path) if store else None
    if key is None:
        return
    client = _client()
    root = Path(store.local_root)
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix=key.rstrip("/")):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(store.prefix) + 1 :] if store.prefix else obj["Key"]
            ensure_local(root / rel)

"""S3 (and S3-compatible stores) through boto3: listing, whole-object and ranged reads.

Credentials come from the recipe's ``s3:`` block or boto3's usual chain
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, config
files); they are never logged and never part of a plan fingerprint. Each task
builds its own client (clients do not pickle), cached per process and settings.

:class:`RangeReader` is a seekable file over an object with ranged GETs, so Parquet
footers/row groups and zip central directories are read without downloading
the whole object; tar archives and JSONL are streamed from the body.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from codecorpus.ingest.config import S3Options
from codecorpus.ingest.refs import FileRef, S3Conn
from codecorpus.model import RecipeError

_READ_ERRORS: tuple[type[Exception], ...] = ()


def conn_from(opts: S3Options) -> S3Conn:
    secret = opts.secret_access_key.get_secret_value() if opts.secret_access_key else None
    key = opts.access_key_id.get_secret_value() if opts.access_key_id else None
    return S3Conn(opts.endpoint_url, opts.region, key, secret)


@functools.lru_cache(maxsize=16)
def client(conn: S3Conn | None) -> Any:
    import boto3
    from botocore.config import Config

    conn = conn or S3Conn()
    return boto3.session.Session().client(
        "s3",
        endpoint_url=conn.endpoint_url,
        region_name=conn.region or "us-east-1",
        aws_access_key_id=conn.access_key_id,
        aws_secret_access_key=conn.secret_access_key,
        config=Config(retries={"max_attempts": 5, "mode": "standard"}, s3={"addressing_style": "path"}),
    )


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> (``bucket``, ``a/b``).

    >>> split_url("s3://data/repos/x.tar")
    ('data', 'repos/x.tar')
    """
    rest = url.removeprefix("s3://")
    bucket, _, key = rest.partition("/")
    return bucket, key


def list_objects(url: str, conn: S3Conn | None) -> list[tuple[str, int]]:
    """(key, size) of every object under an ``s3://bucket/prefix``, sorted by key."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = split_url(url)
    prefix_dir = prefix + "/" if prefix and not prefix.endswith("/") else prefix
    out = []
    try:
        pages = client(conn).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key == prefix or key.startswith(prefix_dir) or not prefix:
                    out.append((key, int(obj["Size"])))
    except (BotoCoreError, ClientError) as err:
        raise RecipeError(f"cannot list {url}: {type(err).__name__} ({_safe(err)}); check the url and s3 settings") from None
    return sorted(out)


def _safe(err: Exception) -> str:
    """An error message without anything that looks like a credential."""
    text = str(err)
    return text.split("Credential=")[0][:200]


def read_object(ref: FileRef) -> tuple[bytes, str | None, str | None]:
    """(bytes, drop reason, detail) of one planned S3 object."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        body = client(ref.s3).get_object(Bucket=ref.container, Key=ref.key)["Body"]
        data = body.read(ref.size + 1)
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        return b"", "missing" if code in ("NoSuchKey", "404") else "unreadable", code
    except BotoCoreError as err:
        return b"", "unreadable", type(err).__name__
    return data, None, None


class RangeReader(io.RawIOBase):
    """A read-only, seekable file over one S3 object (ranged GETs, 1 MiB read-ahead)."""

    def __init__(self, conn: S3Conn | None, bucket: str, key: str, block: int = 1 << 20):
        self.s3, self.bucket, self.key, self.block = client(conn), bucket, key, block
        self.size = int(self.s3.head_object(Bucket=bucket, Key=key)["ContentLength"])
        self.pos = 0
        self._buf_start, self._buf = 0, b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        end = self.pos + n
        if not (self._buf_start <= self.pos and end <= self._buf_start + len(self._buf)):
            fetch_end = min(self.size, self.pos + max(n, self.block)) - 1
            resp = self.s3.get_object(Bucket=self.bucket, Key=self.key, Range=f"bytes={self.pos}-{fetch_end}")
            self._buf_start, self._buf = self.pos, resp["Body"].read()
        lo = self.pos - self._buf_start
        chunk = self._buf[lo : lo + n]
        b[: len(chunk)] = chunk
        self.pos += len(chunk)
        return len(chunk)


@contextmanager
def open_url(url: str, conn: S3Conn | None, seekable: bool = False) -> Iterator[IO[bytes]]:
    """A binary file over an object: seekable (ranged) or a plain stream of its body."""
    bucket, key = split_url(url)
    if seekable:
        f: IO[bytes] = io.BufferedReader(RangeReader(conn, bucket, key), buffer_size=1 << 20)
        try:
            yield f
        finally:
            f.close()
        return
    body = client(conn).get_object(Bucket=bucket, Key=key)["Body"]
    try:
        yield body  # type: ignore[misc]
    finally:
        body.close()

"""File-level datasets: Parquet, JSONL (optionally ``.gz``/``.zst``), saved HF datasets.

A recipe maps the dataset's columns onto the document row (``columns:``: The
Stack's ``content``/``path``/``repo_name``/``max_stars_repo_licenses``...). Planning
reads only metadata: one unit per Parquet row group (its row count is in the
footer), one per JSONL file, one per Arrow file of a dataset saved with
``datasets.Dataset.save_to_disk`` (listed in its ``state.json``; read with pyarrow
directly, which is what ``load_from_disk`` memory-maps, so ``datasets`` is not a
run-time dependency).

Bad records are data: a malformed JSON line (``bad_json``), a record without
text (``bad_record``), a text above the size cap (``too_large``), JSON nested
deeper than the parser's recursion limit (``too_deep``), a string holding a lone
UTF-16 surrogate escape (``invalid_utf8``: it has no UTF-8 form); a compressed
file damaged mid-way keeps the lines before the damage plus one ``corrupt_file``
row, and a Parquet file whose footer cannot be read is planned as one
``corrupt_file`` unit (the plan never fails on bad data). Each unit counts the
records it enumerated (``schema.EXPANDED_ROWS``).
"""

from __future__ import annotations

import glob
import gzip
import io
import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from codecorpus.ingest import s3 as s3mod
from codecorpus.ingest.archive import store_errors
from codecorpus.ingest.collect import Collector, Origin
from codecorpus.ingest.config import IngestConfig, RecordsSource
from codecorpus.ingest.refs import RecordRef, S3Conn
from codecorpus.model import RecipeError

PARQUET_SUFFIXES = (".parquet", ".pq")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".json.zst", ".ndjson.gz", ".ndjson.zst")


def fmt_of(name: str) -> str | None:
    low = name.lower()
    if low.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if low.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return None


# --- planning ---------------------------------------------------------------------


def plan(src: RecordsSource, cfg: IngestConfig) -> list[RecordRef]:
    conn = s3mod.conn_from(src.s3) if src.path.startswith("s3://") else None
    columns = tuple(src.columns.model_dump().items())
    if src.type == "hf":
        files = [(f, "arrow", s) for f, s in _hf_files(src)]
    else:
        files = [(loc, src.type, size) for loc, size in _list(src, conn) if fmt_of(loc) == src.type]
    if not files:
        raise RecipeError(f"sources[{src.name}].path: no {src.type} files at {src.path}")
    refs: list[RecordRef] = []
    for loc, fmt, size in files:
        base = dict(source=src.name, location=loc, fmt=fmt, columns=columns, license=src.license,
                    meta=src.metadata or "", max_file_bytes=cfg.max_file_bytes, s3=conn)
        if fmt == "parquet":
            try:
                groups = _row_groups(loc, conn)
            except (pa.ArrowException, OSError) as err:  # a damaged footer is data, not a crash
                refs.append(RecordRef(size=size, skip="corrupt_file", detail=f"{type(err).__name__}: {err}"[:300],
                                      **base))
                continue
            for group, group_bytes in groups:
                refs.append(RecordRef(size=group_bytes, row_groups=(group,), **base))
        else:
            refs.append(RecordRef(size=size, **base))
    return refs


def _list(src: RecordsSource, conn: S3Conn | None) -> list[tuple[str, int]]:
    if src.path.startswith("s3://"):
        bucket, _ = s3mod.split_url(src.path)
        return [(f"s3://{bucket}/{k}", n) for k, n in s3mod.list_objects(src.path, conn)]
    p = Path(src.path)
    if p.is_file():
        return [(str(p), p.stat().st_size)]
    if p.is_dir():
        paths = sorted(x for x in p.rglob("*") if x.is_file())
    else:
        paths = sorted(Path(x) for x in glob.glob(src.path, recursive=True) if Path(x).is_file())
    return [(str(x), x.stat().st_size) for x in paths]


def _hf_files(src: RecordsSource) -> list[tuple[str, int]]:
    root = Path(src.path)
    state = root / "state.json"
    if not state.is_file():
        raise RecipeError(
            f"sources[{src.name}].path: {root} has no state.json; point it at a folder written by "
            "datasets' save_to_disk (one split), not a DatasetDict root"
        )
    names = [f["filename"] for f in json.loads(state.read_text())["_data_files"]]
    return [(str(root / n), (root / n).stat().st_size) for n in names]


def _row_groups(loc: str, conn: S3Conn | None) -> list[tuple[int, int]]:
    with _open(loc, conn, seekable=True) as f:
        meta = pq.ParquetFile(f).metadata
        return [(i, meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups)]


# --- reading ----------------------------------------------------------------------


def read_records(ref: RecordRef, out: Collector) -> None:
    before = out.entries()
    stem = ref.location.rsplit("/", 1)[-1]
    unit_origin = Origin(ref.source, stem, stem if not ref.row_groups else f"{stem}#rg{ref.row_groups[0]}", "")
    cols = dict(ref.columns)
    if ref.skip is not None:
        out.drop(unit_origin, ref.size, ref.skip, ref.detail)
        return
    try:
        for i, record in enumerate(_records(ref)):
            _record(ref, cols, stem, i, record, out)
    except _CorruptFile as err:
        out.drop(unit_origin, ref.size, "corrupt_file", str(err)[:300])
    except store_errors() as err:
        out.drop(unit_origin, ref.size, "unreadable", type(err).__name__)
    emitted = out.entries() - before
    if emitted == 0:
        out.drop(unit_origin, ref.size, "empty_file")
        emitted = 1
    out.expanded += emitted - 1


class _CorruptFile(Exception):
    pass


def _record(ref: RecordRef, cols: dict, stem: str, i: int, record: Any, out: Collector) -> None:
    row_id = f"{stem}#{ref.row_groups[0]}:{i}" if ref.row_groups else f"{stem}#{i}"
    if isinstance(record, _BadLine):
        return out.drop(Origin(ref.source, stem, row_id, ""), record.size, record.reason, record.detail)
    get = record.get if isinstance(record, dict) else (lambda k: None)
    repo = _str(get(cols["repo"])) if cols.get("repo") else None
    path = _str(get(cols["path"])) if cols.get("path") else None
    revision = _str(get(cols["revision"])) if cols.get("revision") else None
    spdx, method = _license(get(cols["license"]) if cols.get("license") else None, ref.license)
    origin = Origin(ref.source, repo or stem, path or row_id, revision or "", spdx, method, "code", ref.meta)
    text = get(cols["text"])
    if isinstance(text, bytes):
        return _add_bytes(out, origin, text, ref.max_file_bytes)
    if not isinstance(text, str):
        return out.drop(origin, 0, "bad_record", f"column {cols['text']!r} is {type(text).__name__}")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as err:  # JSON's "\\ud800": valid JSON, no UTF-8 form, Arrow refuses it
        return out.drop(origin, len(text), "invalid_utf8", f"lone surrogate at char {err.start}")
    if size > ref.max_file_bytes:
        return out.drop(origin, size, "too_large")
    if not text:
        return out.drop(origin, 0, "empty")
    return out.add_text(origin, text, "utf-8", size)


def _add_bytes(out: Collector, origin: Origin, data: bytes, cap: int) -> None:
    if len(data) > cap:
        return out.drop(origin, len(data), "too_large")
    return out.add_bytes(origin, data)


def _str(value: Any) -> str | None:
    r"""A provenance value as text Arrow can store: lone surrogates (JSON ``"\udc80"``) are escaped.

    >>> _str("a\udc80.py")
    'a\\udc80.py'
    """
    if value is None:
        return None
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _license(value: Any, default: str) -> tuple[str, str]:
    if isinstance(value, list | tuple):
        value = " OR ".join(str(v) for v in value if v)
    if value:
        return _str(value) or "", "dataset_column"
    return default, "recipe" if default != "unknown" else "unknown"


class _BadLine:
    def __init__(self, size: int, detail: str, reason: str = "bad_json"):
        self.size, self.detail, self.reason = size, detail, reason


def _records(ref: RecordRef) -> Iterator[Any]:
    if ref.fmt == "parquet":
        yield from _parquet_records(ref)
    elif ref.fmt == "arrow":
        yield from _arrow_records(ref)
    else:
        yield from _jsonl_records(ref)


def _parquet_records(ref: RecordRef) -> Iterator[dict]:
    wanted = [c for c in dict(ref.columns).values() if c]
    try:
        with _open(ref.location, ref.s3, seekable=True) as f:
            pf = pq.ParquetFile(f)
            present = [c for c in wanted if c in pf.schema_arrow.names]
            table = pf.read_row_groups(list(ref.row_groups), columns=present)
    except (pa.ArrowException, OSError) as err:
        raise _CorruptFile(f"{type(err).__name__}: {err}") from None
    yield from table.to_pylist()


def _arrow_records(ref: RecordRef) -> Iterator[dict]:
    try:
        with pa.memory_map(ref.location) as source:
            reader = pa.ipc.open_stream(source)
            for batch in reader:
                yield from batch.to_pylist()
    except (pa.ArrowException, OSError) as err:
        raise _CorruptFile(f"{type(err).__name__}: {err}") from None


def _jsonl_records(ref: RecordRef) -> Iterator[Any]:
    try:
        with _open(ref.location, ref.s3, seekable=False) as raw:
            for line in _decompress(ref.location, raw):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError as err:
                    yield _BadLine(len(line), f"{type(err).__name__}: {err}"[:200])
                except RecursionError:  # json's C scanner recurses per level: `[[[[...` is hostile data
                    yield _BadLine(len(line), "JSON nesting exceeds the parser's recursion limit", "too_deep")
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as err:
        raise _CorruptFile(f"{type(err).__name__}: {err}") from None


def _decompress(location: str, raw: IO[bytes]) -> IO[bytes]:
    low = location.lower()
    if low.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if low.endswith(".zst"):
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True))
    return raw


@contextmanager
def _open(loc: str, conn: S3Conn | None, seekable: bool) -> Iterator[IO[bytes]]:
    if loc.startswith("s3://"):
        with s3mod.open_url(loc, conn, seekable=seekable) as f:
            yield f if seekable else io.BufferedReader(_RawBody(f))
    else:
        with open(loc, "rb") as f:
            yield f


class _RawBody(io.RawIOBase):
    """A botocore body as a raw file (for line iteration and decompressors)."""

    def __init__(self, body: Any):
        self.body = body

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self.body.read(len(b))
        b[: len(data)] = data
        return len(data)

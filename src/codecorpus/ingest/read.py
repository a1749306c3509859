"""Reading a planned shard: file entries -> document rows, or drop rows with a reason.

Bad input is data: a file that vanished, cannot be read, is binary, empty or not
UTF-8 becomes a drop row, never an exception.
"""

from __future__ import annotations

import pyarrow as pa

from codecorpus import schema
from codecorpus.ingest.refs import FileRef
from codecorpus.stage import MapResult

STAGE = "ingest"
BINARY_SNIFF_BYTES = 8192


def read_shard(refs: list[FileRef]) -> MapResult:
    docs: dict[str, list] = {f.name: [] for f in schema.DOC_SCHEMA}
    dropped: list[tuple[FileRef, str, str | None]] = []
    for ref in refs:
        text, reason, detail = _read_text(ref)
        if reason is not None:
            dropped.append((ref, reason, detail))
            continue
        data = text.encode("utf-8", "surrogatepass")
        row = {
            schema.ID: schema.document_id(ref.source, ref.repo, ref.path, ref.revision),
            schema.SOURCE: ref.source,
            schema.REPO: ref.repo,
            schema.PATH: ref.path,
            schema.REVISION: ref.revision,
            schema.LICENSE: ref.license,
            schema.LANG: schema.UNKNOWN,
            schema.KIND: "code",
            schema.TEXT: text,
            schema.BYTES: len(data),
            schema.CONTENT_HASH: schema.content_hash(data),
            schema.ENCODING: "utf-8",
        }
        for k, v in row.items():
            docs[k].append(v)
    return MapResult(pa.table(docs, schema=schema.DOC_SCHEMA), _drop_table(dropped))


def _read_text(ref: FileRef) -> tuple[str, str | None, str | None]:
    """(text, drop reason, detail). Reads the file once; nothing is executed or followed."""
    if ref.skip is not None:
        return "", ref.skip, None
    try:
        with open(ref.abspath, "rb") as f:
            data = f.read(ref.size + 1)
    except FileNotFoundError:
        return "", "missing", None
    except OSError as err:
        return "", "unreadable", err.strerror
    if not data:
        return "", "empty", None
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return "", "binary", "NUL byte in the first 8 KiB"
    try:
        return data.decode("utf-8"), None, None
    except UnicodeDecodeError as err:
        return "", "undecodable", f"not UTF-8 at byte {err.start}"


def _drop_table(dropped: list[tuple[FileRef, str, str | None]]) -> pa.Table:
    if not dropped:
        return schema.empty_drops()
    rows = pa.table(
        {
            schema.ID: [schema.document_id(r.source, r.repo, r.path, r.revision) for r, _, _ in dropped],
            schema.BYTES: pa.array([r.size for r, _, _ in dropped], pa.int64()),
            schema.SOURCE: [r.source for r, _, _ in dropped],
            schema.REPO: [r.repo for r, _, _ in dropped],
            schema.PATH: [r.path for r, _, _ in dropped],
        }
    )
    return schema.drops_from_rows(
        rows, STAGE, [reason for _, reason, _ in dropped], detail=[d for _, _, d in dropped]
    )

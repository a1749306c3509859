"""Trace files -> canonical trace rows: plan the files, then read one shard of them.

The plan lists every trace file of every ``type: traces`` source in sorted
order (a file, a folder searched recursively, a glob, or an ``s3://`` prefix)
and groups them greedily into shards of about ``shard_bytes``; a file is never
split, since a compressed stream cannot be cut. Reading streams each file line
by line through gzip / zstandard, so memory is one record at a time plus the
shard's output.

Every record that does not become a row is a drop with a reason:
``record_too_large``, ``invalid_utf8`` (bytes, or a lone surrogate escape),
``bad_json``, ``too_deep`` (nesting above ``max_json_depth``, checked before
anything recurses), ``not_an_object``, ``unknown_format``, ``malformed`` (a
known style with the wrong shapes inside). A file that cannot be opened or whose
compressed stream breaks is one ``unreadable`` drop (records read before the
break are kept). Blank lines are not records; they are counted in ``blank_lines``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from codecorpus import schema
from codecorpus.config import RecipeError, SftIngestConfig, TracesSource
from codecorpus.sft.normalize import MalformedTrace, detect_format, normalize, trace_content_hash
from codecorpus.stage import MapResult

STAGE = "sft_ingest"
TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".json.gz", ".json.zst")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


@dataclass(frozen=True)
class TraceFile:
    """One planned trace file. ``uri`` is a local path or ``s3://...``; ``rel`` names it in rows."""

    source: str
    uri: str
    rel: str
    size: int
    format: str
    license: str


# --- plan -----------------------------------------------------------------------------


def plan_shards(sources: Iterable[TracesSource], cfg: SftIngestConfig) -> list[list[TraceFile]]:
    files = [f for src in sources for f in list_trace_files(src)]
    shards: list[list[TraceFile]] = []
    current: list[TraceFile] = []
    size = 0
    for f in files:
        current.append(f)
        size += f.size
        if size >= cfg.shard_bytes:
            shards.append(current)
            current, size = [], 0
    if current or not shards:
        shards.append(current)
    return shards


def plan_fingerprint(shard: list[TraceFile]) -> str:
    """Hash of a shard's files and sizes: a changed input invalidates the stage."""
    payload = json.dumps([asdict(f) for f in shard], sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()


def _filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    if "://" in path:
        try:
            return pafs.FileSystem.from_uri(path)
        except (pa.ArrowInvalid, OSError) as err:
            raise RecipeError(f"sources path {path}: cannot open its filesystem: {err}") from None
    return pafs.LocalFileSystem(), str(Path(path).resolve())


def list_trace_files(src: TracesSource) -> list[TraceFile]:
    """The trace files of one source, sorted; a path that matches nothing is a recipe error."""
    pattern = None
    base = src.path
    if any(ch in Path(base).name for ch in "*?["):
        base, pattern = str(Path(base).parent), Path(base).name
    fs, root = _filesystem(base)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.File and pattern is None:
        infos, prefix = [info], str(Path(root).parent)
    elif info.type == pafs.FileType.Directory:
        infos, prefix = fs.get_file_info(pafs.FileSelector(root, recursive=True)), root
    else:
        raise RecipeError(f"sources[{src.name}].path: nothing at {src.path}: give a .jsonl file, a folder or a glob")
    scheme = src.path.split("://", 1)[0] + "://" if "://" in src.path else ""
    files = []
    for f in sorted((i for i in infos if i.type == pafs.FileType.File), key=lambda i: i.path):
        name = Path(f.path).name
        if pattern is not None and not fnmatch.fnmatch(name, pattern):
            continue
        if pattern is None and info.type == pafs.FileType.Directory and not name.endswith(TRACE_SUFFIXES):
            continue
        rel = f.path[len(prefix):].lstrip("/") or name
        files.append(TraceFile(src.name, scheme + f.path, rel, int(f.size or 0), src.format, src.license))
    if not files:
        raise RecipeError(f"sources[{src.name}].path: no trace files ({', '.join(TRACE_SUFFIXES)}) under {src.path}")
    return files


# --- read -----------------------------------------------------------------------------


def _open_lines(f: TraceFile) -> Iterator[bytes]:
    """Lines of a file; pyarrow decompresses ``.gz`` / ``.zst`` (by extension) while streaming."""
    fs, path = _filesystem(f.uri)
    with fs.open_input_stream(path, compression="detect") as raw:
        reader = io.BufferedReader(raw, buffer_size=1 << 20)
        while line := reader.readline():
            yield line


def json_depth_exceeds(obj: Any, limit: int) -> bool:
    """True when containers nest deeper than ``limit`` (iterative: no recursion to blow).

    >>> json_depth_exceeds({"a": [[1]]}, 3), json_depth_exceeds({"a": [[1]]}, 2)
    (False, True)
    """
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _bracket_depth_exceeds(line: bytes, limit: int) -> bool:
    """A cheap upper bound of the nesting, so json.loads never recurses past ``limit``.

    Brackets inside strings count too, which only makes the bound looser; a line
    that passes is parsed and then checked exactly.
    """
    depth = peak = 0
    for b in re.findall(rb"[\[\]{}]", line):
        depth += 1 if b in (b"[", b"{") else -1
        peak = max(peak, depth)
        if peak > limit * 4 + 64:
            return True
    return False


def parse_record(line: bytes, f: TraceFile, cfg: SftIngestConfig) -> tuple[dict[str, Any] | None, str, str | None]:
    """(canonical fields or None, reason, detail) for one JSONL line."""
    if len(line) > cfg.max_record_bytes:
        return None, "record_too_large", f"{len(line)} bytes > {cfg.max_record_bytes}"
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        return None, "invalid_utf8", str(err)[:200]
    if _bracket_depth_exceeds(line, cfg.max_json_depth):
        return None, "too_deep", f"nesting far beyond {cfg.max_json_depth}"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        return None, "bad_json", str(err)[:200]
    except RecursionError:
        return None, "too_deep", "JSON nesting exceeds the parser's recursion limit"
    if json_depth_exceeds(record, cfg.max_json_depth):
        return None, "too_deep", f"nesting deeper than {cfg.max_json_depth}"
    if not isinstance(record, dict):
        return None, "not_an_object", type(record).__name__
    if _SURROGATE_ESCAPE.search(line):
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as err:
            return None, "invalid_utf8", f"lone surrogate escape: {err.reason}"
    fmt = detect_format(record) if f.format == "auto" else f.format
    if fmt is None:
        return None, "unknown_format", f"keys {sorted(record)[:8]}"
    try:
        return normalize(record, fmt), "", None
    except (MalformedTrace, TypeError, ValueError, AttributeError, KeyError) as err:
        return None, "malformed", f"{fmt}: {err}"[:200]


def _drop(f: TraceFile, rid: str, path: str, reason: str, detail: str | None, nbytes: int) -> dict[str, Any]:
    return {
        schema.ID: rid, schema.STAGE: STAGE, schema.REASON: reason, schema.LANG: schema.UNKNOWN,
        schema.BYTES: nbytes, schema.SOURCE: f.source, schema.REPO: "", schema.PATH: path,
        schema.DETAIL: detail, schema.SCORE: None, schema.THRESHOLD: None, schema.DUP_OF: None,
    }


def _row(fields: dict[str, Any], f: TraceFile, rid: str, path: str, nbytes: int) -> dict[str, Any]:
    return {
        schema.ID: rid, schema.SOURCE: f.source, schema.PATH: path, schema.BYTES: nbytes,
        schema.LANG: fields[schema.TRACE_FORMAT],
        schema.CONTENT_HASH: trace_content_hash(fields[schema.TRACE_MESSAGES], fields[schema.TRACE_TOOLS]),
        **fields,
    }


def read_file(f: TraceFile, cfg: SftIngestConfig, rows: list, drops: list, counters: Counter) -> None:
    """Append the rows and drops of one file; a broken stream ends the file with one drop."""
    lineno = 0
    try:
        for line in _open_lines(f):
            lineno += 1
            stripped = line.strip()
            if not stripped:
                counters["blank_lines"] += 1
                continue
            rid = schema.document_id(f.source, f.rel, str(lineno), "")
            path = f"{f.rel}:{lineno}"
            fields, reason, detail = parse_record(stripped, f, cfg)
            if fields is None:
                drops.append(_drop(f, rid, path, reason, detail, len(stripped)))
            else:
                rows.append(_row(fields, f, rid, path, len(stripped)))
    except (OSError, EOFError, pa.ArrowException) as err:
        rid = schema.document_id(f.source, f.rel, "unreadable", "")
        drops.append(_drop(f, rid, f"{f.rel}:{lineno + 1}", "unreadable", f"{type(err).__name__}: {err}"[:300], 0))


def read_shard(files: list[TraceFile], cfg: SftIngestConfig) -> MapResult:
    """Rows (``schema.TRACE_SCHEMA``) and drops of one planned shard, in file and line order."""
    rows: list[dict[str, Any]] = []
    drops: list[dict[str, Any]] = []
    counters: Counter[str] = Counter()
    for f in files:
        read_file(f, cfg, rows, drops, counters)
    counters["records"] = len(rows) + len(drops)
    table = pa.Table.from_pylist(rows, schema=schema.TRACE_SCHEMA)
    dropped = pa.Table.from_pylist(drops, schema=schema.DROP_SCHEMA)
    return MapResult(table, dropped, counters)

"""Trace files -> canonical trace rows: plan the files, then read one shard of them.

The plan lists every trace file of every ``type: traces`` source in sorted
order (a file, a folder searched recursively, a glob, or an ``s3://`` prefix)
and groups them greedily into shards of about ``shard_bytes``; a file is never
split, since a compressed stream cannot be cut.

Each file is read by one of two readers, chosen per file from its name and, for
a ``.json`` (or any other) name, its first two non-blank lines, so the choice is
deterministic:

- ``jsonl``: a record per line, streamed through gzip / zstandard, so memory is
  one record at a time plus the shard's output. ``.jsonl`` files always, and a
  ``.json`` file whose first (or, the first being broken, second) line is a
  whole ``{...}`` object.
- ``json``: the whole file is one JSON value, an object (one trace) or an array
  of traces, read up to ``max_record_bytes``. SWE-agent's ``.traj`` files always
  (one pretty-printed object per instance), and a ``.json`` file that starts
  with ``[`` or is pretty-printed (its first lines are not objects).

Rows say which reader read them (``reader``; ``path`` is ``FILE:LINE``, ``FILE``
or ``FILE[i]``) and the stage counters count files and records per reader
(``reader.jsonl``, ``reader.json``, ``reader.json.records``, ...).

Every record that does not become a row is a drop with a reason:
``record_too_large`` (a line, or a whole-file document, above
``max_record_bytes``), ``invalid_utf8`` (bytes, or a lone surrogate escape),
``bad_json``, ``truncated_json`` (a whole-file document that ends before it
closes, e.g. a ``.traj`` of a killed run, or an empty one), ``too_deep``
(nesting above ``max_json_depth``, checked before anything recurses),
``not_an_object``, ``unknown_format``, ``malformed`` (a known style with the
wrong shapes inside, e.g. a ``.traj`` with no ``history``). A file that cannot
be opened or whose compressed stream breaks is one ``unreadable`` drop (records
read before the break are kept). Blank lines are not records; they are counted
in ``blank_lines``, and an empty array in ``empty_arrays``.
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
from codecorpus.model import RecipeError
from codecorpus.sft.config import SftIngestConfig, TracesSource
from codecorpus.sft.normalize import MalformedTrace, detect_format, normalize, trace_content_hash
from codecorpus.stage import MapResult

STAGE = "sft_ingest"
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst")
WHOLE_FILE_SUFFIXES = (".traj", ".traj.gz", ".traj.zst")  # SWE-agent: one JSON object per file
TRACE_SUFFIXES = (*JSONL_SUFFIXES, ".json", ".json.gz", ".json.zst", *WHOLE_FILE_SUFFIXES)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
Parsed = tuple[dict[str, Any] | None, str, str | None]  # (canonical fields or None, reason, detail)


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
        raise RecipeError(f"sources[{src.name}].path: nothing at {src.path}: give a trace file, a folder or a glob")
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


def _json_error(err: json.JSONDecodeError, text: str, whole_file: bool) -> tuple[str, str]:
    """bad_json, or truncated_json when a whole-file document stops before it closes."""
    ends_early = err.msg.startswith("Unterminated string") or err.pos >= len(text.rstrip())
    if whole_file and ends_early:
        return "truncated_json", ("empty file" if not text.strip() else f"ends at byte {len(text.encode())}: {err}")[:200]
    return "bad_json", str(err)[:200]


def _decode_json(raw: bytes, cfg: SftIngestConfig, whole_file: bool = False) -> tuple[Any, str, str | None]:
    """(parsed value or None, reason, detail) of one JSONL line or one whole file."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return None, "invalid_utf8", str(err)[:200]
    if _bracket_depth_exceeds(raw, cfg.max_json_depth + int(whole_file)):
        return None, "too_deep", f"nesting far beyond {cfg.max_json_depth}"
    try:
        return json.loads(text), "", None
    except json.JSONDecodeError as err:
        return None, *_json_error(err, text, whole_file)
    except RecursionError:
        return None, "too_deep", "JSON nesting exceeds the parser's recursion limit"


def record_fields(
    record: Any, may_hold_surrogates: bool, f: TraceFile, cfg: SftIngestConfig, fallback_id: str = ""
) -> Parsed:
    """(canonical fields or None, reason, detail) of one parsed record."""
    if json_depth_exceeds(record, cfg.max_json_depth):
        return None, "too_deep", f"nesting deeper than {cfg.max_json_depth}"
    if not isinstance(record, dict):
        return None, "not_an_object", type(record).__name__
    if may_hold_surrogates:
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as err:
            return None, "invalid_utf8", f"lone surrogate escape: {err.reason}"
    fmt = detect_format(record) if f.format == "auto" else f.format
    if fmt is None:
        return None, "unknown_format", f"keys {sorted(record)[:8]}"
    try:
        return normalize(record, fmt, fallback_id), "", None
    except (MalformedTrace, TypeError, ValueError, AttributeError, KeyError) as err:
        return None, "malformed", f"{fmt}: {err}"[:200]


def parse_record(line: bytes, f: TraceFile, cfg: SftIngestConfig) -> Parsed:
    """(canonical fields or None, reason, detail) for one JSONL line."""
    if len(line) > cfg.max_record_bytes:
        return None, "record_too_large", f"{len(line)} bytes > {cfg.max_record_bytes}"
    record, reason, detail = _decode_json(line, cfg)
    if reason:
        return None, reason, detail
    return record_fields(record, bool(_SURROGATE_ESCAPE.search(line)), f, cfg)


def _drop(f: TraceFile, rid: str, path: str, reason: str, detail: str | None, nbytes: int) -> dict[str, Any]:
    return {
        schema.ID: rid, schema.STAGE: STAGE, schema.REASON: reason, schema.LANG: schema.UNKNOWN,
        schema.BYTES: nbytes, schema.SOURCE: f.source, schema.REPO: "", schema.PATH: path,
        schema.DETAIL: detail, schema.SCORE: None, schema.THRESHOLD: None, schema.DUP_OF: None,
    }


def _row(fields: dict[str, Any], f: TraceFile, rid: str, path: str, nbytes: int, reader: str) -> dict[str, Any]:
    return {
        schema.ID: rid, schema.SOURCE: f.source, schema.PATH: path, schema.BYTES: nbytes,
        schema.LANG: fields[schema.TRACE_FORMAT],
        schema.CONTENT_HASH: trace_content_hash(fields[schema.TRACE_MESSAGES], fields[schema.TRACE_TOOLS]),
        schema.TRACE_READER: reader,
        **fields,
    }


def sniff_reader(lines: list[bytes]) -> str:
    """The reader for a file from its first two non-blank lines (stripped).

    A line that is a whole ``{...}`` object means JSONL (the second line decides
    when the first record is broken); a file that opens an array, or whose first
    lines are pieces of a pretty-printed document, is one JSON value.

    >>> sniff_reader([b'{"messages": []}', b'{"messages": []}']), sniff_reader([b'{"messages": [', b'{}'])
    ('jsonl', 'jsonl')
    >>> sniff_reader([b'{', b'"history": [],']), sniff_reader([b'[{"messages": []}]']), sniff_reader([])
    ('json', 'json', 'jsonl')
    """
    if not lines:
        return "jsonl"
    if lines[0].startswith(b"["):
        return "json"
    if any(line.startswith(b"{") and line.endswith(b"}") for line in lines[:2]):
        return "jsonl"
    return "json"


def choose_reader(f: TraceFile, cfg: SftIngestConfig) -> str:
    """``jsonl`` or ``json`` for one file: by name, else by its first lines (see ``sniff_reader``)."""
    name = Path(f.rel).name.lower()
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(WHOLE_FILE_SUFFIXES):
        return "json"
    lines: list[bytes] = []
    try:
        fs, path = _filesystem(f.uri)
        with fs.open_input_stream(path, compression="detect") as raw:
            reader = io.BufferedReader(raw, buffer_size=1 << 20)
            while len(lines) < 2 and (line := reader.readline(cfg.max_record_bytes + 1)):
                if line.strip():
                    lines.append(line.strip())
    except (OSError, EOFError, pa.ArrowException):
        return "jsonl"  # the JSONL reader meets the same error and counts the file unreadable
    return sniff_reader(lines)


def _read_capped(f: TraceFile, cap: int) -> bytes:
    """A file's (decompressed) bytes, stopping after ``cap + 1`` so a huge file never fills memory."""
    fs, path = _filesystem(f.uri)
    chunks, size = [], 0
    with fs.open_input_stream(path, compression="detect") as raw:
        while size <= cap and (chunk := raw.read(min(1 << 22, cap + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
    return b"".join(chunks)


def _add(rows: list, drops: list, parsed: Parsed, f: TraceFile, rid: str, path: str, nbytes: int, reader: str) -> None:
    fields, reason, detail = parsed
    if fields is None:
        drops.append(_drop(f, rid, path, reason, detail, nbytes))
    else:
        rows.append(_row(fields, f, rid, path, nbytes, reader))


def _stem(rel: str) -> str:
    """A file's name without its trace suffix: SWE-agent names a run's file ``<instance_id>.traj``.

    >>> _stem("run/django__django-11099/django__django-11099.traj.gz"), _stem("a.b.json")
    ('django__django-11099', 'a.b')
    """
    name = Path(rel).name
    suffix = max((s for s in TRACE_SUFFIXES if name.endswith(s)), key=len, default=Path(name).suffix)
    return name[: len(name) - len(suffix)] if suffix else name


def read_whole_json(f: TraceFile, cfg: SftIngestConfig, rows: list, drops: list, counters: Counter) -> None:
    """Rows and drops of a file that is one JSON value: an object (one trace) or an array of traces."""
    rid = schema.document_id(f.source, f.rel, "json", "")
    try:
        data = _read_capped(f, cfg.max_record_bytes)
    except (OSError, EOFError, pa.ArrowException) as err:
        drops.append(_drop(f, rid, f.rel, "unreadable", f"{type(err).__name__}: {err}"[:300], 0))
        return
    if len(data) > cfg.max_record_bytes:
        drops.append(_drop(f, rid, f.rel, "record_too_large", f"file is over {cfg.max_record_bytes} bytes", len(data)))
        return
    value, reason, detail = _decode_json(data, cfg, whole_file=True)
    surrogates = bool(_SURROGATE_ESCAPE.search(data))
    if reason:
        drops.append(_drop(f, rid, f.rel, reason, detail, len(data)))
    elif isinstance(value, list):
        if not value:
            counters["empty_arrays"] += 1
        for i, item in enumerate(value):
            nbytes = len(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
            item_id = schema.document_id(f.source, f.rel, f"[{i}]", "")
            _add(rows, drops, record_fields(item, surrogates, f, cfg), f, item_id, f"{f.rel}[{i}]", nbytes, "json")
    else:
        _add(rows, drops, record_fields(value, surrogates, f, cfg, _stem(f.rel)), f, rid, f.rel, len(data), "json")


def read_jsonl(f: TraceFile, cfg: SftIngestConfig, rows: list, drops: list, counters: Counter) -> None:
    """Append the rows and drops of one JSONL file; a broken stream ends the file with one drop."""
    lineno = 0
    try:
        for line in _open_lines(f):
            lineno += 1
            stripped = line.strip()
            if not stripped:
                counters["blank_lines"] += 1
                continue
            rid = schema.document_id(f.source, f.rel, str(lineno), "")
            _add(rows, drops, parse_record(stripped, f, cfg), f, rid, f"{f.rel}:{lineno}", len(stripped), "jsonl")
    except (OSError, EOFError, pa.ArrowException) as err:
        rid = schema.document_id(f.source, f.rel, "unreadable", "")
        drops.append(_drop(f, rid, f"{f.rel}:{lineno + 1}", "unreadable", f"{type(err).__name__}: {err}"[:300], 0))


def read_file(f: TraceFile, cfg: SftIngestConfig, rows: list, drops: list, counters: Counter) -> str:
    """Append the rows and drops of one file with the reader it needs; returns that reader."""
    reader = choose_reader(f, cfg)
    before = len(rows) + len(drops)
    (read_whole_json if reader == "json" else read_jsonl)(f, cfg, rows, drops, counters)
    counters[f"reader.{reader}"] += 1
    counters[f"reader.{reader}.records"] += len(rows) + len(drops) - before
    return reader


def read_shard(files: list[TraceFile], cfg: SftIngestConfig) -> MapResult:
    """Rows (``schema.TRACE_SCHEMA``) and drops of one planned shard, in file and record order."""
    rows: list[dict[str, Any]] = []
    drops: list[dict[str, Any]] = []
    counters: Counter[str] = Counter()
    for f in files:
        read_file(f, cfg, rows, drops, counters)
    counters["records"] = len(rows) + len(drops)
    table = pa.Table.from_pylist(rows, schema=schema.TRACE_SCHEMA)
    dropped = pa.Table.from_pylist(drops, schema=schema.DROP_SCHEMA)
    return MapResult(table, dropped, counters)

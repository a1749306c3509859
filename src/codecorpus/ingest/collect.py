"""The collector of one shard: document rows and drop rows, in read order.

Every reader (local files, git blobs, S3 objects, archive members, dataset records)
feeds a :class:`Collector`, which owns decoding, exclusions, notebook and HTML
conversion, the row layout and the shard's byte accounts. Readers import this
module; it imports none of them.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow as pa

from codecorpus import schema
from codecorpus.ingest import docs, exclusions, notebook, repometa
from codecorpus.ingest.refs import NOT_DOCUMENTS
from codecorpus.stage import MapResult

STAGE = "ingest"


@dataclass(frozen=True)
class Origin:
    """Provenance of one document (what its id and provenance columns are made of)."""

    source: str
    repo: str
    path: str
    revision: str
    license: str = "unknown"
    license_method: str = "unknown"
    kind: str = "code"
    meta: str = ""


@dataclass
class Collector:
    """Accumulates document rows and drop rows of one shard, in read order."""

    min_encoding_evidence: int = 4
    exclude_generated: bool = True
    vendored_dirs: frozenset[str] = frozenset()
    skip_dirs: frozenset[str] = frozenset()
    docs: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    drops: list[tuple[Origin, int, str, str | None]] = field(default_factory=list)
    skipped: list[tuple[Origin, int, str, str | None]] = field(default_factory=list)
    expanded: int = 0
    bytes_read: int = 0
    """Input bytes of every document row so far (kept and dropped)."""
    bytes_changed: int = 0

    def entries(self) -> int:
        """Rows and skipped entries so far (what a container reader enumerated)."""
        return len(self.drops) + len(self.skipped) + len(self.docs.get(schema.ID, []))

    def drop(self, origin: Origin, size: int, reason: str, detail: str | None = None) -> None:
        if reason in NOT_DOCUMENTS:
            self.skipped.append((storable_origin(origin), size, reason, detail))
            return
        self.drops.append((storable_origin(origin), size, reason, detail))
        self.bytes_read += size

    def add_bytes(self, origin: Origin, data: bytes, size: int | None = None) -> None:
        """Decode, exclude, convert and append one document (or its drop row).

        ``size`` is the document's input size when the plan knows it (a file's size when
        listed); what was read is measured against it.
        """
        size = len(data) if size is None else size
        if not data:
            return self.drop(origin, size, "empty")
        text, encoding, detail = exclusions.decode(data, self.min_encoding_evidence)
        if text is None:
            return self.drop(origin, size, "binary" if encoding == "binary" else "undecodable", detail)
        self.add_text(origin, text, encoding, size)
        return None

    def add_text(self, origin: Origin, text: str, encoding: str, size: int) -> None:
        origin = storable_origin(origin)
        excluded = exclusions.content_exclusion(text, self.exclude_generated)
        if excluded is not None:
            return self.drop(origin, size, *excluded)
        kind = origin.kind
        lower = origin.path.lower()
        if lower.endswith(".ipynb"):
            try:
                text, _ = notebook.to_script(text)
            except notebook.NotebookError as err:
                return self.drop(origin, size, "bad_notebook", str(err))
            kind = "notebook"
        elif kind == "docs" and docs.is_html(lower):
            text = docs.html_to_text(text)
        if not text.strip():
            return self.drop(origin, size, "empty", "whitespace only")
        data = text.encode("utf-8", "surrogatepass")
        self.bytes_read += size
        self.bytes_changed += len(data) - size
        row = {
            schema.ID: schema.document_id(origin.source, origin.repo, origin.path, origin.revision),
            schema.SOURCE: origin.source,
            schema.REPO: origin.repo,
            schema.PATH: origin.path,
            schema.REVISION: origin.revision,
            schema.LICENSE: origin.license,
            schema.LANG: schema.UNKNOWN,
            schema.KIND: kind,
            schema.TEXT: text,
            schema.BYTES: len(data),
            schema.CONTENT_HASH: schema.content_hash(data),
            schema.ENCODING: encoding,
            schema.LICENSE_METHOD: origin.license_method,
            "_meta": origin.meta,
        }
        for k, v in row.items():
            self.docs[k].append(v)
        return None

    def set_license(self, source: str, repo: str, spdx: str, method: str) -> None:
        """Late license decision for a repository read inside the job (archives)."""
        for i, (s, r) in enumerate(zip(self.docs[schema.SOURCE], self.docs[schema.REPO], strict=True)):
            if s == source and r == repo:
                self.docs[schema.LICENSE][i] = spdx
                self.docs[schema.LICENSE_METHOD][i] = method

    def result(self) -> MapResult:
        cols = {f.name: self.docs.get(f.name, []) for f in schema.DOC_SCHEMA}
        table = pa.table(cols, schema=schema.DOC_SCHEMA)
        table = table.append_column(
            pa.field(schema.LICENSE_METHOD, schema.STAGE_COLUMNS[schema.LICENSE_METHOD]),
            pa.array(self.docs.get(schema.LICENSE_METHOD, []), pa.string()),
        )
        meta = repometa.columns(self.docs.get(schema.REPO, []), self.docs.get("_meta", []))
        for name, arr in meta.items():
            table = table.append_column(pa.field(name, arr.type), arr)
        result = MapResult(table, _drop_table(self.drops), bytes_changed=self.bytes_changed,
                           skipped=_drop_table(self.skipped))
        if self.expanded:
            result.counters[schema.EXPANDED_ROWS] = self.expanded
        return result


def storable(name: str) -> str:
    r"""A path or repository name as UTF-8 text that Arrow can store.

    POSIX file names are bytes: ``os.scandir`` and ``tarfile`` hand non-UTF-8 bytes
    over as lone surrogates (``surrogateescape``), and JSON can spell lone
    surrogates too. Arrow refuses both, so one hostile file name would fail the
    whole shard. The name is kept, escaped (``\xff``, ``\ud800``): the document
    stays traceable to its file, and its id is derived from the escaped name.

    >>> storable("ok/é.py"), storable("bad\udcffname.py"), storable("x\ud800")
    ('ok/é.py', 'bad\\xffname.py', 'x\\ud800')
    """
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


def storable_origin(origin: Origin) -> Origin:
    path, repo = storable(origin.path), storable(origin.repo)
    if path is origin.path and repo is origin.repo:
        return origin
    return dataclasses.replace(origin, path=path, repo=repo)


def _drop_table(dropped: list[tuple[Origin, int, str, str | None]]) -> pa.Table:
    if not dropped:
        return schema.empty_drops()
    rows = pa.table(
        {
            schema.ID: [schema.document_id(o.source, o.repo, o.path, o.revision) for o, _, _, _ in dropped],
            schema.BYTES: pa.array([size for _, size, _, _ in dropped], pa.int64()),
            schema.SOURCE: [o.source for o, _, _, _ in dropped],
            schema.REPO: [o.repo for o, _, _, _ in dropped],
            schema.PATH: [o.path for o, _, _, _ in dropped],
        }
    )
    return schema.drops_from_rows(
        rows, STAGE, [reason for _, _, reason, _ in dropped], detail=[d for _, _, _, d in dropped]
    )

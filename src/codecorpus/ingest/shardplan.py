"""The ingest plan at any size: repositories listed in tasks, shards kept as ranges.

``plan.plan_shards`` holds every planned unit in one process; at hundreds of
millions of files that does not fit in the driver. This planner gives the same
shards and the same plan hash without that:

1. **list** (tasks): each planning task lists a batch of repositories
   (:data:`plan.Listing`) and writes their units to one batch file under
   ``RUN/_plan/ingest/`` (zstd JSON lines, one ``plan.unit_line`` per unit) beside a
   sizes file (two int64 per unit: the bytes the cut counts, the document bytes). It
   returns one unit count (and git object store) per repository.
2. **cut** (driver): the greedy cut of ``plan.cut_into_shards``, streamed over
   the sizes files one batch at a time. A shard is a few pieces: row ranges of
   batch files, and units planned on the driver (archives, record slices, S3
   objects, a repository dropped as a duplicate), which are compact already.
3. **describe** (tasks): each shard's fingerprint is ``plan.fingerprint_of_lines`` of
   its units' lines, which is how ``plan.plan_fingerprint`` hashes the same units; its
   document bytes come from the sizes files.

The ingest job loads its own shard's units from the batch files
(:func:`load_units`). The driver holds per repository one count, per shard its
pieces and summary, and one batch's sizes at a time.

Plans of a few repositories (:data:`INLINE_LISTINGS`), or of more that hold at most
:data:`INLINE_UNITS` units, are listed on the driver with no files, as before: no
task start for the quickstart, and none for a corpus the driver can hold. Batch files are
named by their content's hash, so a node's stale mirror copy of an older plan is
never read for a new one; the folder is rewritten by every planning run.
"""

from __future__ import annotations

import functools
import hashlib
import io
import itertools
import json
import logging
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import zstandard

from codecorpus.ingest import plan
from codecorpus.ingest.config import IngestConfig
from codecorpus.ingest.git import PLAN_THREADS, GitListing, duplicate_keepers
from codecorpus.ingest.refs import FileRef, Unit
from codecorpus.model import RecipeError, config_hash
from codecorpus.pipeline.spec import plan_batches, plan_inline, repositories
from codecorpus.storage import mirror
from codecorpus.storage.atomic import atomic_write_bytes

if TYPE_CHECKING:
    from codecorpus.config.recipe import Source
    from codecorpus.pipeline.spec import PlanTasks

log = logging.getLogger(__name__)

INLINE_LISTINGS = 64
"""Plans of at most this many repositories are listed on the driver, without tasks or files
(``pipeline/spec.py`` ``PLAN_INLINE_ENV`` overrides it; ``0``: always plan in tasks)."""
INLINE_UNITS = 100_000
"""Plans of more repositories are still listed on the driver (while Ray starts) as long as they
hold at most this many units; a listing that grows past it is dropped and redone in tasks."""
BATCH_REPOSITORIES = 100
"""Repositories per planning task (more when that would make over ``MAX_PLAN_TASKS`` tasks:
``pipeline/spec.py`` ``plan_batches``)."""
SHARDS_PER_TASK = 8
"""Shards one describing task fingerprints."""
STAGE = "ingest"
"""The stage whose plan files these are (``RunPaths.plan_dir``)."""

PLAN_UNITS_SUFFIX = ".units.jsonl.zst"
"""A plan batch file: zstd JSON lines, one planned unit per line."""
PLAN_SIZES_SUFFIX = ".sizes.i64"
"""Beside it, per unit two little-endian int64: the bytes the shard cut counts, its document bytes."""
PLAN_SIZES_DTYPE = "<i8"


def plan_batch_file(plan_dir: Path | str, batch: str, suffix: str) -> Path:
    """A batch's units or sizes file in a stage's plan folder (``RunPaths.plan_dir``)."""
    return Path(plan_dir) / f"{batch}{suffix}"


@dataclass(frozen=True)
class Rows:
    """Units ``start:stop`` of a batch file."""

    file: str
    start: int
    stop: int


@dataclass(frozen=True)
class Units:
    """Units planned on the driver (archives, record slices, S3 objects, duplicate drops)."""

    units: tuple[Unit, ...]


Piece = Rows | Units


@dataclass(frozen=True)
class ShardPlan:
    """One shard: where its units are, how many, their document bytes and the plan fingerprint."""

    pieces: tuple[Piece, ...]
    units: int
    document_bytes: int
    fingerprint: str
    first: str = ""
    """Location of its first and last unit, for a failing job's message."""
    last: str = ""

    def reads(self) -> tuple[str, ...]:
        """The shard's input, as ``Job.describe_reads`` would name every file of it."""
        if self.units <= 1:
            return (self.first,) if self.units else ()
        return (f"{self.units} files, {self.first} ... {self.last}",)


@dataclass
class IngestPlan:
    shards: list[ShardPlan]
    hash: str
    listed_in_tasks: bool = False
    repositories: int = 0
    batches: list[str] = field(default_factory=list)


def plan_ingest(sources: Sequence[Source], cfg: IngestConfig, tasks: PlanTasks | None = None,
                inline_listings: int | None = None, batch_repositories: int = BATCH_REPOSITORIES) -> IngestPlan:
    """The shards of the recipe's sources and the plan hash, equal to ``plan.plan_shards``'s.

    With ``tasks``, more than ``inline_listings`` repositories and more than
    :data:`INLINE_UNITS` units among them, repositories are listed in planning tasks and
    shards are kept as ranges of batch files.
    """
    blocks = [b for src in sources if src.type not in plan.NON_INGEST_SOURCES for b in plan.source_listings(src, cfg)]
    listings = [b for b in blocks if not isinstance(b, list)]
    if inline_listings is None:
        inline_listings = plan_inline(INLINE_LISTINGS)
    listed_here = None
    if tasks is None or len(listings) <= inline_listings:
        listed_here = list(_listed(blocks, cfg))
    elif inline_listings > 0:
        listed_here = _listed_within(blocks, cfg, INLINE_UNITS)
    if listed_here is not None:
        units = [u for b in _resolved(list(zip(blocks, listed_here, strict=True))) for u in b]
        shards = [_inline_shard(s) for s in plan.cut_into_shards(units, cfg.shard_bytes)]
        return IngestPlan(shards, config_hash([s.fingerprint for s in shards]), False, len(listings))
    plan_dir = tasks.run.plan_dir(STAGE)
    mirror.remove_tree(plan_dir)  # batch files of an older plan
    batches = plan_batches(listings, batch_repositories)
    t0 = time.perf_counter()
    listed = tasks.map("plan", _ListBatch(cfg, str(plan_dir)), batches, repositories)
    _raise_errors(listed)
    t1 = time.perf_counter()
    pieces = list(_pieces(blocks, listed))
    cut = list(_cut(pieces, cfg.shard_bytes, plan_dir))
    t2 = time.perf_counter()
    groups = [cut[i:i + SHARDS_PER_TASK] for i in range(0, len(cut), SHARDS_PER_TASK)]
    described = tasks.map("plan-shards", _DescribeShards(plan_dir), groups)
    shards = [s for group in described for s in group]
    log.info("planned %d repositories in %d tasks: listed in %.1f s (%.1f task seconds), cut into %d shards "
             "in %.1f s, described in %.1f s", len(listings), len(batches), t1 - t0,
             sum(b["seconds"] for b in listed), len(shards), t2 - t1, time.perf_counter() - t2)
    return IngestPlan(shards, config_hash([s.fingerprint for s in shards]), True, len(listings),
                      [b["file"] for b in listed])


def load_units(pieces: Sequence[Piece], plan_dir: Path | str) -> list[Unit]:
    """A shard's units, in plan order (what ``plan.plan_shards`` holds for it)."""
    units: list[Unit] = []
    with BatchReader(Path(plan_dir)) as batches:
        for piece in pieces:
            if isinstance(piece, Units):
                units.extend(piece.units)
            else:
                units.extend(_file_ref(line) for line in batches.lines(piece))
    return units


# --- on the driver (few repositories, or few files) -------------------------------


def _listed_within(blocks: list, cfg: IngestConfig, max_units: int) -> list[Any] | None:
    """Each block planned on this process, or None as soon as they hold more than ``max_units`` units."""
    listed, units = [], 0
    for planned in _listed(blocks, cfg):
        units += len(planned) if isinstance(planned, list) else len(planned.refs)
        if units > max_units:
            return None
        listed.append(planned)
    return listed


def _listed(blocks: list, cfg: IngestConfig) -> Iterator[Any]:
    """Each block planned, in order (units planned already pass through). Git repositories
    are planned a few at a time in threads: they wait on git's processes, a folder walk does not."""
    with ThreadPoolExecutor(PLAN_THREADS) as pool:
        for i in range(0, len(blocks), PLAN_THREADS):
            chunk = blocks[i:i + PLAN_THREADS]
            if any(isinstance(b, GitListing) for b in chunk):
                yield from pool.map(functools.partial(_plan_block, cfg=cfg), chunk)
            else:
                yield from (_plan_block(b, cfg) for b in chunk)


def _plan_block(block: Any, cfg: IngestConfig) -> Any:
    return block if isinstance(block, list) else block.plan(cfg)


def _resolved(listed: list[tuple[Any, Any]]) -> Iterator[list[Unit]]:
    """Units of each block; a git repository sharing another's object store becomes one drop."""
    dups = _duplicates([(b, p.store, p.main) if isinstance(b, GitListing) else (b, "", True) for b, p in listed])
    for i, (block, planned) in enumerate(listed):
        if i in dups:
            yield [block.duplicate_drop(dups[i])]
        else:
            yield planned if isinstance(planned, list) else planned.refs


def _duplicates(entries: list[tuple[Any, str, bool]]) -> dict[int, str]:
    """{position: repository read instead} for each git repository whose object store
    another repository of its source reads (``git.duplicate_keepers``, per source)."""
    by_source: dict[int, list[int]] = {}
    for i, (block, store, _) in enumerate(entries):
        if isinstance(block, GitListing) and store:
            by_source.setdefault(id(block.src), []).append(i)
    dups: dict[int, str] = {}
    for positions in by_source.values():
        keepers = duplicate_keepers([(entries[i][0].name, entries[i][1], entries[i][2]) for i in positions])
        dups.update({i: keepers[entries[i][0].name] for i in positions if entries[i][0].name in keepers})
    return dups


def _inline_shard(units: list[Unit]) -> ShardPlan:
    return ShardPlan((Units(tuple(units)),), len(units), plan.document_bytes(units), plan.plan_fingerprint(units),
                     _location(units[0]) if units else "", _location(units[-1]) if units else "")


def _location(unit: Unit) -> str:
    return str(getattr(unit, "abspath", None) or getattr(unit, "location", None) or unit)


# --- phase 1: list batches of repositories (tasks) --------------------------------


@dataclass(frozen=True)
class _ListBatch:
    """A planning task: list a batch of repositories into one batch file."""

    cfg: IngestConfig
    plan_dir: str

    def __call__(self, batch: list) -> dict[str, Any]:
        """Repositories are listed a few at a time (git waits on its processes) and streamed
        into the compressed batch: the task holds a few repositories' units, not the batch's."""
        t0 = time.perf_counter()
        sink = io.BytesIO()
        sizes: list[np.ndarray] = []
        counts: list[int] = []
        stores: list[tuple[str, bool]] = []
        try:
            with zstandard.ZstdCompressor(level=3).stream_writer(sink, closefd=False) as out:
                for p in _listed(batch, self.cfg):
                    assert all(isinstance(u, FileRef) and u.s3 is None for u in p.refs), "listings plan files only"
                    out.write("".join(f"{plan.unit_line(u)}\n" for u in p.refs).encode("ascii"))
                    sizes.append(_sizes_of(p.refs))
                    counts.append(len(p.refs))
                    stores.append((p.store, p.main))
        except RecipeError as err:  # a one-repository source git cannot read: the recipe's error
            return {"error": str(err)}
        data = sink.getvalue()
        name = f"batch-{hashlib.sha256(data).hexdigest()[:24]}"
        atomic_write_bytes(plan_batch_file(self.plan_dir, name, PLAN_UNITS_SUFFIX), data)
        atomic_write_bytes(plan_batch_file(self.plan_dir, name, PLAN_SIZES_SUFFIX), np.concatenate([_EMPTY, *sizes]).tobytes())
        return {"file": name, "units": counts, "stores": stores, "seconds": time.perf_counter() - t0}


_EMPTY = np.zeros((0, 2), dtype=PLAN_SIZES_DTYPE)


def _sizes_of(units: Sequence[Unit]) -> np.ndarray:
    """Per unit: the bytes the cut counts (a unit not skipped), and its document bytes."""
    rows = [(plan.counted_bytes(u), plan.unit_document_bytes(u)) for u in units]
    return np.array(rows, dtype=PLAN_SIZES_DTYPE).reshape(-1, 2)


def _raise_errors(listed: list[dict[str, Any]]) -> None:
    for result in listed:
        if "error" in result:
            raise RecipeError(result["error"])


def _pieces(blocks: list, listed: list[dict[str, Any]]) -> Iterator[Piece]:
    """The plan in order as pieces: each repository's rows of its batch file, or inline units."""
    where: list[tuple[str, int, int]] = []  # per listing: batch file, first row, end row
    stores: list[tuple[str, bool]] = []
    for result in listed:
        start = 0
        for n, (store, main) in zip(result["units"], result["stores"], strict=True):
            where.append((result["file"], start, start + n))
            stores.append((store, main))
            start += n
    found = iter(stores)
    entries = [(b, "", True) if isinstance(b, list) else (b, *next(found)) for b in blocks]
    dups = _duplicates(entries)
    rows = iter(where)
    for i, block in enumerate(blocks):
        if isinstance(block, list):
            yield Units(tuple(block))
            continue
        file, start, stop = next(rows)
        if i in dups:
            yield Units((block.duplicate_drop(dups[i]),))
        elif stop > start:
            yield Rows(file, start, stop)


# --- phase 2: cut into shards (driver, streaming) -----------------------------------


class _Sizes:
    """The sizes of one batch file at a time (the plan is read in order)."""

    def __init__(self, plan_dir: Path):
        self.plan_dir = plan_dir
        self.file = ""
        self.table = _EMPTY

    def of(self, file: str) -> np.ndarray:
        if file != self.file:
            path = mirror.ensure_local(plan_batch_file(self.plan_dir, file, PLAN_SIZES_SUFFIX))
            self.file, self.table = file, np.fromfile(path, dtype=PLAN_SIZES_DTYPE).reshape(-1, 2)
        return self.table


def _unit_sizes(piece: Piece, sizes: _Sizes) -> np.ndarray:
    return sizes.of(piece.file)[piece.start:piece.stop] if isinstance(piece, Rows) else _sizes_of(piece.units)


def _slice(piece: Piece, lo: int, hi: int) -> Piece:
    if isinstance(piece, Rows):
        return Rows(piece.file, piece.start + lo, piece.start + hi)
    return Units(piece.units[lo:hi])


def _cut(pieces: list[Piece], shard_bytes: int, plan_dir: Path) -> Iterator[tuple[tuple[Piece, ...], int]]:
    """``plan.cut_into_shards`` over pieces: (pieces, document bytes) per shard.

    A shard ends after the unit that brings its counted bytes to ``shard_bytes``;
    within a piece that unit is found by a binary search over the running sum.
    """
    sizes = _Sizes(plan_dir)
    current: list[Piece] = []
    counted = documents = 0
    made = 0
    for piece in pieces:
        table = _unit_sizes(piece, sizes)
        running = np.cumsum(table[:, 0])
        running_docs = np.cumsum(table[:, 1])
        lo, base = 0, 0
        while lo < len(table):
            end = int(np.searchsorted(running, base + shard_bytes - counted, side="left"))
            if end >= len(table):  # the shard goes on into the next piece
                current.append(_slice(piece, lo, len(table)))
                counted += int(running[-1]) - base
                documents += int(running_docs[-1]) - (int(running_docs[lo - 1]) if lo else 0)
                break
            current.append(_slice(piece, lo, end + 1))
            documents += int(running_docs[end]) - (int(running_docs[lo - 1]) if lo else 0)
            yield tuple(_merged(current)), documents
            made += 1
            current, counted, documents = [], 0, 0
            lo, base = end + 1, int(running[end])
    if current or not made:
        yield tuple(_merged(current)), documents


def _merged(pieces: list[Piece]) -> Iterator[Piece]:
    """Adjacent rows of one batch file as one range."""
    last: Piece | None = None
    for piece in pieces:
        if isinstance(last, Rows) and isinstance(piece, Rows) and last.file == piece.file and last.stop == piece.start:
            last = Rows(last.file, last.start, piece.stop)
            continue
        if last is not None:
            yield last
        last = piece
    if last is not None:
        yield last


# --- phase 3: describe each shard (tasks) -------------------------------------------


@dataclass(frozen=True)
class _DescribeShards:
    """A planning task: fingerprint a few cut shards."""

    plan_dir: Path

    def __call__(self, group: list[tuple[tuple[Piece, ...], int]]) -> list[ShardPlan]:
        """The group's shards are consecutive in plan order: one reader reads each of their
        batch files once."""
        with BatchReader(self.plan_dir) as batches:
            return [_describe(pieces, documents, batches) for pieces, documents in group]


def _describe(pieces: tuple[Piece, ...], documents: int, batches: BatchReader) -> ShardPlan:
    """The shard's plan fingerprint (``plan.fingerprint_of_lines`` of its units' lines), unit
    count and first and last unit, one piece's lines at a time."""
    n = 0
    first = last = ""

    def lines() -> Iterator[str]:
        nonlocal n, first, last
        for piece in pieces:
            if isinstance(piece, Rows):
                piece_lines = batches.lines(piece)
            else:
                piece_lines = [plan.unit_line(u) for u in piece.units]
            if piece_lines:
                first = first or _piece_location(piece, piece_lines, 0)
                last = _piece_location(piece, piece_lines, len(piece_lines) - 1)
            n += len(piece_lines)
            yield from piece_lines

    fingerprint = plan.fingerprint_of_lines(lines())
    return ShardPlan(pieces, n, documents, fingerprint, first, last)


def _piece_location(piece: Piece, lines: list[str], i: int) -> str:
    return _location(_file_ref(lines[i]) if isinstance(piece, Rows) else piece.units[i])


class BatchReader:
    """Lines of the plan's batch files, read forward: each file decompressed once.

    A shard's pieces, and the shards of a describing task one after another, ask for the
    rows of each batch file in increasing order, one file after another (plan order; a
    duplicate's drop or units planned on the driver leave gaps, which are skipped). The
    reader keeps the file it read last open at the row it stopped at, so N pieces of one
    file cost one decompression of it, not N reads of its prefix. A range that starts
    before that row (not plan order) reopens its file and reads it again from row 0: the
    same lines, at the cost this reader avoids.
    """

    def __init__(self, plan_dir: Path) -> None:
        self.plan_dir = plan_dir
        self._file = ""
        self._row = 0
        self._text: io.TextIOBase | None = None

    def __enter__(self) -> BatchReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._text is not None:
            self._text.close()
        self._file, self._row, self._text = "", 0, None

    def lines(self, rows: Rows) -> list[str]:
        """Lines ``start:stop`` of a batch file (only they are kept)."""
        if self._text is None or rows.file != self._file or rows.start < self._row:
            if rows.file == self._file:
                log.debug("rows %d:%d of %s asked for after row %d: reading it again from row 0",
                          rows.start, rows.stop, rows.file, self._row)
            self.close()
            self._text, self._file = _open_batch(self.plan_dir, rows.file), rows.file
        skipped = sum(1 for _ in itertools.islice(self._text, rows.start - self._row))
        lines = [line.rstrip("\n") for line in itertools.islice(self._text, rows.stop - rows.start)]
        if skipped + len(lines) < rows.stop - self._row:
            path = plan_batch_file(self.plan_dir, rows.file, PLAN_UNITS_SUFFIX)
            raise RecipeError(f"plan file {path} ends before row {rows.stop}: it is not the file "
                              "this plan wrote; rerun the command")
        self._row = rows.stop
        return lines


def _open_batch(plan_dir: Path, file: str) -> io.TextIOBase:
    """A batch file's lines from its first, decompressed as a stream."""
    path = mirror.ensure_local(plan_batch_file(plan_dir, file, PLAN_UNITS_SUFFIX))
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed with the text stream (closefd)
    except FileNotFoundError:
        raise RecipeError(f"plan file {path} is missing: a newer run replaced the plan; rerun the command") from None
    return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True), encoding="ascii")


def _file_ref(line: str) -> FileRef:
    fields = json.loads(line)
    fields.pop("_unit")
    return FileRef(**fields)

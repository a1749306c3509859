"""Job bodies: read a shard, call a pure stage function, write the result atomically.

Ray-free on purpose: stage specs name them in their jobs, the runtime runs each job as a
Ray task, and tests can call them directly. Every job that produces stage output:

1. writes its part and its drop log under temporary names, fsyncs, renames;
2. checks ``rows_in == rows_out + dropped`` and ``bytes_in + bytes_changed ==
   bytes_out + bytes_dropped`` (an ``InvariantError`` otherwise);
3. writes its completion marker last: ``{"hash": <stage hash>, "stats": {...}}``.

A marker whose hash matches the current stage hash means the job is done and
its outputs are complete; anything else is redone.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.stage import MapResult
from codecorpus.storage.atomic import atomic_write_bytes
from codecorpus.storage.mirror import ensure_local
from codecorpus.storage.parquet import read_parquet, write_parquet


class InvariantError(RuntimeError):
    """A broken pipeline invariant (e.g. rows_in != rows_out + dropped): a bug, never bad input."""


@dataclass(frozen=True)
class JobContext:
    run: schema.RunPaths
    stage: str
    stage_hash: str


# --- parquet and markers --------------------------------------------------------------


def read_marker(ctx: JobContext, job: str) -> dict[str, Any] | None:
    """The marker's payload if the job completed under the current stage hash."""
    try:
        payload = json.loads(ensure_local(ctx.run.done(ctx.stage, job)).read_text())
    except (OSError, ValueError):
        return None
    return payload if payload.get("hash") == ctx.stage_hash else None


def write_marker(ctx: JobContext, job: str, stats: dict[str, Any]) -> None:
    body = json.dumps({"hash": ctx.stage_hash, "stats": stats}, sort_keys=True)
    atomic_write_bytes(ctx.run.done(ctx.stage, job), body.encode())


# --- statistics -------------------------------------------------------------------------


def lang_breakdown(table: pa.Table) -> dict[str, list[int]]:
    """lang -> [documents, bytes, tokens] of a document table."""
    if table.num_rows == 0 or schema.LANG not in table.column_names:
        return {}
    aggs = [(schema.BYTES, "sum"), (schema.ID, "count")]
    has_tokens = schema.NUM_TOKENS in table.column_names
    if has_tokens:
        aggs.append((schema.NUM_TOKENS, "sum"))
    g = table.group_by(schema.LANG).aggregate(aggs).to_pydict()
    tokens = g[f"{schema.NUM_TOKENS}_sum"] if has_tokens else [0] * len(g[schema.LANG])
    return {
        lang: [int(n), int(b), int(t)]
        for lang, n, b, t in zip(g[schema.LANG], g[f"{schema.ID}_count"], g[f"{schema.BYTES}_sum"], tokens, strict=True)
    }


def _sum(table: pa.Table, column: str) -> int:
    if column not in table.column_names or table.num_rows == 0:
        return 0
    return int(pc.sum(table.column(column)).as_py() or 0)


def _check_bytes_column(table: pa.Table) -> None:
    """Every row's ``bytes`` is the UTF-8 length of its ``text``: a rewrite that forgot to
    update it would make every byte figure after it wrong."""
    if table.num_rows == 0 or schema.TEXT not in table.column_names or schema.BYTES not in table.column_names:
        return
    lengths = pc.binary_length(table.column(schema.TEXT)).cast(pa.int64())
    wrong = pc.invert(pc.equal(lengths, table.column(schema.BYTES).cast(pa.int64())))
    if pc.any(wrong).as_py():
        first = pc.index(wrong, True).as_py()
        raise InvariantError(
            f"row {table.column(schema.ID)[first]}: bytes={table.column(schema.BYTES)[first]} but its text "
            f"is {lengths[first]} bytes of UTF-8"
        )


def result_stats(
    rows_in: int, bytes_in: int, tokens_in: int, langs_in: dict, result: MapResult, seconds: float
) -> dict[str, Any]:
    """Stats of one task; raises InvariantError if rows or bytes are unaccounted for.

    Rows: ``rows_in = rows_out + dropped``. Bytes: ``bytes_in + bytes_changed =
    bytes_out + bytes_dropped``, where ``bytes_changed`` is what the stage's rewrites
    added or removed (``MapResult.bytes_changed``). Entries that are not documents
    (``MapResult.skipped``) are counted by reason in ``skipped_entries``, outside both.
    """
    out, dropped = result.table, result.dropped
    if rows_in != out.num_rows + dropped.num_rows:
        raise InvariantError(
            f"rows_in={rows_in} != rows_out={out.num_rows} + dropped={dropped.num_rows}"
        )
    _check_bytes_column(out)
    bytes_out, bytes_dropped = _sum(out, schema.BYTES), _sum(dropped, schema.BYTES)
    if bytes_in + result.bytes_changed != bytes_out + bytes_dropped:
        raise InvariantError(
            f"bytes_in={bytes_in} + bytes_changed={result.bytes_changed} != bytes_out={bytes_out} + "
            f"bytes_dropped={bytes_dropped}"
        )
    reasons = dropped.column(schema.REASON).to_pylist()
    drop_langs = dropped.column(schema.LANG).to_pylist()
    drop_bytes = dropped.column(schema.BYTES).to_pylist()
    bytes_by_reason: Counter[str] = Counter()
    by_lang: dict[str, Counter[str]] = {}
    for reason, lang, nbytes in zip(reasons, drop_langs, drop_bytes, strict=True):
        bytes_by_reason[reason] += nbytes
        by_lang.setdefault(lang, Counter())[reason] += 1
    return {
        "rows_in": rows_in,
        "rows_out": out.num_rows,
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "bytes_dropped": bytes_dropped,
        "bytes_changed": result.bytes_changed,
        "tokens_in": tokens_in,
        "tokens_out": _sum(out, schema.NUM_TOKENS),
        "dropped": dict(Counter(reasons)),
        "dropped_bytes": dict(bytes_by_reason),
        "dropped_by_lang": {k: dict(v) for k, v in by_lang.items()},
        "skipped_entries": dict(Counter(result.skipped.column(schema.REASON).to_pylist())),
        "langs_in": langs_in,
        "langs_out": lang_breakdown(out),
        "counters": dict(result.counters),
        "seconds": round(seconds, 4),
    }


def finish_shard(ctx: JobContext, shard: int, result: MapResult, stats: dict[str, Any]) -> dict[str, Any]:
    """Write a shard's output and drop log, then its marker (last)."""
    write_parquet(ctx.run.part(ctx.stage, shard), result.table)
    write_parquet(ctx.run.dropped(ctx.stage, shard), result.dropped)
    write_marker(ctx, schema.shard_name(shard), stats)
    return stats


# --- task kinds -------------------------------------------------------------------------


def ingest_job(ctx: JobContext, shard: int, read: Callable[[], MapResult], planned_bytes: int, rows_in: int) -> dict:
    """Read one planned shard. ``rows_in`` is every planned unit, ``planned_bytes`` the sizes
    of the planned files that are documents (``ingest.plan.document_bytes``)."""
    t0 = time.perf_counter()
    result = read()
    # archives and JSONL files are planned as one unit each; the reader counts the
    # members/lines it enumerated beyond that (and their bytes), so the checks still bite
    rows_in += result.counters.pop(schema.EXPANDED_ROWS, 0) - result.skipped.num_rows
    bytes_in = planned_bytes + result.counters.pop(schema.EXPANDED_BYTES, 0)
    stats = result_stats(rows_in, bytes_in, 0, {}, result, time.perf_counter() - t0)
    write_parquet(ctx.run.skipped(ctx.stage, shard), result.skipped)
    return finish_shard(ctx, shard, result, stats)


def map_job(ctx: JobContext, shard: int, in_stage: str, fn: Callable[[pa.Table], MapResult]) -> dict:
    """A map stage over one shard: ``fn(table) -> MapResult``."""
    t0 = time.perf_counter()
    table = read_parquet(ctx.run.part(in_stage, shard))
    result = fn(table)
    stats = result_stats(
        table.num_rows, _sum(table, schema.BYTES), _sum(table, schema.NUM_TOKENS),
        lang_breakdown(table), result, time.perf_counter() - t0,
    )
    return finish_shard(ctx, shard, result, stats)


def _finish_phase(
    ctx: JobContext, phase: str, source: int, task: str, parts: dict[int, pa.Table], rows: int, t0: float
) -> dict:
    """Write a phase task's output partitions (file ``source`` in each), then its marker."""
    for p, table in sorted(parts.items()):
        write_parquet(ctx.run.work_part(ctx.stage, phase, p, source), table)
    stats = {"rows": rows, "seconds": round(time.perf_counter() - t0, 4)}
    write_marker(ctx, task, stats)
    return stats


def scatter_job(
    ctx: JobContext, phase: str, shard: int, in_stage: str,
    fn: Callable[[pa.Table, int], dict[int, pa.Table]],
) -> dict:
    """Phase of a global stage: one input shard -> one file per partition (all written)."""
    t0 = time.perf_counter()
    parts = fn(read_parquet(ctx.run.part(in_stage, shard)), shard)
    rows = sum(t.num_rows for t in parts.values())
    return _finish_phase(ctx, phase, shard, f"{phase}-{schema.shard_name(shard)}", parts, rows, t0)


def reduce_job(
    ctx: JobContext, phase: str, in_phase: str, partition: int, n_inputs: int,
    fn: Callable[[pa.Table], dict[int, pa.Table]],
) -> dict:
    """Phase of a global stage: all inputs of one partition -> files routed by output partition."""
    t0 = time.perf_counter()
    inputs = [read_parquet(ctx.run.work_part(ctx.stage, in_phase, partition, s)) for s in range(n_inputs)]
    parts = fn(pa.concat_tables(inputs))
    rows = sum(t.num_rows for t in inputs)
    return _finish_phase(ctx, phase, partition, f"{phase}-p{partition:05d}", parts, rows, t0)


def apply_job(
    ctx: JobContext, shard: int, in_stage: str, side_phase: str, n_side: int,
    fn: Callable[[pa.Table, pa.Table], MapResult],
) -> dict:
    """Last phase of a global stage: an input shard plus its routed side table -> output shard."""
    t0 = time.perf_counter()
    table = read_parquet(ctx.run.part(in_stage, shard))
    side = pa.concat_tables(
        [read_parquet(ctx.run.work_part(ctx.stage, side_phase, shard, p)) for p in range(n_side)]
    )
    result = fn(table, side)
    stats = result_stats(
        table.num_rows, _sum(table, schema.BYTES), _sum(table, schema.NUM_TOKENS),
        lang_breakdown(table), result, time.perf_counter() - t0,
    )
    return finish_shard(ctx, shard, result, stats)


def apply_own_job(
    ctx: JobContext, shard: int, in_stage: str, own: tuple[str, int], side_phase: str, n_side: int,
    fn: Callable[[pa.Table, pa.Table, pa.Table], MapResult],
) -> dict:
    """Last phase of a global stage whose first phase already did the per-shard work.

    ``fn(table, own_table, side)``: the input shard, the file its own scatter task wrote
    to partition ``own = (phase, partition)`` (so that work is not redone), and its
    routed side table.
    """
    t0 = time.perf_counter()
    table = read_parquet(ctx.run.part(in_stage, shard))
    own_phase, own_partition = own
    own_table = read_parquet(ctx.run.work_part(ctx.stage, own_phase, own_partition, shard))
    side = pa.concat_tables(
        [read_parquet(ctx.run.work_part(ctx.stage, side_phase, shard, p)) for p in range(n_side)]
    )
    result = fn(table, own_table, side)
    stats = result_stats(
        table.num_rows, _sum(table, schema.BYTES), _sum(table, schema.NUM_TOKENS),
        lang_breakdown(table), result, time.perf_counter() - t0,
    )
    return finish_shard(ctx, shard, result, stats)


# --- streaming reduce and scatter-with-side phases -------------------


def stream_reduce_job(
    ctx: JobContext, phase: str, in_phase: str, partition: int, n_inputs: int,
    fn: Callable[[Iterator[pa.Table]], dict[int, pa.Table]],
) -> dict:
    """Like ``reduce_job``, but ``fn`` gets the inputs one file at a time (never all in memory)."""
    t0 = time.perf_counter()
    rows = [0]

    def inputs() -> Iterator[pa.Table]:
        for s in range(n_inputs):
            table = read_parquet(ctx.run.work_part(ctx.stage, in_phase, partition, s))
            rows[0] += table.num_rows
            yield table

    parts = fn(inputs())
    return _finish_phase(ctx, phase, partition, f"{phase}-p{partition:05d}", parts, rows[0], t0)


def scatter_side_job(
    ctx: JobContext, phase: str, shard: int, in_stage: str, side_phase: str, n_side: int,
    fn: Callable[[pa.Table, pa.Table, int], dict[int, pa.Table]],
) -> dict:
    """An input shard plus its routed side table -> one file per output partition."""
    t0 = time.perf_counter()
    table = read_parquet(ctx.run.part(in_stage, shard))
    side = pa.concat_tables(
        [read_parquet(ctx.run.work_part(ctx.stage, side_phase, shard, p)) for p in range(n_side)]
    )
    parts = fn(table, side, shard)
    rows = sum(t.num_rows for t in parts.values())
    return _finish_phase(ctx, phase, shard, f"{phase}-{schema.shard_name(shard)}", parts, rows, t0)


def apply_sides_job(
    ctx: JobContext, shard: int, in_stage: str, sides: tuple[tuple[str, int], ...],
    fn: Callable[..., MapResult],
) -> dict:
    """``apply_job`` with several routed side tables: ``fn(table, side_1, side_2, ...)``."""
    t0 = time.perf_counter()
    table = read_parquet(ctx.run.part(in_stage, shard))
    side_tables = [
        pa.concat_tables([read_parquet(ctx.run.work_part(ctx.stage, phase, shard, p)) for p in range(n)])
        for phase, n in sides
    ]
    result = fn(table, *side_tables)
    stats = result_stats(
        table.num_rows, _sum(table, schema.BYTES), _sum(table, schema.NUM_TOKENS),
        lang_breakdown(table), result, time.perf_counter() - t0,
    )
    return finish_shard(ctx, shard, result, stats)


# --- end of the streaming phases ------------------------------------------------------------


_TOTALS = ("rows_in", "rows_out", "bytes_in", "bytes_out", "bytes_dropped", "bytes_changed", "tokens_in", "tokens_out")


def aggregate_stats(shard_stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum per-shard stats into a stage's ``_stats.json`` body."""
    total: dict[str, Any] = dict.fromkeys(_TOTALS, 0)
    total.update(dropped={}, dropped_bytes={}, dropped_by_lang={}, skipped_entries={}, langs_in={}, langs_out={},
                 counters={})
    seconds = 0.0
    nodes = {s["node"] for s in shard_stats if "node" in s}
    for s in shard_stats:
        for k in _TOTALS:
            total[k] += s[k]
        for k in ("dropped", "dropped_bytes", "skipped_entries", "counters"):
            _add_counts(total[k], s[k])
        for lang, reasons in s["dropped_by_lang"].items():
            _add_counts(total["dropped_by_lang"].setdefault(lang, {}), reasons)
        for k in ("langs_in", "langs_out"):
            for lang, vals in s[k].items():
                cur = total[k].setdefault(lang, [0, 0, 0])
                total[k][lang] = [a + b for a, b in zip(cur, vals, strict=True)]
        seconds += s["seconds"]
    total["task_seconds"] = round(seconds, 3)
    total["shards"] = len(shard_stats)
    total["nodes"] = len(nodes)
    if total["rows_in"] != total["rows_out"] + sum(total["dropped"].values()):
        raise InvariantError(f"stage totals break rows_in = rows_out + dropped: {total}")
    if total["bytes_dropped"] != sum(total["dropped_bytes"].values()) or (
        total["bytes_in"] + total["bytes_changed"] != total["bytes_out"] + total["bytes_dropped"]
    ):
        raise InvariantError(f"stage totals break bytes_in + bytes_changed = bytes_out + bytes_dropped: {total}")
    return total



def _add_counts(into: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v

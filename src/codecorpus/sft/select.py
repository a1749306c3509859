"""Selection of valid traces: outcome, size, turns, tool errors, decontamination, PII redaction.

A filter stage with one more job: traces it keeps are redacted (an annotation,
``redactions``), traces it drops carry one reason each:

- ``outcome``: the trace's outcome is not in ``outcomes`` (e.g. resolved only);
- ``too_short`` / ``too_long``: conversation characters outside [min_chars, max_chars];
- ``too_few_turns`` / ``too_many_turns``: assistant turns outside the bounds;
- ``tool_error_rate``: the share of tool results matching an error pattern is
  above ``max_tool_error_rate`` (score and threshold in the drop log);
- ``contaminated_task_id``: the task id is a benchmark instance id;
- ``contaminated_text``: the conversation shares a word n-gram (``decontam_ngram``
  words, or a whole benchmark text when it is shorter) with a benchmark text.
  This is the n-gram overlap test of GPT-3 / StarCoder decontamination, over
  lower-cased ``\\w+`` words so whitespace and punctuation changes do not hide a copy.

The decontamination and PII helpers live here because ``filters/`` had none when
this was written; they are plain functions to move there once it has its own.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from codecorpus import schema
from codecorpus.config import RecipeError, SftSelectConfig
from codecorpus.stage import MapResult, with_column

STAGE = "sft_select"
_WORD = re.compile(r"\w+")
_BENCH_TEXT_KEYS = ("prompt", "problem_statement", "text", "question", "canonical_solution")


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


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@functools.lru_cache(maxsize=4)
def load_task_ids(paths: tuple[str, ...]) -> frozenset[str]:
    ids: set[str] = set()
    for p in paths:
        try:
            ids.update(line.strip() for line in Path(p).read_text(encoding="utf-8").splitlines() if line.strip())
        except OSError as err:
            raise RecipeError(f"sft_select.decontam_task_ids: cannot read {p}: {err}") from None
    return frozenset(ids)


def _bench_texts(path: str) -> list[str]:
    """Benchmark texts of a file: JSONL records (known keys) or one plain text per line."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise RecipeError(f"sft_select.decontam_texts: cannot read {path}: {err}") from None
    texts = []
    for line in filter(str.strip, lines):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            rec = line
        if isinstance(rec, dict):
            texts.extend(rec[k] for k in _BENCH_TEXT_KEYS if isinstance(rec.get(k), str))
        elif isinstance(rec, str):
            texts.append(rec)
    return texts


@functools.lru_cache(maxsize=4)
def load_benchmark_ngrams(paths: tuple[str, ...], n: int) -> dict[int, frozenset[str]]:
    """Benchmark n-grams by length: ``n``-grams of long texts, the whole text of shorter ones."""
    by_len: dict[int, set[str]] = {}
    for p in paths:
        for text in _bench_texts(p):
            w = words(text)
            if not w:
                continue
            k = min(n, len(w))
            by_len.setdefault(k, set()).update(" ".join(w[i : i + k]) for i in range(len(w) - k + 1))
    return {k: frozenset(v) for k, v in by_len.items()}


def contaminating_ngram(text: str, bench: dict[int, frozenset[str]]) -> str | None:
    """The first benchmark n-gram found in ``text``, or None."""
    w = words(text)
    for k, grams in sorted(bench.items()):
        for i in range(len(w) - k + 1):
            gram = " ".join(w[i : i + k])
            if gram in grams:
                return gram
    return None


# --- PII and secrets ------------------------------------------------------------------

PII_PATTERNS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("private_key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S), "<PRIVATE_KEY>"),
    ("aws_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "<AWS_KEY>"),
    ("github_token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"), "<GITHUB_TOKEN>"),
    ("api_key", re.compile(r"\b(?:sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35}|xox[abpr]-[A-Za-z0-9-]{10,})"), "<API_KEY>"),
    ("email", re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"), "<EMAIL>"),
    ("ip_address", re.compile(r"\b(?!(?:127|10|0)\.)(?!192\.168\.)(?!172\.(?:1[6-9]|2\d|3[01])\.)"
                              r"(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b"), "<IP_ADDRESS>"),
)  # fmt: skip
"""(kind, pattern, placeholder). Private, loopback and unspecified IPs are kept (they identify nobody)."""


def redact(text: str, counts: Counter[str]) -> str:
    """``text`` with every PII match replaced by its placeholder; ``counts`` tallies kinds.

    Placeholders contain no quote or backslash, so JSON call arguments stay JSON.

    >>> c = Counter(); redact("mail bob@example.com from 8.8.8.8 or 127.0.0.1", c)
    'mail <EMAIL> from <IP_ADDRESS> or 127.0.0.1'
    """
    for kind, rx, placeholder in PII_PATTERNS:
        text, n = rx.subn(placeholder, text)
        if n:
            counts[kind] += n
    return text


def redact_messages(messages: list[dict[str, Any]], counts: Counter[str]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        m = dict(m)
        m["content"] = redact(m["content"], counts)
        if m.get("reasoning"):
            m["reasoning"] = redact(m["reasoning"], counts)
        m["tool_calls"] = [{**c, "arguments": redact(c["arguments"], counts)} for c in m.get("tool_calls") or []]
        out.append(m)
    return out


# --- the stage ----------------------------------------------------------------------------


def _assistant_turns(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m["role"] == "assistant")


def selection_problem(
    messages: list[dict[str, Any]], outcome: str, task_id: str, cfg: SftSelectConfig
) -> tuple[str, str | None, float | None, float | None] | None:
    """(reason, detail, score, threshold) of the first selection rule a trace fails, or None."""
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
    if cfg.decontam_texts:
        gram = contaminating_ngram(text, load_benchmark_ngrams(cfg.decontam_texts, cfg.decontam_ngram))
        if gram is not None:
            return "contaminated_text", gram[:200], None, None
    return None


def run(table: pa.Table, cfg: SftSelectConfig) -> MapResult:
    """Drop traces that fail selection; redact the kept ones (``redactions`` per trace)."""
    messages = table.column(schema.TRACE_MESSAGES).to_pylist()
    outcomes = table.column(schema.TRACE_OUTCOME).to_pylist()
    task_ids = table.column(schema.TRACE_TASK_ID).to_pylist()
    keep: list[int] = []
    drops: list[tuple[int, tuple]] = []
    kept_messages, redactions = [], []
    counters: Counter[str] = Counter()
    for i, (msgs, outcome, task_id) in enumerate(zip(messages, outcomes, task_ids, strict=True)):
        problem = selection_problem(msgs, outcome, task_id, cfg)
        if problem is not None:
            drops.append((i, problem))
            continue
        keep.append(i)
        counts: Counter[str] = Counter()
        kept_messages.append(redact_messages(msgs, counts) if cfg.redact_pii else msgs)
        redactions.append(sum(counts.values()))
        counters.update({f"redacted_{k}": v for k, v in counts.items()})
    out = table.take(pa.array(keep, pa.int64()))
    out = out.set_column(
        out.column_names.index(schema.TRACE_MESSAGES), schema.TRACE_MESSAGES,
        pa.array(kept_messages, pa.list_(schema.MESSAGE_TYPE)),
    )
    out = with_column(out, schema.REDACTIONS, pa.array(redactions, pa.int32()))
    dropped = schema.drops_from_rows(
        table.take(pa.array([i for i, _ in drops], pa.int64())), STAGE, [p[0] for _, p in drops],
        detail=[p[1] for _, p in drops], score=[p[2] for _, p in drops], threshold=[p[3] for _, p in drops],
    )
    return MapResult(out, dropped, counters)

"""Structural validation of canonical traces: a filter stage, one reason per rejected trace.

Reasons, checked in this order (the first failure names the trace's reason):

- ``no_messages``: the conversation is empty.
- ``bad_role``: a role other than system / user / assistant / tool.
- ``role_order``: system messages only at the start; the first turn after them
  is a user; an assistant answers a user or tool results (never itself); a tool
  result follows an assistant tool call or another result; a user does not
  interrupt pending tool calls.
- ``no_assistant``: nothing to learn from.
- ``empty_assistant``: an assistant turn with no content, reasoning or calls.
- ``bad_tools_schema``: ``tools`` is not a JSON list of function schemas.
- ``bad_tool_arguments``: a call's arguments are not a JSON object.
- ``unknown_tool``: a call names no tool of the ``tools`` schema (when one is given).
- ``duplicate_call_id``: two calls share an id.
- ``orphan_tool_result``: a tool result answers no earlier unanswered call id.
- ``unanswered_tool_call``: a call gets no result before the conversation moves
  on (allowed at the very end when ``allow_trailing_tool_calls``).

UTF-8 validity is enforced at ingest (``invalid_utf8``): Arrow strings cannot hold
anything else, so every row here is valid UTF-8 by construction.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from codecorpus import schema
from codecorpus.sft.columns import TRACE_ROLES
from codecorpus.sft.config import SftValidateConfig
from codecorpus.stage import MapResult

STAGE = "sft_validate"
REASONS = (
    "no_messages", "bad_role", "role_order", "no_assistant", "empty_assistant", "bad_tools_schema",
    "bad_tool_arguments", "unknown_tool", "duplicate_call_id", "orphan_tool_result", "unanswered_tool_call",
)  # fmt: skip


def tool_names(tools: str | None) -> set[str] | None:
    """Names of the functions a ``tools`` JSON declares; None when there is no schema.

    Raises ValueError when the schema is not a list of function objects.
    """
    if tools is None:
        return None
    parsed = json.loads(tools)
    if not isinstance(parsed, list):
        raise ValueError("tools is not a list")
    names = set()
    for t in parsed:
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ValueError("a tool has no function name")
        names.add(fn["name"])
    return names


def _order_problem(messages: list[dict[str, Any]]) -> str | None:
    prev = None
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "system" and prev not in (None, "system"):
            return f"system message at {i} after the start"
        if role == "user" and prev == "assistant" and messages[i - 1]["tool_calls"]:
            return f"user message at {i} interrupts tool calls"
        if role == "assistant" and prev not in ("user", "tool"):
            return f"assistant at {i} follows {prev or 'nothing'}"
        if role == "tool" and not (prev == "tool" or (prev == "assistant" and messages[i - 1]["tool_calls"])):
            return f"tool result at {i} follows {prev or 'nothing'} without a call"
        if prev in (None, "system") and role not in ("system", "user"):
            return f"first turn is {role}, expected user"
        prev = role
    return None


def _call_problem(messages: list[dict[str, Any]], names: set[str] | None) -> tuple[str, str] | None:
    for i, m in enumerate(messages):
        for c in m["tool_calls"] or []:
            try:
                args = json.loads(c["arguments"])
            except (json.JSONDecodeError, TypeError):
                return "bad_tool_arguments", f"call {c['id']!r} at {i}: arguments are not JSON"
            if not isinstance(args, dict):
                return "bad_tool_arguments", f"call {c['id']!r} at {i}: arguments are not an object"
            if names is not None and c["name"] not in names:
                return "unknown_tool", f"call {c['id']!r} at {i} names {c['name']!r}, not in tools"
    return None


def _pairing_problem(messages: list[dict[str, Any]], cfg: SftValidateConfig) -> tuple[str, str] | None:
    seen: set[str] = set()
    pending: list[str] = []
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            if m["tool_call_id"] not in pending:
                return "orphan_tool_result", f"tool result at {i} answers {m['tool_call_id']!r}"
            pending.remove(m["tool_call_id"])
            continue
        if pending:
            return "unanswered_tool_call", f"calls {pending} unanswered before message {i}"
        for c in m["tool_calls"] or []:
            if c["id"] in seen:
                return "duplicate_call_id", f"call id {c['id']!r} at {i} is used twice"
            seen.add(c["id"])
            pending.append(c["id"])
    if pending and not cfg.allow_trailing_tool_calls:
        return "unanswered_tool_call", f"calls {pending} unanswered at the end"
    return None


def check_trace(messages: list[dict[str, Any]], tools: str | None, cfg: SftValidateConfig) -> tuple[str, str] | None:
    """(reason, detail) of the first problem of a trace, or None when it is valid."""
    if not messages:
        return "no_messages", "empty conversation"
    bad = [m["role"] for m in messages if m["role"] not in TRACE_ROLES]
    if bad:
        return "bad_role", f"roles {sorted(set(bad))}"
    order = _order_problem(messages)
    if order:
        return "role_order", order
    if not any(m["role"] == "assistant" for m in messages):
        return "no_assistant", "no assistant turn"
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and not (m["content"].strip() or (m["reasoning"] or "").strip() or m["tool_calls"]):
            return "empty_assistant", f"assistant turn {i} is empty"
    try:
        names = tool_names(tools)
    except (ValueError, AttributeError) as err:
        return "bad_tools_schema", str(err)
    return _call_problem(messages, names) or _pairing_problem(messages, cfg)


def run(table: pa.Table, cfg: SftValidateConfig) -> MapResult:
    """Keep the valid traces; drop the others with the reason of their first problem."""
    messages = table.column(schema.TRACE_MESSAGES).to_pylist()
    tools = table.column(schema.TRACE_TOOLS).to_pylist()
    keep, reasons, details = [], [], []
    for i, (msgs, t) in enumerate(zip(messages, tools, strict=True)):
        problem = check_trace(msgs, t, cfg)
        if problem is None:
            keep.append(i)
        else:
            reasons.append(problem[0])
            details.append(problem[1][:300])
    dropped_idx = sorted(set(range(table.num_rows)) - set(keep))
    dropped = schema.drops_from_rows(table.take(pa.array(dropped_idx, pa.int64())), STAGE, reasons, detail=details)
    return MapResult(table.take(pa.array(keep, pa.int64())), dropped)

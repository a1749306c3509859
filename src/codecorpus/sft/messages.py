"""The canonical message and the small readers every trace style shares.

``normalize.py`` (OpenAI, ShareGPT, SWE-agent JSONL) and ``swe_traj.py`` (SWE-agent's
own ``.traj`` files) both build messages with these; neither imports the other's
internals through this module, so they need no import order between them.
"""

from __future__ import annotations

import json
from typing import Any

OPENAI_ROLES = {"developer": "system", "function": "tool"}


class MalformedTrace(ValueError):
    """A record whose shape no input style explains (e.g. ``messages`` is not a list)."""

def message(
    role: str,
    content: str | None = "",
    *,
    reasoning: str | None = None,
    tool_calls: list[dict[str, str]] | None = None,
    tool_call_id: str | None = None,
    name: str | None = None,
    is_summary: bool = False,
) -> dict[str, Any]:
    """A canonical message dict (the ``schema.MESSAGE_TYPE`` struct)."""
    return {
        "role": role,
        "content": content or "",
        "reasoning": reasoning or None,
        "tool_calls": tool_calls or [],
        "tool_call_id": None if tool_call_id is None else str(tool_call_id),
        "name": None if name is None else str(name),
        "is_summary": bool(is_summary),
    }

def _text(value: Any) -> str:
    """Message content as text: a string, or the text parts of an OpenAI content list."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                raise MalformedTrace(f"content part {str(part)[:60]!r} has no text")
        return "".join(parts)
    raise MalformedTrace(f"content is a {type(value).__name__}, expected a string or a list of parts")


def _arguments(value: Any) -> str:
    """Call arguments as the JSON string OpenAI uses (a dict is dumped; a bad string is kept)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _tools(value: Any) -> str | None:
    if value is None or value == []:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)

def _task_id(record: dict[str, Any]) -> str:
    for key in ("task_id", "instance_id", "id"):
        if isinstance(record.get(key), str | int):
            return str(record[key])
    return ""

def _openai_message(m: Any) -> dict[str, Any]:
    if not isinstance(m, dict):
        raise MalformedTrace("a message is not an object")
    role = str(m.get("role", ""))
    role = OPENAI_ROLES.get(role, role)
    calls = []
    for c in m.get("tool_calls") or []:
        if not isinstance(c, dict):
            raise MalformedTrace("a tool call is not an object")
        fn = c.get("function") if isinstance(c.get("function"), dict) else c
        calls.append({"id": str(c.get("id") or ""), "name": str(fn.get("name") or ""),
                      "arguments": _arguments(fn.get("arguments", "{}"))})
    reasoning = m.get("reasoning_content") or m.get("reasoning") or m.get("thinking")
    return message(
        role, _text(m.get("content")), reasoning=_text(reasoning) or None, tool_calls=calls,
        tool_call_id=m.get("tool_call_id"), name=m.get("name"),
        is_summary=bool(m.get("summary") or m.get("is_summary")),
    )

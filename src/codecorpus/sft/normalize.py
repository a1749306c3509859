"""Every input style -> one canonical trace (``schema.TRACE_SCHEMA``).

- OpenAI chat: ``messages`` with system/user/assistant/tool roles, assistant
  ``tool_calls`` (``id``, ``function.name``, ``function.arguments``), tool results
  with ``tool_call_id``, an optional ``tools`` list, reasoning in
  ``reasoning_content`` (or ``reasoning`` / ``thinking``).
- ShareGPT: ``conversations`` of ``{from, value}`` (human/gpt/system, and the
  LLaMA-Factory tool roles function_call / observation), optional ``system`` and ``tools``.
- SWE-agent trajectories, flattened: ``trajectory`` (or ``steps``) of ``{thought,
  action, observation}`` steps, the task (``problem_statement``), the final patch
  (``patch`` or ``info.submission``) and ``resolved``. Each action becomes a
  ``bash`` tool call and its observation the tool result.
- SWE-agent's own ``.traj`` objects (``history``, ``trajectory``, ``info``,
  ``environment``, ``replay_config``): mapped by ``swe_traj``, format ``swe-agent``.

A message flagged ``is_summary`` (OpenAI: ``"summary": true``; SWE-agent: a step
with ``role: summary``) is a context summary an agent wrote for itself; the
splitter reuses it for continuation segments.

Normalization never judges: it maps shapes and keeps odd values (an unknown role,
unparsable arguments) for ``validate`` to reject with a reason. Only a record it
cannot map at all raises ``MalformedTrace``, which ingest counts as a drop.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from codecorpus import schema
from codecorpus.sft import swe_traj
from codecorpus.sft.columns import TRACE_OUTCOMES
from codecorpus.sft.messages import (
    MalformedTrace,
    _arguments,
    _openai_message,
    _task_id,
    _text,
    _tools,
    message,
)

SWE_AGENT_TOOL = "bash"
SWE_AGENT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": SWE_AGENT_TOOL,
            "description": "Run a shell command (or an agent-computer-interface command) in the repository.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]
SHAREGPT_ROLES = {
    "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
    "system": "system", "observation": "tool", "tool": "tool", "function_response": "tool",
    "function_call": "assistant",
}  # fmt: skip


def detect_format(record: dict[str, Any]) -> str | None:
    """The input style of a record from its keys, or None.

    >>> detect_format({"messages": []}), detect_format({"conversations": []})
    ('openai', 'sharegpt')
    >>> detect_format({"trajectory": []}), detect_format({"history": []}), detect_format({"text": "x"})
    ('swe-agent', 'swe-agent', None)
    """
    if "messages" in record:
        return "openai"
    if "conversations" in record:
        return "sharegpt"
    if "trajectory" in record or "steps" in record or swe_traj.looks_native(record):
        return "swe-agent"
    return None


def normalize(record: dict[str, Any], fmt: str, fallback_id: str = "") -> dict[str, Any]:
    """Canonical fields of one record: format, task_id, outcome, repo, messages, tools, metadata.

    ``fallback_id`` is the task id of a record that names none (a ``.traj`` file's name).
    """
    if fmt == "openai":
        out = _openai(record)
    elif fmt == "sharegpt":
        out = _sharegpt(record)
    elif fmt == "swe-agent" and swe_traj.looks_native(record):
        out = swe_traj.normalize_traj(record, fallback_id)
    elif fmt == "swe-agent":
        out = _swe_agent(record)
    else:
        raise MalformedTrace(f"unknown format {fmt!r}")
    out[schema.TRACE_FORMAT] = fmt
    return out


def trace_content_hash(messages: list[dict[str, Any]], tools: str | None) -> str:
    """sha256 of the canonical conversation: equal conversations hash equal, whatever their source."""
    payload = json.dumps([messages, tools], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


# --- helpers shared by the styles -----------------------------------------------------


def _outcome(record: dict[str, Any]) -> str:
    resolved = record.get("resolved")
    info = record.get("info")
    if resolved is None and isinstance(info, dict):
        resolved = info.get("resolved")
    if isinstance(resolved, bool):
        return "resolved" if resolved else "unresolved"
    outcome = record.get("outcome")
    if isinstance(outcome, str) and outcome in TRACE_OUTCOMES:
        return outcome
    return schema.UNKNOWN


def _metadata(record: dict[str, Any], used: set[str]) -> str:
    rest = {k: v for k, v in record.items() if k not in used}
    meta = record.get("metadata")
    if isinstance(meta, dict):
        rest = {**rest, **meta}
    return json.dumps(rest, ensure_ascii=False, sort_keys=True, default=str)


def _list(record: dict[str, Any], key: str) -> list[Any]:
    value = record.get(key)
    if not isinstance(value, list):
        raise MalformedTrace(f"{key} is a {type(value).__name__}, expected a list")
    return value


# --- OpenAI chat ----------------------------------------------------------------------


def _openai(record: dict[str, Any]) -> dict[str, Any]:
    messages = [_openai_message(m) for m in _list(record, "messages")]
    used = {"messages", "tools", "task_id", "instance_id", "id", "resolved", "outcome", "repo", "metadata"}
    return {
        schema.TRACE_TASK_ID: _task_id(record),
        schema.TRACE_OUTCOME: _outcome(record),
        schema.REPO: str(record.get("repo") or ""),
        schema.TRACE_MESSAGES: messages,
        schema.TRACE_TOOLS: _tools(record.get("tools")),
        schema.TRACE_METADATA: _metadata(record, used),
    }


# --- ShareGPT -------------------------------------------------------------------------


def _sharegpt_call(value: str, index: int) -> dict[str, str]:
    """A LLaMA-Factory ``function_call`` turn: ``{"name": ..., "arguments": ...}`` JSON."""
    try:
        call = json.loads(value)
    except json.JSONDecodeError:
        call = None
    if not isinstance(call, dict):
        return {"id": f"call_{index}", "name": "", "arguments": value}
    return {"id": f"call_{index}", "name": str(call.get("name") or ""),
            "arguments": _arguments(call.get("arguments", {}))}


def _sharegpt(record: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    if isinstance(record.get("system"), str) and record["system"]:
        messages.append(message("system", record["system"]))
    pending: list[str] = []  # ids of calls awaiting an observation, oldest first
    for i, turn in enumerate(_list(record, "conversations")):
        if not isinstance(turn, dict):
            raise MalformedTrace("a conversation turn is not an object")
        sender, value = str(turn.get("from", "")), _text(turn.get("value"))
        role = SHAREGPT_ROLES.get(sender, sender)
        if sender == "function_call":
            call = _sharegpt_call(value, i)
            pending.append(call["id"])
            messages.append(message("assistant", "", tool_calls=[call]))
        elif role == "tool":
            messages.append(message("tool", value, tool_call_id=pending.pop(0) if pending else None))
        else:
            messages.append(message(role, value))
    used = {"conversations", "system", "tools", "task_id", "id", "resolved", "outcome", "metadata"}
    return {
        schema.TRACE_TASK_ID: _task_id(record),
        schema.TRACE_OUTCOME: _outcome(record),
        schema.REPO: str(record.get("repo") or ""),
        schema.TRACE_MESSAGES: messages,
        schema.TRACE_TOOLS: _tools(record.get("tools")),
        schema.TRACE_METADATA: _metadata(record, used),
    }


# --- SWE-agent ------------------------------------------------------------------------


def _swe_step(step: Any, i: int) -> list[dict[str, Any]]:
    if not isinstance(step, dict):
        raise MalformedTrace("a trajectory step is not an object")
    role = str(step.get("role") or "assistant")
    text = _text(step.get("thought") or step.get("response") or step.get("text") or step.get("content"))
    if role == "summary":
        return [message("user", text, is_summary=True)]
    if role != "assistant":
        return [message(role, text)]
    action = step.get("action")
    calls, out = [], []
    if action is not None and action != "":
        call_id = f"call_{i}"
        calls.append({"id": call_id, "name": SWE_AGENT_TOOL,
                      "arguments": json.dumps({"command": _text(action)}, ensure_ascii=False)})
    out.append(message("assistant", text, reasoning=_text(step.get("reasoning")) or None, tool_calls=calls))
    if calls and "observation" in step:
        out.append(message("tool", _text(step.get("observation")), tool_call_id=calls[0]["id"]))
    return out


def _swe_agent(record: dict[str, Any]) -> dict[str, Any]:
    steps = _list(record, "trajectory" if "trajectory" in record else "steps")
    info = record.get("info") if isinstance(record.get("info"), dict) else {}
    messages: list[dict[str, Any]] = []
    if isinstance(record.get("system_prompt"), str) and record["system_prompt"]:
        messages.append(message("system", record["system_prompt"]))
    task = record.get("problem_statement") or record.get("task")
    if task is not None:
        messages.append(message("user", _text(task)))
    for i, step in enumerate(steps):
        messages.extend(_swe_step(step, i))
    used = {"trajectory", "steps", "system_prompt", "problem_statement", "task", "instance_id", "task_id",
            "id", "resolved", "outcome", "repo", "metadata", "tools"}
    meta = json.loads(_metadata(record, used))
    patch = record.get("patch") or info.get("submission")
    if patch is not None:
        meta["patch"] = patch
    return {
        schema.TRACE_TASK_ID: _task_id(record),
        schema.TRACE_OUTCOME: _outcome(record),
        schema.REPO: str(record.get("repo") or ""),
        schema.TRACE_MESSAGES: messages,
        schema.TRACE_TOOLS: _tools(record.get("tools") or SWE_AGENT_TOOLS),
        schema.TRACE_METADATA: json.dumps(meta, ensure_ascii=False, sort_keys=True, default=str),
    }



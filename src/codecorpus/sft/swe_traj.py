"""SWE-agent's own ``.traj`` files -> the canonical trace fields (``schema.TRACE_SCHEMA``).

What SWE-agent writes, as read in its code (SWE-agent/SWE-agent:
``sweagent/agent/agents.py`` ``DefaultAgent.get_trajectory_data`` / ``save_trajectory``
and ``RetryAgent.get_trajectory_data``; ``sweagent/types.py`` ``HistoryItem``,
``TrajectoryStep``, ``AgentInfo``; ``sweagent/run/common.py`` ``_is_promising_patch``;
the "Output files" page of its docs): one JSON object per instance,
``<instance_id>.traj``, written with ``json.dumps(data, indent=2)`` after every step
(so a killed run leaves a truncated file), with

- ``history``: every message the agent sent or received, ``{role, content, agent,
  message_type}``; assistant turns add ``thought``, ``action``, ``tool_calls`` (the
  OpenAI / litellm shape, function calling only) and ``thinking_blocks``; an
  observation answering a call has ``role: tool`` and ``tool_call_ids`` (one id).
  ``content`` is a string or a list of ``{type: text, text}`` parts; demonstrations
  carry ``is_demo``.
- ``trajectory``: a step per model call, ``{action, observation, response, thought,
  state, query, execution_time, extra_info}``. Rejected outputs (format errors,
  blocked actions) are steps too but never reach ``history``, and ``query`` repeats
  the whole conversation per step.
- ``info``: ``exit_status``, ``submission`` (the patch), ``model_stats``, version
  hashes, ``edited_files30/50/70``; a retry agent adds ``best_attempt_idx`` and a
  top-level ``attempts`` list holding every attempt's data again.
- ``replay_config`` (the run config as a JSON string) and ``environment`` (a name).
  0.x files have the same top level (``agent: primary``; ``state`` a JSON string).

How a file becomes one trace:

- Messages come from ``history`` (what the model saw and said), not ``trajectory``.
  Only the main agent's turns are kept (the agent of the first message), and
  demonstrations are dropped: they are another task's turns, and training on them
  would teach the same few transcripts thousands of times.
- After an early exit SWE-agent appends a note of its own as an assistant turn
  ("Exit due to cost limit", no action) and an observation; the note and what
  follows are cut, since the model never said them.
- Tool calls keep their ids, names and JSON arguments; a result takes its call's id
  from ``tool_call_ids``. A text-parsed (thought/action) history stays plain chat:
  the action is inside the assistant's text, the observation a user turn.
- ``.traj`` files hold no tool schemas (SWE-agent builds them from tool bundles at
  run time), so ``tools`` lists the called functions with the argument names and
  JSON types seen in the calls; ``null`` when nothing was called.
- Outcome: ``resolved`` / ``unresolved`` when an evaluation was merged in
  (``resolved``); otherwise, as SWE-agent's own ``_is_promising_patch`` reads
  ``info``: exit status ``submitted`` with a patch is ``submitted``, ``submitted``
  with an empty patch ``unresolved``; every other status (``exit_cost``,
  ``exit_context``, ``exit_format``, ``submitted (exit_cost)`` after an autosubmit,
  an early exit, none at all for a run cut off) is ``incomplete``.
- Task id: ``problem_statement.id`` of the replay config, else the file's name.
  Repository: the replay config's GitHub URL, else the ``owner__repo-N`` form of a
  SWE-bench instance id.
- Metadata keeps the environment, exit status, patch (``patch``), model stats and
  versions; never the trajectory, the attempts or the edited-file dumps, which
  repeat the conversation.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from codecorpus import schema
from codecorpus.sft.messages import MalformedTrace, _openai_message, _task_id, _text, _tools

EXIT_NOTE = re.compile(r"\s*Exit(?:ing)? due to ")
BULKY_KEYS = ("history", "trajectory", "attempts", "replay_config", "info")
JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
              (list, "array"), (dict, "object"))  # fmt: skip


def looks_native(record: dict[str, Any]) -> bool:
    """True for the layout SWE-agent writes to a ``.traj`` file (not the flattened steps)."""
    return "history" in record or "attempts" in record or ("environment" in record and "info" in record)


def normalize_traj(record: dict[str, Any], fallback_id: str = "") -> dict[str, Any]:
    """Canonical fields of one ``.traj`` object; ``fallback_id`` names it when nothing inside does."""
    history = record.get("history")
    if history is None and "attempts" in record:
        raise MalformedTrace("a retry agent's .traj saved before it chose an attempt (only `attempts`)")
    if not isinstance(history, list):
        raise MalformedTrace(f"a SWE-agent .traj needs a history list, got {type(history).__name__}")
    if not all(isinstance(h, dict) for h in history):
        raise MalformedTrace("a history item is not an object")
    info = record["info"] if isinstance(record.get("info"), dict) else {}
    main = next((h["agent"] for h in history if h.get("agent") is not None), None)
    kept = [h for h in history if not h.get("is_demo") and h.get("agent") in (None, main)]
    turns, exit_note = _without_exit_note(kept)
    messages = [_history_message(h) for h in turns]
    replay = _replay_config(record.get("replay_config"))
    task_id = _task_id(record) or _replay_task_id(replay) or fallback_id
    meta = _traj_metadata(record, info)
    meta["dropped_history"] = {
        "demonstrations": sum(1 for h in history if h.get("is_demo")),
        "other_agents": sum(1 for h in history if not h.get("is_demo") and h.get("agent") not in (None, main)),
        "exit_note": len(kept) - len(turns) if exit_note else 0,
    }
    return {
        schema.TRACE_TASK_ID: task_id,
        schema.TRACE_OUTCOME: traj_outcome(record, info),
        schema.REPO: str(record.get("repo") or "") or _repo(replay, task_id),
        schema.TRACE_MESSAGES: messages,
        schema.TRACE_TOOLS: _tools(record.get("tools") or called_tools(messages)),
        schema.TRACE_METADATA: json.dumps(meta, ensure_ascii=False, sort_keys=True, default=str),
    }


def traj_outcome(record: dict[str, Any], info: dict[str, Any]) -> str:
    """The outcome vocabulary of ``columns.TRACE_OUTCOMES`` from ``info``.

    >>> traj_outcome({}, {"exit_status": "submitted", "submission": "diff --git a/x b/x"})
    'submitted'
    >>> traj_outcome({}, {"exit_status": "submitted (exit_cost)", "submission": "diff"})
    'incomplete'
    >>> traj_outcome({}, {"exit_status": "submitted", "submission": None}), traj_outcome({"resolved": True}, {})
    ('unresolved', 'resolved')
    """
    resolved = record.get("resolved", info.get("resolved"))
    if isinstance(resolved, bool):
        return "resolved" if resolved else "unresolved"
    if info.get("exit_status") == "submitted":
        patch = info.get("submission")
        return "submitted" if (patch.strip() if isinstance(patch, str) else patch) else "unresolved"
    return "incomplete"


def called_tools(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Function schemas for the tools a trace calls: names, argument names and JSON types."""
    seen: dict[str, dict[str, str]] = {}
    for m in messages:
        for call in m["tool_calls"]:
            props = seen.setdefault(call["name"], {})
            try:
                args = json.loads(call["arguments"])
            except (json.JSONDecodeError, TypeError):
                continue  # validate rejects the call (bad_tool_arguments)
            if isinstance(args, dict):
                for key, value in args.items():
                    props.setdefault(key, _json_type(value))
    if not seen:
        return None
    return [
        {"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {k: {"type": t} for k, t in sorted(props.items())}}}}
        for name, props in sorted(seen.items())
    ]  # fmt: skip


def _json_type(value: Any) -> str:
    return next((name for kind, name in JSON_TYPES if isinstance(value, kind)), "null")


def _history_message(h: dict[str, Any]) -> dict[str, Any]:
    """A history item in the OpenAI shape, mapped by the OpenAI normalizer."""
    ids = h.get("tool_call_ids")
    call_id = ids[0] if isinstance(ids, list) and ids else h.get("tool_call_id")
    thinking = h.get("thinking_blocks")
    reasoning = "".join(b.get("thinking") or "" for b in thinking if isinstance(b, dict)) if isinstance(thinking, list) else ""
    return _openai_message({
        "role": h.get("role", ""), "content": h.get("content"), "tool_calls": h.get("tool_calls"),
        "tool_call_id": call_id, "reasoning_content": reasoning or h.get("reasoning_content"),
    })  # fmt: skip


def _without_exit_note(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """Cut SWE-agent's own exit note (the last assistant turn, when it is one) and what follows."""
    for i in range(len(items) - 1, -1, -1):
        if items[i].get("role") != "assistant":
            continue
        h = items[i]
        action = str(h.get("action") or "").strip()
        own = not h.get("tool_calls") and (not action or action.startswith("exit_"))
        if own and EXIT_NOTE.match(_text(h.get("content"))):
            return items[:i], True
        return items, False
    return items, False


def _replay_config(value: Any) -> dict[str, Any]:
    """The run config SWE-agent stores as a JSON string (or None); {} when unreadable."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        return {}
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _replay_task_id(replay: dict[str, Any]) -> str:
    problem = replay.get("problem_statement")
    pid = problem.get("id") if isinstance(problem, dict) else None
    return str(pid) if isinstance(pid, str | int) and pid != "" else ""


def _repo(replay: dict[str, Any], task_id: str) -> str:
    """owner/name from the replay config's GitHub URL, else from an ``owner__repo-N`` instance id.

    >>> _repo({}, "scikit-learn__scikit-learn-10297"), _repo({}, "my-task")
    ('scikit-learn/scikit-learn', '')
    """
    env = replay.get("env")
    repo = env.get("repo") if isinstance(env, dict) else None
    url = repo.get("github_url") if isinstance(repo, dict) else None
    if isinstance(url, str) and "github.com/" in url:
        return url.split("github.com/", 1)[1].removesuffix(".git").strip("/")
    owner, sep, rest = task_id.partition("__")
    name, dash, number = rest.rpartition("-")
    return f"{owner}/{name}" if sep and dash and owner and name and number.isdigit() else ""


def _traj_metadata(record: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {k: v for k, v in record.items() if k not in BULKY_KEYS}
    meta["info"] = {k: v for k, v in info.items() if not k.startswith("edited_files") and k != "submission"}
    meta["exit_status"] = info.get("exit_status")
    if info.get("submission") is not None:
        meta["patch"] = info["submission"]
    if isinstance(record.get("attempts"), list):
        meta["attempts"] = len(record["attempts"])
    if isinstance(record.get("trajectory"), list):
        meta["trajectory_steps"] = len(record["trajectory"])
    if isinstance(record.get("replay_config"), str):
        meta["replay_config_sha256"] = hashlib.sha256(record["replay_config"].encode("utf-8", "surrogatepass")).hexdigest()
    return meta

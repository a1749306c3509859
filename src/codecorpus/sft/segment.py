"""Split traces longer than the context at turn boundaries, with a summary for each continuation.

A trace is cut into *blocks*: a message plus the tool results that answer it,
so no cut ever falls between a tool call and its result. The first segment is
the head (leading system messages and the task, i.e. the first user message)
plus as many blocks as fit. Every later segment starts again with the head,
then one user message that summarizes the work so far, then the next blocks
that fit; only its new assistant turns are trained.

The summary is the trace's own latest summary turn (``is_summary``: agents that
compress their context write them) when one precedes the cut, else an
extractive one built deterministically from the messages already covered:
files opened and edited (from call arguments and shell commands), the commands
run with their outcome, and the last result. A block that does not fit even
right after the head and summary makes the trace ``unsplittable``.

Block sizes are estimated from the whole trace's rendering, then every segment
is rendered for real and shrunk a block at a time if the estimate was short.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jinja2

from codecorpus.sft.normalize import message
from codecorpus.sft.render import Escapes, Rendered, Switches, render_example
from codecorpus.sft.select import tool_error_rate
from codecorpus.tokenize.tokenizer import Tokenizer

SUMMARY_HEADER = "Summary of the work so far (this continues an earlier part of the same session):"
_PATH_KEYS = ("path", "file", "file_path", "filename", "filepath")
_EDIT_TOOLS = re.compile(r"edit|write|create|replace|patch|insert", re.I)
_OPEN_CMD = re.compile(r"^\s*(?:open|cat|less|head|tail|view|nl)\s+(?:-\S+\s+)*([\w./-]+)")
_EDIT_CMD = re.compile(r"^\s*(?:edit|create|sed\s+-i(?:\s+\S+)?|touch)\s+(?:'[^']*'\s+)?([\w./-]+)")
_ERROR_PATTERNS = (r"Traceback \(most recent call last\)", r"(?m)^\w*Error: ", r"command not found",
                   r"No such file or directory", r"(?i)exit (?:code|status):? *[1-9]")


class Unsplittable(ValueError):
    """No cut at turn boundaries makes every segment fit."""


@dataclass
class Segmented:
    examples: list[Rendered]
    summary_source: str  # columns.SUMMARY_SOURCES: none, trace, extractive or mixed
    escaped: int = 0  # special-token strings of the data rendered as plain text (sft_render.special_tokens)


def blocks(messages: list[dict[str, Any]], start: int) -> list[tuple[int, int]]:
    """[start, end) ranges of messages from ``start``: each message with its tool results.

    >>> m = [{"role": r} for r in ("user", "assistant", "tool", "tool", "assistant")]
    >>> blocks(m, 1)
    [(1, 4), (4, 5)]
    """
    out: list[tuple[int, int]] = []
    for i in range(start, len(messages)):
        if messages[i]["role"] == "tool" and out:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


def head_length(messages: list[dict[str, Any]]) -> int:
    """Leading system messages plus the task (the first user message)."""
    h = 0
    while h < len(messages) and messages[h]["role"] == "system":
        h += 1
    return h + 1 if h < len(messages) and messages[h]["role"] == "user" else h


# --- summaries ------------------------------------------------------------------------


def _call_facts(call: dict[str, str]) -> tuple[list[str], list[str], str | None]:
    """(opened, edited, command) of one tool call."""
    try:
        args = json.loads(call["arguments"])
    except json.JSONDecodeError:
        args = {}
    args = args if isinstance(args, dict) else {}
    path = next((str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)), None)
    command = args.get("command") or args.get("cmd")
    opened: list[str] = []
    edited: list[str] = []
    if path:
        (edited if _EDIT_TOOLS.search(call["name"]) else opened).append(path)
    if isinstance(command, str):
        first = command.strip().splitlines()[0] if command.strip() else ""
        if m := _EDIT_CMD.match(first):
            edited.append(m.group(1))
        elif m := _OPEN_CMD.match(first):
            opened.append(m.group(1))
        return opened, edited, first[:120]
    return opened, edited, None if path else f"{call['name']}({call['arguments'][:80]})"


def extractive_summary(done: list[dict[str, Any]], max_chars: int) -> str:
    """A deterministic summary of ``done`` messages: files, commands and outcomes, last result."""
    opened: list[str] = []
    edited: list[str] = []
    commands: list[str] = []
    results = {m["tool_call_id"]: m["content"] for m in done if m["role"] == "tool"}
    for m in done:
        for call in m.get("tool_calls") or []:
            o, e, cmd = _call_facts(call)
            opened += [p for p in o if p not in opened]
            edited += [p for p in e if p not in edited]
            if cmd is not None:
                out = results.get(call["id"])
                status = "no result" if out is None else ("error" if tool_error_rate([{"role": "tool", "content": out}], _ERROR_PATTERNS) else "ok")
                commands.append(f"- `{cmd}` -> {status}")
    lines = [SUMMARY_HEADER]
    if opened:
        lines.append("Files opened: " + ", ".join(opened[-20:]))
    if edited:
        lines.append("Files edited: " + ", ".join(edited[-20:]))
    if commands:
        lines += ["Commands run (latest last):", *commands[-15:]]
    last = next((m["content"] for m in reversed(done) if m["role"] == "tool"), None)
    if last is None:
        last = next((m["content"] for m in reversed(done) if m["role"] == "assistant" and m["content"]), "")
    text = "\n".join(lines)
    if last:
        budget = max(0, max_chars - len(text) - 20)
        text += "\nLast result:\n" + (last if len(last) <= budget else "..." + last[len(last) - budget :])
    return text[:max_chars]


def summary_message(messages: list[dict[str, Any]], head: int, upto: int, max_chars: int) -> tuple[dict[str, Any], str]:
    """The summary turn of a continuation that starts at message ``upto``, and its source."""
    own = next((m for m in reversed(messages[head:upto]) if m.get("is_summary")), None)
    if own is not None:
        return message("user", own["content"], is_summary=True), "trace"
    return message("user", extractive_summary(messages[head:upto], max_chars), is_summary=True), "extractive"


# --- splitting ------------------------------------------------------------------------


def _fit(
    render_fn: Any, prefix: list[dict[str, Any]], trainable_from: int, blks: list[tuple[int, int]], first: int,
    estimate: list[int], base: int, max_tokens: int, messages: list[dict[str, Any]],
) -> tuple[Rendered, int]:
    """Render prefix + the most blocks from ``first`` that fit; (example, blocks taken)."""
    take, total = 0, base
    while first + take < len(blks) and total + estimate[first + take] <= max_tokens:
        total += estimate[first + take]
        take += 1
    take = max(take, 1)
    while take >= 1:
        lo, hi = blks[first][0], blks[first + take - 1][1]
        ex = render_fn([*prefix, *messages[lo:hi]], trainable_from)
        if len(ex) <= max_tokens:
            return ex, take
        take -= 1
    raise Unsplittable(f"block at message {blks[first][0]} does not fit in {max_tokens} tokens after the summary")


def segment_trace(
    template: jinja2.Template, messages: list[dict[str, Any]], tools_json: str | None, tokenizer: Tokenizer,
    sw: Switches, max_tokens: int, summary_max_chars: int, split: bool = True, escapes: Escapes | None = None,
) -> Segmented:
    """The examples of one trace: itself when it fits, else continuation segments (``escapes``:
    see :func:`codecorpus.sft.render.escape_specials`)."""
    whole = render_example(template, messages, tools_json, tokenizer, sw, escapes=escapes)
    if len(whole) <= max_tokens:
        return Segmented([whole], "none")
    if not split:
        raise Unsplittable(f"{len(whole)} tokens > {max_tokens} and sft_render.split_long is off")
    h = head_length(messages)
    blks = blocks(messages, h)
    ends = whole.message_ends
    estimate = [ends[hi - 1] - ends[lo - 1] for lo, hi in blks]
    head = messages[:h]

    def render_fn(msgs: list[dict[str, Any]], trainable_from: int) -> Rendered:
        return render_example(template, msgs, tools_json, tokenizer, sw, trainable_from, escapes=escapes)

    examples: list[Rendered] = []
    sources: set[str] = set()
    first = 0
    if not blks:
        raise Unsplittable(f"{len(whole)} tokens > {max_tokens} and no turn after the task to cut at")
    while first < len(blks):
        if not examples:
            base = ends[h - 1] if h else 0
            ex, take = _fit(render_fn, head, 0, blks, first, estimate, base, max_tokens, messages)
        else:
            summary, src = summary_message(messages, h, blks[first][0], summary_max_chars)
            sources.add(src)
            prefix = [*head, summary]
            base = len(render_fn(prefix, len(prefix)))
            ex, take = _fit(render_fn, prefix, len(prefix), blks, first, estimate, base, max_tokens, messages)
        examples.append(ex)
        first += take
    return Segmented(examples, sources.pop() if len(sources) == 1 else "mixed")

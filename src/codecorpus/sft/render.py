"""Render a conversation part by part, so every token's loss mask is known exactly.

Generation tags (``{% generation %}``) exist in few templates, so masks come
from rendering prefixes instead: the text message ``k`` adds is
``render(messages[:k+1])`` minus ``render(messages[:k])``. For an assistant
message the part up to ``render(messages[:k], add_generation_prompt=True)`` is
the header (never trained) and the rest is what the model generates (trained).
Inside it, the reasoning and the tool calls are found by rendering the message
once more without them: the one contiguous difference is their span. With
``train_on_reasoning`` / ``train_on_tool_calls`` off, those spans are masked.

Each part is tokenized on its own and the ids concatenated, so the masked
tokens decode to exactly the trained text (no token straddles a boundary), at
the cost of ids that may differ from tokenizing the whole text at a few part
boundaries (those fall on template markers, where BPE rarely merges anyway).
Special tokens in the template text (``<|im_start|>``) become their special
ids. Conversation text that contains one must never become that id (a trace
would forge a turn), so it is either rejected (``special_token_text``) or
*escaped* (:func:`escape_specials`): each such string in the data is replaced
by a private-use placeholder character while the template renders, and the
placeholder is put back as the plain string when the parts are tokenized, so it
becomes ordinary text tokens (``<``, ``|``, ``im``, ...), as in any document.

A template must be prefix-stable (rendering more messages only appends): one
that rewrites earlier turns (e.g. strips reasoning from past turns) makes a
trace ``template_unstable``.

Two paths give these parts. The *exact* path above renders every prefix, so its
template work grows with the square of the number of turns. The *fast* path
renders each message once, in the context of the leading system messages only
(``render([*system, m]) - render(system)``), and accepts the result only when
the whole conversation rendered once equals the head followed by those pieces
(checked on every conversation, one extra render). ChatML-style templates,
the built-in one included, pass: their text for a message depends on that
message alone. Templates whose text for a turn depends on its neighbours
(alternation checks, separators only between turns, a first-turn BOS) fail the
check or raise, and fall back to the exact path, which also decides whether
the template is unstable. Both paths give the same parts on composable
templates (a test checks every fixture).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import jinja2
import numpy as np

from codecorpus.sft.template import TemplateError, render
from codecorpus.tokenize.tokenizer import Tokenizer


class TemplateUnstable(TemplateError):
    """Rendering more messages changed the text already rendered."""


class NotComposable(TemplateError):
    """The fast path does not apply: the conversation is not the concatenation of its messages."""


RenderPath = Literal["auto", "fast", "exact"]
"""auto: the fast path when the conversation is composable, else the exact one."""


@dataclass(frozen=True)
class Switches:
    train_on_tool_calls: bool = True
    train_on_reasoning: bool = True
    train_on_system: bool = False


@dataclass
class Rendered:
    """Tokens and loss mask of one example, and where each message's tokens end."""

    tokens: np.ndarray  # uint32
    mask: np.ndarray  # uint8
    message_ends: list[int] = field(default_factory=list)
    """token offset where message i's part ends (headers included with their message)."""
    parts: list[tuple[str, bool]] = field(default_factory=list)
    path: str = "exact"
    """the rendering path that produced the parts: fast or exact."""

    def __len__(self) -> int:
        return len(self.tokens)


# --- special tokens ---------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def _special_regex(tokenizer: Tokenizer) -> re.Pattern[str] | None:
    specials = sorted(tokenizer.special_tokens, key=len, reverse=True)
    return re.compile("(" + "|".join(map(re.escape, specials)) + ")") if specials else None


def special_token_in(text: str, tokenizer: Tokenizer) -> str | None:
    rx = _special_regex(tokenizer)
    found = rx.search(text) if rx else None
    return found.group(0) if found else None


PLACEHOLDER_BASE = 0xF0000
"""The first placeholder of :func:`escape_specials`: Supplementary Private Use Area-A, code
points that no special token spells and that text almost never holds (one that does is
not escaped: :func:`escape_specials` returns None)."""


@dataclass(frozen=True)
class Escapes:
    """How a conversation's data was escaped: the placeholder table and the occurrences replaced."""

    table: dict[int, str]
    """placeholder code point -> the special-token string it stands for (a ``str.translate`` table)"""
    count: int

    def restore(self, text: str) -> str:
        return text.translate(self.table)


@functools.lru_cache(maxsize=8)
def escape_table(tokenizer: Tokenizer) -> dict[int, str]:
    """Placeholder code point -> special-token string: the i-th special token (longest first, then by
    text) is ``chr(PLACEHOLDER_BASE + i)``, fixed by the tokenizer alone."""
    ordered = sorted(tokenizer.special_tokens, key=lambda t: (-len(t), t))
    return {PLACEHOLDER_BASE + i: text for i, text in enumerate(ordered)}


def has_placeholder(text: str, tokenizer: Tokenizer) -> bool:
    """Whether ``text`` already holds a placeholder character (so an escape of it could not be undone)."""
    top = PLACEHOLDER_BASE + len(tokenizer.special_tokens)
    return any(PLACEHOLDER_BASE <= ord(c) < top for c in set(text))


@functools.lru_cache(maxsize=8)
def _placeholders(tokenizer: Tokenizer) -> dict[str, str]:
    """Special-token string -> its placeholder character (``escape_table`` reversed)."""
    return {t: chr(c) for c, t in escape_table(tokenizer).items()}


def escape_specials(text: str, tokenizer: Tokenizer) -> tuple[str, int]:
    """``text`` with every special-token string replaced by its placeholder, and how many were."""
    rx = _special_regex(tokenizer)
    if rx is None:
        return text, 0
    code = _placeholders(tokenizer)
    return rx.subn(lambda m: code[m.group(0)], text)


def encode_with_specials(tokenizer: Tokenizer, text: str) -> list[int]:
    """Ids of template text: special-token strings become their ids, the rest ordinary text."""
    return encode_many(tokenizer, [text])[0]


def encode_many(tokenizer: Tokenizer, texts: list[str], escapes: Escapes | None = None) -> list[list[int]]:
    """:func:`encode_with_specials` of every text, with one tokenizer call for them all.

    Each text (and each piece between special tokens) is still encoded on its
    own; batching only saves the per-call overhead, which dominated once
    rendering became linear. With
    ``escapes``, placeholders in the pieces become their special-token strings
    again and are encoded as plain text (``Tokenizer.encode_batch`` never gives
    a special id for text).
    """
    rx = _special_regex(tokenizer)
    split = [rx.split(t) if rx is not None else [t] for t in texts]
    plain = [p for pieces in split for i, p in enumerate(pieces) if i % 2 == 0 and p]
    if escapes is not None and escapes.table:
        plain = [escapes.restore(p) for p in plain]
    encoded = iter(tokenizer.encode_batch(plain)) if plain else iter(())
    out: list[list[int]] = []
    for pieces in split:
        ids: list[int] = []
        for i, p in enumerate(pieces):
            if i % 2:
                ids.append(tokenizer.special_tokens[p])
            elif p:
                ids.extend(next(encoded))
        out.append(ids)
    return out


# --- part-by-part rendering ----------------------------------------------------------


def _diff_span(full: str, without: str) -> tuple[int, int]:
    """The span of ``full`` that ``without`` lacks (one contiguous difference)."""
    n = min(len(full), len(without))
    pre = 0
    while pre < n and full[pre] == without[pre]:
        pre += 1
    suf = 0
    while suf < n - pre and full[-1 - suf] == without[-1 - suf]:
        suf += 1
    return pre, len(full) - suf


def _assistant_parts(
    template: jinja2.Template, head: list[dict[str, Any]], m: dict[str, Any], tools: list | None,
    full: str, gen_len: int, sw: Switches,
) -> list[tuple[str, bool]]:
    """The generated text of an assistant message split into (text, trained) parts."""
    untrained: list[tuple[int, int]] = []
    if m.get("reasoning") and not sw.train_on_reasoning:
        untrained.append(_diff_span(full, render(template, [*head, {**m, "reasoning": None}], tools)))
    if m.get("tool_calls") and not sw.train_on_tool_calls:
        untrained.append(_diff_span(full, render(template, [*head, {**m, "tool_calls": []}], tools)))
    parts: list[tuple[str, bool]] = []
    pos = gen_len
    for start, end in sorted(untrained):
        start, end = max(start, pos), max(end, pos)
        if start > pos:
            parts.append((full[pos:start], True))
        if end > start:
            parts.append((full[start:end], False))
        pos = max(pos, end)
    parts.append((full[pos:], True))
    return parts


def _leading_system(messages: list[dict[str, Any]]) -> int:
    n_sys = 0
    while n_sys < len(messages) and messages[n_sys]["role"] == "system":
        n_sys += 1
    return n_sys


def exact_parts(
    template: jinja2.Template, messages: list[dict[str, Any]], tools: list | None, sw: Switches,
    trainable_from: int = 0,
) -> tuple[list[tuple[str, bool]], list[int]]:
    """The exact path: every message's text is the difference of two prefix renders."""
    n_sys = _leading_system(messages)
    prev = render(template, messages[:n_sys], tools)
    parts: list[tuple[str, bool]] = [(prev, sw.train_on_system and trainable_from == 0)]
    ends = [1] * n_sys
    for k in range(n_sys, len(messages)):
        m = messages[k]
        full = render(template, messages[: k + 1], tools)
        if not full.startswith(prev):
            raise TemplateUnstable(f"rendering message {k} changed the text before it")
        if m["role"] == "assistant" and k >= trainable_from:
            gen = render(template, messages[:k], tools, add_generation_prompt=True)
            if not (gen.startswith(prev) and full.startswith(gen)):
                raise TemplateUnstable(f"the generation prompt of message {k} is not a prefix of its turn")
            parts.append((gen[len(prev):], False))
            parts.extend(_assistant_parts(template, messages[:k], m, tools, full, len(gen), sw))
        else:
            parts.append((full[len(prev):], False))
        ends.append(len(parts))
        prev = full
    return parts, ends


def fast_parts(
    template: jinja2.Template, messages: list[dict[str, Any]], tools: list | None, sw: Switches,
    trainable_from: int = 0,
) -> tuple[list[tuple[str, bool]], list[int]]:
    """The fast path: each message rendered once after the system head; linear in turns.

    Raises :class:`NotComposable` when the whole render is not the head plus the
    per-message pieces, or when a message cannot be rendered on its own (a
    template that checks role alternation); the caller then takes the exact path.
    """
    n_sys = _leading_system(messages)
    system = messages[:n_sys]
    try:
        head = render(template, system, tools)
        parts: list[tuple[str, bool]] = [(head, sw.train_on_system and trainable_from == 0)]
        ends, pieces, header = [1] * n_sys, [head], None
        for k in range(n_sys, len(messages)):
            m = messages[k]
            alone = render(template, [*system, m], tools)
            if not alone.startswith(head):
                raise NotComposable(f"message {k} rendered alone changes the system head")
            pieces.append(alone[len(head):])
            if m["role"] == "assistant" and k >= trainable_from:
                if header is None:
                    header = render(template, system, tools, add_generation_prompt=True)[len(head):]
                if not alone.startswith(head + header):
                    raise NotComposable(f"the generation prompt of message {k} does not start its turn")
                parts.append((header, False))
                parts.extend(_assistant_parts(template, system, m, tools, alone, len(head) + len(header), sw))
            else:
                parts.append((pieces[-1], False))
            ends.append(len(parts))
        whole = render(template, messages, tools)
    except NotComposable:
        raise
    except TemplateError as err:
        raise NotComposable(f"a message does not render on its own: {err}") from None
    if whole != "".join(pieces):
        raise NotComposable("the conversation is not the concatenation of its messages")
    return parts, ends


def render_parts(
    template: jinja2.Template, messages: list[dict[str, Any]], tools: list | None, sw: Switches,
    trainable_from: int = 0, path: RenderPath = "auto",
) -> tuple[list[tuple[str, bool]], list[int], str]:
    """(text, trained) parts of a conversation, the part index where each message ends, the path used.

    Leading system messages (with the tools block) form the first part; only
    assistant messages at index >= ``trainable_from`` are trained (continuation
    segments pass the length of their repeated prefix). ``path`` forces one
    path (tests; ``fast`` raises :class:`NotComposable` where it does not apply).
    """
    if path != "exact":
        try:
            return (*fast_parts(template, messages, tools, sw, trainable_from), "fast")
        except NotComposable:
            if path == "fast":
                raise
    return (*exact_parts(template, messages, tools, sw, trainable_from), "exact")


def _merge(parts: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    merged: list[tuple[str, bool]] = []
    for text, trained in parts:
        if not text:
            continue
        if merged and merged[-1][1] == trained:
            merged[-1] = (merged[-1][0] + text, trained)
        else:
            merged.append((text, trained))
    return merged


def tokenize_parts(
    parts: list[tuple[str, bool]], ends: list[int], tokenizer: Tokenizer, escapes: Escapes | None = None
) -> Rendered:
    """Tokens and mask of the parts; ``message_ends`` in tokens.

    Parts are merged with their neighbours of the same mask only within a
    message, so per-message token counts stay exact for the splitter.
    """
    merged = [_merge(parts[start:end]) for start, end in zip([0, *ends], ends, strict=False)]
    encoded = iter(encode_many(tokenizer, [text for message in merged for text, _ in message], escapes))
    ids: list[int] = []
    mask: list[int] = []
    message_ends: list[int] = []
    for message in merged:
        for _, trained in message:
            piece = next(encoded)
            ids.extend(piece)
            mask.extend([int(trained)] * len(piece))
        message_ends.append(len(ids))
    return Rendered(np.asarray(ids, np.uint32), np.asarray(mask, np.uint8), message_ends, parts)


def render_example(
    template: jinja2.Template, messages: list[dict[str, Any]], tools_json: str | None, tokenizer: Tokenizer,
    sw: Switches, trainable_from: int = 0, path: RenderPath = "auto", escapes: Escapes | None = None,
) -> Rendered:
    """Tokens and mask of one conversation; ``escapes``: the placeholders its data holds
    (:func:`escape_specials`), tokenized as their special-token strings in plain text."""
    tools = json.loads(tools_json) if tools_json else None
    parts, ends, used = render_parts(template, messages, tools, sw, trainable_from, path)
    rendered = tokenize_parts(parts, ends, tokenizer, escapes)
    rendered.path = used
    return rendered

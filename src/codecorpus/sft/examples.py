"""The sft_render stage: selected traces -> token examples with loss masks (one row per trace).

A trace stays one row, so ``rows_in = rows_out + dropped`` counts traces; its
examples (one, or several continuation segments) are concatenated in
``tokens`` / ``loss_mask`` and cut by ``segment_lengths``. Drop reasons:
``special_token_text`` (the conversation contains a special-token string and the
policy is ``drop``, or an escape could not be undone),
``template_error`` (the template raised), ``template_unstable`` (not
prefix-stable), ``unsplittable`` (no cut at turn boundaries fits ``seq_len``),
``no_loss_tokens`` (nothing left to train on, e.g. every switch off).

Special-token strings in the data (``sft_render.special_tokens``): ``escape``
renders them as plain text (never their special ids: see ``render.py``) and
counts them (``special_tokens_escaped`` occurrences in
``special_token_traces_escaped`` traces); ``drop`` drops the trace. Unset, the
policy follows the data: ``escape`` for edit examples (format ``edit``: code
and diffs from repositories, which may well be a tokenizer's or a chat
template's own code), ``drop`` for conversations and agent traces, where such
a string in a message more often means an already-templated, mis-exported
trace than text the model should learn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.sft.columns import (
    LOSS_MASK,
    LOSS_TOKENS,
    NUM_SEGMENTS,
    SEGMENT_LENGTHS,
    SUMMARY_SOURCE,
    with_column,
)
from codecorpus.sft.config import SftRenderConfig
from codecorpus.sft.render import (
    Escapes,
    Switches,
    TemplateUnstable,
    escape_specials,
    escape_table,
    has_placeholder,
    special_token_in,
)
from codecorpus.sft.segment import Segmented, Unsplittable, segment_trace
from codecorpus.sft.template import TemplateError, choose_template, compile_template
from codecorpus.stage import MapResult
from codecorpus.tokenize.config import TokenizerConfig
from codecorpus.tokenize.tokenizer import Tokenizer, load_tokenizer

STAGE = "sft_render"
KEEP_COLUMNS = (
    schema.ID, schema.SOURCE, schema.REPO, schema.PATH, schema.LANG, schema.BYTES,
    schema.TRACE_FORMAT, schema.TRACE_TASK_ID, schema.TRACE_OUTCOME,
)  # fmt: skip


def switches(cfg: SftRenderConfig) -> Switches:
    return Switches(cfg.train_on_tool_calls, cfg.train_on_reasoning, cfg.train_on_system)


_MESSAGE_TEXTS = ("reasoning", "tool_call_id", "name")
_CALL_TEXTS = ("id", "name", "arguments")


def _data_texts(messages: list[dict[str, Any]], tools: str | None) -> list[str]:
    """Every text of a conversation a template may render (the tools, each message's and call's texts)."""
    texts = [tools or ""]
    for m in messages:
        texts += [m["content"], *(m.get(k) or "" for k in _MESSAGE_TEXTS)]
        for c in m.get("tool_calls") or []:
            texts += [c.get(k) or "" for k in _CALL_TEXTS]
    return texts


def _map_texts(m: dict[str, Any], fn: Callable[[str], str]) -> dict[str, Any]:
    """A message with ``fn`` applied to each of its texts (absent ones stay absent)."""
    new = {**m, "content": fn(m["content"]), **{k: fn(m[k]) for k in _MESSAGE_TEXTS if m.get(k)}}
    new["tool_calls"] = [{**c, **{k: fn(c[k]) for k in _CALL_TEXTS if c.get(k)}} for c in m.get("tool_calls") or []]
    return new


def escape_trace(
    messages: list[dict[str, Any]], tools: str | None, tokenizer: Tokenizer
) -> tuple[list[dict[str, Any]], str | None, Escapes] | None:
    """The conversation with its special-token strings escaped (``render.escape_specials``), or None
    when a text already holds a placeholder character."""
    if any(has_placeholder(t, tokenizer) for t in _data_texts(messages, tools)):
        return None
    count = 0

    def escape(text: str) -> str:
        nonlocal count
        text, n = escape_specials(text, tokenizer)
        count += n
        return text

    escaped = [_map_texts(m, escape) for m in messages]
    return escaped, escape(tools) if tools else tools, Escapes(escape_table(tokenizer), count)


def special_token_policy(cfg: SftRenderConfig, trace_format: str) -> str:
    """``escape`` or ``drop``: the recipe's ``sft_render.special_tokens``, else by the data (module docstring)."""
    return cfg.special_tokens or ("escape" if trace_format == schema.EDIT_TRACE_FORMAT else "drop")


def render_trace(
    messages: list[dict[str, Any]], tools: str | None, cfg: SftRenderConfig, tokenizer: Tokenizer,
    template_text: str, max_tokens: int, trace_format: str = "",
) -> tuple[Segmented | None, str, str | None]:
    """(examples or None, drop reason, detail) of one trace; ``Segmented.escaped`` counts the
    special-token strings rendered as plain text."""
    forged = next((s for t in _data_texts(messages, tools) if (s := special_token_in(t, tokenizer))), None)
    escapes = None
    if forged is not None:
        if special_token_policy(cfg, trace_format) == "drop":
            return None, "special_token_text", f"contains {forged!r}"
        escaped = escape_trace(messages, tools, tokenizer)
        if escaped is None:
            return None, "special_token_text", f"contains {forged!r} and a private-use placeholder character"
        messages, tools, escapes = escaped
    template = compile_template(template_text)
    try:
        seg = segment_trace(template, messages, tools, tokenizer, switches(cfg), max_tokens,
                            cfg.summary_max_chars, cfg.split_long, escapes)
    except TemplateUnstable as err:
        return None, "template_unstable", str(err)
    except TemplateError as err:
        return None, "template_error", str(err)[:300]
    except Unsplittable as err:
        return None, "unsplittable", str(err)
    if not any(int(ex.mask.sum()) for ex in seg.examples):
        return None, "no_loss_tokens", "no trained token after masking"
    seg.escaped = escapes.count if escapes else 0
    return seg, "", None


def run(table: pa.Table, cfg: SftRenderConfig, tokenizer_cfg: TokenizerConfig, max_tokens: int) -> MapResult:
    tokenizer = load_tokenizer(tokenizer_cfg)
    template_text = choose_template(cfg, tokenizer_cfg).text
    messages = table.column(schema.TRACE_MESSAGES).to_pylist()
    tools = table.column(schema.TRACE_TOOLS).to_pylist()
    formats = table.column(schema.TRACE_FORMAT).to_pylist()
    keep: list[int] = []
    kept: list[Segmented] = []
    drops: list[tuple[int, str, str | None]] = []
    for i, (msgs, t, fmt) in enumerate(zip(messages, tools, formats, strict=True)):
        seg, reason, detail = render_trace(msgs, t, cfg, tokenizer, template_text, max_tokens, fmt)
        if seg is None:
            drops.append((i, reason, detail))
        else:
            keep.append(i)
            kept.append(seg)
    out = table.take(pa.array(keep, pa.int64())).select(list(KEEP_COLUMNS))
    out, counters = _add_example_columns(out, kept)
    dropped = schema.drops_from_rows(
        table.take(pa.array([d[0] for d in drops], pa.int64())), STAGE, [d[1] for d in drops], detail=[d[2] for d in drops]
    )
    return MapResult(out, dropped, counters)


def _large_list(chunks: list[np.ndarray], dtype: Any, arrow_type: pa.DataType) -> pa.LargeListArray:
    lengths = np.fromiter(map(len, chunks), np.int64, len(chunks))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = np.concatenate(chunks).astype(dtype) if chunks else np.empty(0, dtype)
    return pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat, arrow_type))


def _add_example_columns(out: pa.Table, kept: list[Segmented]) -> tuple[pa.Table, Counter[str]]:
    tokens = [np.concatenate([ex.tokens for ex in s.examples]) for s in kept]
    masks = [np.concatenate([ex.mask for ex in s.examples]) for s in kept]
    seg_lengths = [[len(ex) for ex in s.examples] for s in kept]
    out = with_column(out, schema.TOKENS, _large_list(tokens, np.uint32, pa.uint32()))
    out = with_column(out, LOSS_MASK, _large_list(masks, np.uint8, pa.uint8()))
    out = with_column(out, SEGMENT_LENGTHS, pa.array(seg_lengths, pa.list_(pa.int32())))
    out = with_column(out, schema.NUM_TOKENS, pa.array([len(t) for t in tokens], pa.int64()))
    out = with_column(out, LOSS_TOKENS, pa.array([int(m.sum()) for m in masks], pa.int64()))
    out = with_column(out, NUM_SEGMENTS, pa.array([len(s) for s in seg_lengths], pa.int32()))
    out = with_column(out, SUMMARY_SOURCE, pa.array([s.summary_source for s in kept], pa.string()))
    counters: Counter[str] = Counter(
        tokens=sum(len(t) for t in tokens),
        loss_tokens=sum(int(m.sum()) for m in masks),
        examples=sum(len(s) for s in seg_lengths),
        split_traces=sum(1 for s in seg_lengths if len(s) > 1),
    )
    counters.update(f"summary_{s.summary_source}" for s in kept if s.summary_source != "none")
    escaped = [s.escaped for s in kept if s.escaped]
    if escaped:
        counters.update(special_tokens_escaped=sum(escaped), special_token_traces_escaped=len(escaped))
    counters.update(f"render_{ex.path}_path" for s in kept for ex in s.examples)  # fast: rendered once per message
    return out, counters

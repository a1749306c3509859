"""The sft_render stage: selected traces -> token examples with loss masks (one row per trace).

A trace stays one row, so ``rows_in = rows_out + dropped`` counts traces; its
examples (one, or several continuation segments) are concatenated in
``tokens`` / ``loss_mask`` and cut by ``segment_lengths``. Drop reasons:
``special_token_text`` (the conversation contains a special-token string),
``template_error`` (the template raised), ``template_unstable`` (not
prefix-stable), ``unsplittable`` (no cut at turn boundaries fits ``seq_len``),
``no_loss_tokens`` (nothing left to train on, e.g. every switch off).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa

from codecorpus import schema
from codecorpus.config import SftRenderConfig, TokenizerConfig
from codecorpus.sft.render import Switches, TemplateUnstable, special_token_in
from codecorpus.sft.segment import Segmented, Unsplittable, segment_trace
from codecorpus.sft.template import TemplateError, choose_template, compile_template
from codecorpus.stage import MapResult, with_column
from codecorpus.tokenize.tokenizer import Tokenizer, load_tokenizer

STAGE = "sft_render"
KEEP_COLUMNS = (
    schema.ID, schema.SOURCE, schema.REPO, schema.PATH, schema.LANG, schema.BYTES,
    schema.TRACE_FORMAT, schema.TRACE_TASK_ID, schema.TRACE_OUTCOME,
)  # fmt: skip


def switches(cfg: SftRenderConfig) -> Switches:
    return Switches(cfg.train_on_tool_calls, cfg.train_on_reasoning, cfg.train_on_system)


def _forged_special(messages: list[dict[str, Any]], tools: str | None, tokenizer: Tokenizer) -> str | None:
    texts = [tools or ""]
    for m in messages:
        texts += [m["content"], m.get("reasoning") or ""]
        texts += [c["arguments"] for c in m.get("tool_calls") or []] + [c["name"] for c in m.get("tool_calls") or []]
    return next((s for t in texts if (s := special_token_in(t, tokenizer))), None)


def render_trace(
    messages: list[dict[str, Any]], tools: str | None, cfg: SftRenderConfig, tokenizer: Tokenizer,
    template_text: str, max_tokens: int,
) -> tuple[Segmented | None, str, str | None]:
    """(examples or None, drop reason, detail) of one trace."""
    forged = _forged_special(messages, tools, tokenizer)
    if forged is not None:
        return None, "special_token_text", f"contains {forged!r}"
    template = compile_template(template_text)
    try:
        seg = segment_trace(template, messages, tools, tokenizer, switches(cfg), max_tokens,
                            cfg.summary_max_chars, cfg.split_long)
    except TemplateUnstable as err:
        return None, "template_unstable", str(err)
    except TemplateError as err:
        return None, "template_error", str(err)[:300]
    except Unsplittable as err:
        return None, "unsplittable", str(err)
    if not any(int(ex.mask.sum()) for ex in seg.examples):
        return None, "no_loss_tokens", "no trained token after masking"
    return seg, "", None


def run(table: pa.Table, cfg: SftRenderConfig, tokenizer_cfg: TokenizerConfig, max_tokens: int) -> MapResult:
    tokenizer = load_tokenizer(tokenizer_cfg)
    template_text = choose_template(cfg, tokenizer_cfg).text
    messages = table.column(schema.TRACE_MESSAGES).to_pylist()
    tools = table.column(schema.TRACE_TOOLS).to_pylist()
    keep: list[int] = []
    kept: list[Segmented] = []
    drops: list[tuple[int, str, str | None]] = []
    for i, (msgs, t) in enumerate(zip(messages, tools, strict=True)):
        seg, reason, detail = render_trace(msgs, t, cfg, tokenizer, template_text, max_tokens)
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
    out = with_column(out, schema.LOSS_MASK, _large_list(masks, np.uint8, pa.uint8()))
    out = with_column(out, schema.SEGMENT_LENGTHS, pa.array(seg_lengths, pa.list_(pa.int32())))
    out = with_column(out, schema.NUM_TOKENS, pa.array([len(t) for t in tokens], pa.int64()))
    out = with_column(out, schema.LOSS_TOKENS, pa.array([int(m.sum()) for m in masks], pa.int64()))
    out = with_column(out, schema.NUM_SEGMENTS, pa.array([len(s) for s in seg_lengths], pa.int32()))
    out = with_column(out, schema.SUMMARY_SOURCE, pa.array([s.summary_source for s in kept], pa.string()))
    counters: Counter[str] = Counter(
        tokens=sum(len(t) for t in tokens),
        loss_tokens=sum(int(m.sum()) for m in masks),
        examples=sum(len(s) for s in seg_lengths),
        split_traces=sum(1 for s in seg_lengths if len(s) > 1),
    )
    counters.update(f"summary_{s.summary_source}" for s in kept if s.summary_source != "none")
    counters.update(f"render_{ex.path}_path" for s in kept for ex in s.examples)  # fast: rendered once per message
    return out, counters

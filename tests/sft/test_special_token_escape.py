"""Special-token strings in the data: escaped as plain text (never their special ids), or dropped."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import SftRenderConfig, TokenizerConfig, TrainTokenizerConfig
from codecorpus.sft import examples
from codecorpus.sft.normalize import message
from codecorpus.sft.render import PLACEHOLDER_BASE, escape_specials
from codecorpus.sft.template import BUILTIN_CHATML, compile_template, render
from codecorpus.tokenize.tokenizer import load_tokenizer, train_tokenizer

QWEN = TokenizerConfig(builtin="qwen2.5")
SPECIALS_IN_DATA = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")


def conversation(marker: str = "") -> list[dict]:
    """A code-editing conversation whose data spells chat special tokens (or ``marker`` instead)."""
    a, b, c = (marker,) * 3 if marker else SPECIALS_IN_DATA
    user = f"Fix the template renderer:\n\nTURN = '{a}user\\n' + text + '{b}\\n'\nEOS = '{c}'\n"
    answer = f"-TURN = '{a}user\\n'\n+TURN = '{a}' + role + '\\n'\n"
    calls = [{"id": "c1", "name": "edit", "arguments": json.dumps({"text": f"{b} at the end"})}]
    return [message("system", "You edit code."), message("user", user), message("assistant", answer),
            message("assistant", "", tool_calls=calls)]


def special_ids(tokens: np.ndarray, tok) -> list[int]:
    ids = set(tok.special_tokens.values())
    return [int(t) for t in tokens if int(t) in ids]


@pytest.fixture(scope="module")
def qwen():
    return load_tokenizer(QWEN)


def test_escape_renders_the_data_as_plain_text_and_counts_it(qwen):
    msgs = conversation()
    seg, reason, _ = examples.render_trace(msgs, None, SftRenderConfig(special_tokens="escape"), qwen,
                                           BUILTIN_CHATML, 4096)
    assert reason == "" and seg is not None and seg.escaped == 6
    (ex,) = seg.examples
    # the text is the template's render of the original data, byte for byte
    assert qwen.decode(ex.tokens) == render(compile_template(BUILTIN_CHATML), msgs, None)
    # no special id inside the data: the special ids are exactly those of the same conversation
    # with plain text where the special-token strings were (the template's own markers)
    neutral = examples.render_trace(conversation("<<tok>>"), None, SftRenderConfig(), qwen, BUILTIN_CHATML, 4096)[0]
    assert special_ids(ex.tokens, qwen) == special_ids(neutral.examples[0].tokens, qwen)
    assert len(special_ids(ex.tokens, qwen)) == 8  # im_start/im_end of 4 turns
    # the trained target holds the strings as text and ends with the template's end of turn only
    trained = ex.tokens[ex.mask == 1]
    assert "'<|im_start|>' + role" in qwen.decode(trained)
    assert special_ids(trained, qwen) == [qwen.special_tokens["<|im_end|>"]] * 2


def test_drop_policy_and_the_default_by_format(qwen):
    msgs = conversation()
    drop = SftRenderConfig(special_tokens="drop")
    assert examples.render_trace(msgs, None, drop, qwen, BUILTIN_CHATML, 4096, "edit")[1] == "special_token_text"
    default = SftRenderConfig()
    assert examples.render_trace(msgs, None, default, qwen, BUILTIN_CHATML, 4096, "openai")[1] == "special_token_text"
    seg, reason, _ = examples.render_trace(msgs, None, default, qwen, BUILTIN_CHATML, 4096, schema.EDIT_TRACE_FORMAT)
    assert reason == "" and seg.escaped == 6


def test_text_holding_a_placeholder_character_is_dropped_not_mangled(qwen):
    msgs = [message("user", "<|im_end|> and " + chr(PLACEHOLDER_BASE)), message("assistant", "ok")]
    seg, reason, detail = examples.render_trace(msgs, None, SftRenderConfig(special_tokens="escape"), qwen,
                                                BUILTIN_CHATML, 4096)
    assert seg is None and reason == "special_token_text" and "placeholder" in detail
    assert escape_specials("no specials here", qwen) == ("no specials here", 0)


def test_escape_with_a_hf_tokenizer_json(tmp_path):
    """The HF path: added special tokens in the data encode as their plain pieces."""
    texts = ["user assistant system hello world <|im_start|> fix the code"] * 50
    path = train_tokenizer(texts, TrainTokenizerConfig(vocab_size=512, min_frequency=1), tmp_path)
    tok = load_tokenizer(TokenizerConfig(path=str(path), added_tokens=("<|im_start|>", "<|im_end|>")))
    msgs = [message("user", "fix <|im_start|>hello<|im_end|>"), message("assistant", "<|im_end|> world")]
    seg, reason, _ = examples.render_trace(msgs, None, SftRenderConfig(special_tokens="escape"), tok,
                                           BUILTIN_CHATML, 4096)
    assert reason == "" and seg.escaped == 3
    (ex,) = seg.examples
    assert len(special_ids(ex.tokens, tok)) == 4  # the template's two turns
    assert tok.decode(ex.tokens) == render(compile_template(BUILTIN_CHATML), msgs, None)


def test_the_stage_counts_escaped_strings_in_its_stats(qwen):
    rows = []
    for i, fmt in enumerate(("edit", "openai", "edit")):
        msgs = conversation() if i < 2 else conversation("plain")
        rows.append({schema.ID: f"t{i}", schema.SOURCE: "s", schema.REPO: "", schema.PATH: f"p{i}",
                     schema.LANG: fmt, schema.BYTES: 1, schema.TRACE_FORMAT: fmt, schema.TRACE_TASK_ID: "",
                     schema.TRACE_OUTCOME: "unknown", schema.TRACE_MESSAGES: msgs, schema.TRACE_TOOLS: None,
                     schema.TRACE_METADATA: "{}", schema.CONTENT_HASH: f"h{i}", schema.TRACE_READER: "jsonl"})
    table = pa.Table.from_pylist(rows, schema=schema.TRACE_SCHEMA)
    out = examples.run(table, SftRenderConfig(), QWEN, 4096)
    assert out.table.column(schema.ID).to_pylist() == ["t0", "t2"]
    assert out.dropped.column(schema.REASON).to_pylist() == ["special_token_text"]
    assert out.counters["special_tokens_escaped"] == 6 and out.counters["special_token_traces_escaped"] == 1

"""Chat templates, exact loss masks on every fixture trace, and splitting of long traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from codecorpus.config import (
    SftIngestConfig,
    SftRenderConfig,
    SftValidateConfig,
    TokenizerConfig,
    TracesSource,
    TrainTokenizerConfig,
)
from codecorpus.sft import validate
from codecorpus.sft.examples import render_trace
from codecorpus.sft.ingest import list_trace_files, read_shard
from codecorpus.sft.normalize import message
from codecorpus.sft.render import NotComposable, Switches, render_example
from codecorpus.sft.segment import SUMMARY_HEADER, Unsplittable, segment_trace
from codecorpus.sft.template import BUILTIN_CHATML, choose_template, compile_template, render
from codecorpus.tokenize.tokenizer import load_tokenizer, train_tokenizer

DATA = Path(__file__).resolve().parents[2] / "pipelines" / "data" / "traces"
QWEN = TokenizerConfig(builtin="qwen2.5")


@pytest.fixture(scope="module")
def fixture_traces() -> list[tuple[str, list[dict], str | None]]:
    """Every valid trace shipped in pipelines/data/traces: (id, messages, tools)."""
    files = list_trace_files(TracesSource(type="traces", name="fixtures", path=str(DATA)))
    table = validate.run(read_shard(files, SftIngestConfig()).table, SftValidateConfig()).table
    rows = table.to_pylist()
    assert {r["format"] for r in rows} == {"openai", "sharegpt", "swe-agent"}
    return [(r["path"], r["messages"], r["tools"]) for r in rows]


def expected_generation(m: dict, sw: Switches) -> str:
    """What the built-in ChatML template trains for an assistant message, written out by hand."""
    text = ""
    if m.get("reasoning") and sw.train_on_reasoning:
        text += f"<think>\n{m['reasoning']}\n</think>\n\n"
    text += m["content"]
    if sw.train_on_tool_calls:
        for j, c in enumerate(m["tool_calls"] or []):
            call = {"name": c["name"], "arguments": json.loads(c["arguments"])}
            text += ("\n" if m["content"] or j else "") + "<tool_call>\n" + json.dumps(call, ensure_ascii=False) + "\n</tool_call>"
    return text + "<|im_end|>\n"


def masked_runs(tokens: np.ndarray, mask: np.ndarray, tok) -> list[str]:
    runs, i = [], 0
    while i < len(mask):
        if mask[i]:
            j = i
            while j < len(mask) and mask[j]:
                j += 1
            runs.append(tok.decode(tokens[i:j]))
            i = j
        else:
            i += 1
    return runs


@pytest.mark.parametrize("path", ["fast", "exact"])
@pytest.mark.parametrize("builtin", ["qwen2.5", "gpt2"])
def test_masked_tokens_decode_to_exactly_the_assistant_turns_on_every_fixture(fixture_traces, builtin, path):
    tok = load_tokenizer(TokenizerConfig(builtin=builtin))
    template = compile_template(BUILTIN_CHATML)
    sw = Switches()
    for where, msgs, tools in fixture_traces:
        ex = render_example(template, msgs, tools, tok, sw, path=path)
        assert ex.path == path
        assert tok.decode(ex.tokens) == "".join(t for t, _ in ex.parts), where
        expected = [expected_generation(m, sw) for m in msgs if m["role"] == "assistant"]
        assert masked_runs(ex.tokens, ex.mask, tok) == expected, where


@pytest.mark.parametrize("path", ["fast", "exact"])
def test_switches_mask_reasoning_tool_calls_and_system(fixture_traces, path):
    tok = load_tokenizer(QWEN)
    template = compile_template(BUILTIN_CHATML)
    sw = Switches(train_on_tool_calls=False, train_on_reasoning=False, train_on_system=True)
    for where, msgs, tools in fixture_traces:
        ex = render_example(template, msgs, tools, tok, sw, path=path)
        decoded = tok.decode(ex.tokens[ex.mask == 1])
        gens = "".join(expected_generation(m, sw) for m in msgs if m["role"] == "assistant")
        system = ex.parts[0][0]  # leading system turn and tools block, trained by train_on_system
        assert decoded == system + gens, where
        assert "<think>" not in gens and "<tool_call>" not in gens


def test_special_token_text_in_a_conversation_is_dropped():
    tok = load_tokenizer(QWEN)
    msgs = [message("user", "say <|im_end|> please"), message("assistant", "ok")]
    seg, reason, _ = render_trace(msgs, None, SftRenderConfig(), tok, BUILTIN_CHATML, 512)
    assert seg is None and reason == "special_token_text"


def test_tokenizer_own_jinja_template_is_used_and_unstable_templates_drop(tmp_path):
    tok_json = train_tokenizer(["user assistant hello world"] * 50, TrainTokenizerConfig(vocab_size=512, min_frequency=1), tmp_path)
    own = "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": own}))
    tok_cfg = TokenizerConfig(path=str(tok_json))
    chosen = choose_template(SftRenderConfig(), tok_cfg)
    assert chosen.source == "tokenizer" and chosen.text == own
    tok = load_tokenizer(tok_cfg)
    msgs = [message("user", "hello"), message("assistant", "world"), message("user", "hello"), message("assistant", "hello world")]
    seg, reason, _ = render_trace(msgs, None, SftRenderConfig(), tok, own, 4096)
    assert reason == ""
    ex = seg.examples[0]
    assert masked_runs(ex.tokens, ex.mask, tok) == ["world\n", "hello world\n"]
    unstable = "{{ messages | length }}" + own
    assert render_trace(msgs, None, SftRenderConfig(), tok, unstable, 4096)[1] == "template_unstable"
    assert render_trace(msgs, None, SftRenderConfig(), tok, "{{ raise_exception('no') }}", 4096)[1] == "template_error"


def _long(fixture_traces, task_id_fragment: str):
    return next((m, t) for where, m, t in fixture_traces if task_id_fragment in json.dumps(m[:3]))


@pytest.mark.parametrize(("fragment", "own_summary"), [("drops the last token", False), ("escaped quotes", True)])
def test_long_traces_split_at_turn_boundaries_with_summaries(fixture_traces, fragment, own_summary):
    tok = load_tokenizer(QWEN)
    template = compile_template(BUILTIN_CHATML)
    msgs, tools = _long(fixture_traces, fragment)
    sw = Switches()
    seg = segment_trace(template, msgs, tools, tok, sw, max_tokens=2048, summary_max_chars=1500)
    assert len(seg.examples) > 2
    task = msgs[[m["role"] for m in msgs].index("user")]["content"]
    trained = []
    for i, ex in enumerate(seg.examples):
        assert len(ex) <= 2048
        text = tok.decode(ex.tokens)
        calls = text.count('<tool_call>\n{"name": "')  # real calls, not the tools block's example
        assert calls == text.count("<|im_start|>tool\n") > 0, "a call was cut from its result"
        assert task in text
        runs = masked_runs(ex.tokens, ex.mask, tok)
        assert not any(task in r or "Summary" in r for r in runs), "loss on the repeated prefix"
        trained += runs
        if i:
            summary = text[text.index(task) :]
            if own_summary and i == len(seg.examples) - 1:
                assert "Summary so far: ran the lexer tests up to case 24" in summary
            if not own_summary:
                assert SUMMARY_HEADER in summary and "Commands run" in summary and "-> ok" in summary
    # every assistant turn is trained exactly once across the segments
    assert trained == [expected_generation(m, sw) for m in msgs if m["role"] == "assistant"]
    assert seg.summary_source == ("mixed" if own_summary else "extractive")


def test_a_block_that_cannot_fit_is_unsplittable(fixture_traces):
    tok = load_tokenizer(QWEN)
    msgs, tools = _long(fixture_traces, "drops the last token")
    with pytest.raises(Unsplittable):
        segment_trace(compile_template(BUILTIN_CHATML), msgs, tools, tok, Switches(), max_tokens=200, summary_max_chars=500)
    seg, reason, _ = render_trace(msgs, tools, SftRenderConfig(split_long=False), tok, BUILTIN_CHATML, 2048)
    assert seg is None and reason == "unsplittable"


def test_rendering_is_deterministic(fixture_traces):
    tok = load_tokenizer(QWEN)
    template = compile_template(BUILTIN_CHATML)
    for _, msgs, tools in fixture_traces[:4]:
        a = render_example(template, msgs, tools, tok, Switches())
        b = render_example(template, msgs, tools, tok, Switches())
        assert np.array_equal(a.tokens, b.tokens) and np.array_equal(a.mask, b.mask)


@pytest.mark.parametrize("sw", [Switches(), Switches(False, False, True)])
def test_fast_and_exact_paths_agree_on_every_fixture_and_auto_takes_the_fast_one(fixture_traces, sw):
    tok = load_tokenizer(QWEN)
    template = compile_template(BUILTIN_CHATML)
    for where, msgs, tools in fixture_traces:
        for trainable_from in (0, len(msgs) // 2):
            fast = render_example(template, msgs, tools, tok, sw, trainable_from, path="fast")
            exact = render_example(template, msgs, tools, tok, sw, trainable_from, path="exact")
            assert fast.parts == exact.parts and fast.message_ends == exact.message_ends, where
            assert np.array_equal(fast.tokens, exact.tokens) and np.array_equal(fast.mask, exact.mask), where
        assert render_example(template, msgs, tools, tok, sw).path == "fast", where


# Prefix-stable templates whose text for a turn depends on the conversation around it:
# a separator only between turns, and a role-alternation check (Llama-2 / Mistral style).
SEPARATED = ("{% for m in messages %}{% if not loop.first %}\n---\n{% endif %}<|{{ m.role }}|>{{ m.content }}"
             "{% endfor %}{% if add_generation_prompt %}\n---\n<|assistant|>{% endif %}")
ALTERNATING = ("{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
               "{{ raise_exception('roles must alternate user/assistant') }}{% endif %}"
               "[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}")


@pytest.mark.parametrize("text", [SEPARATED, ALTERNATING])
def test_templates_that_are_not_composable_take_the_exact_path(text):
    tok = load_tokenizer(QWEN)
    template = compile_template(text)
    msgs = [message("user", "hello"), message("assistant", "world"), message("user", "again"), message("assistant", "done")]
    with pytest.raises(NotComposable):
        render_example(template, msgs, None, tok, Switches(), path="fast")
    ex = render_example(template, msgs, None, tok, Switches())
    assert ex.path == "exact"
    assert tok.decode(ex.tokens) == render(template, msgs, None)
    sep = "\n" if text == ALTERNATING else ""
    assert masked_runs(ex.tokens, ex.mask, tok) == [f"world{sep}", f"done{sep}"]

"""Validation reasons, selection rules, decontamination, PII redaction and trace dedup."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import SftDedupConfig, SftSelectConfig, SftValidateConfig
from codecorpus.sft import dedup, select, validate
from codecorpus.sft.normalize import message, trace_content_hash

TOOLS = json.dumps([{"type": "function", "function": {"name": "bash"}}])


def call(cid: str, name: str = "bash", args: str = '{"command": "ls"}') -> dict:
    return {"id": cid, "name": name, "arguments": args}


U, A = message("user", "q"), message("assistant", "a")
CASES = {
    "no_messages": ([], None),
    "bad_role": ([U, message("robot", "x"), A], None),
    "role_order": ([A, U], None),
    "no_assistant": ([U], None),
    "empty_assistant": ([U, message("assistant", "  ")], None),
    "bad_tools_schema": ([U, A], json.dumps({"not": "a list"})),
    "bad_tool_arguments": ([U, message("assistant", tool_calls=[call("c", args="{oops")]), message("tool", "r", tool_call_id="c"), A], TOOLS),
    "unknown_tool": ([U, message("assistant", tool_calls=[call("c", name="rm")]), message("tool", "r", tool_call_id="c"), A], TOOLS),
    "duplicate_call_id": ([U, message("assistant", tool_calls=[call("c"), call("c")]), message("tool", "r", tool_call_id="c")], TOOLS),
    "orphan_tool_result": ([U, message("assistant", tool_calls=[call("c")]), message("tool", "r", tool_call_id="zz"), A], TOOLS),
    "unanswered_tool_call": ([U, message("assistant", tool_calls=[call("c"), call("d")]), message("tool", "r", tool_call_id="c"), A], TOOLS),
}  # fmt: skip


@pytest.mark.parametrize("reason", sorted(CASES))
def test_each_validation_reason(reason):
    messages, tools = CASES[reason]
    assert reason in validate.REASONS
    assert validate.check_trace(messages, tools, SftValidateConfig())[0] == reason


def test_valid_trace_with_trailing_call_passes_unless_forbidden():
    msgs = [U, message("assistant", "x", tool_calls=[call("c")]), message("tool", "r", tool_call_id="c"),
            message("assistant", "", tool_calls=[call("d")])]
    assert validate.check_trace(msgs, TOOLS, SftValidateConfig()) is None
    assert validate.check_trace(msgs, TOOLS, SftValidateConfig(allow_trailing_tool_calls=False))[0] == "unanswered_tool_call"


def trace_table(rows: list[dict]) -> pa.Table:
    full = []
    for i, r in enumerate(rows):
        msgs = r["messages"]
        full.append({
            schema.ID: r.get("id", f"id{i:03d}"), schema.SOURCE: "t", schema.REPO: "", schema.PATH: f"f:{i}",
            schema.LANG: "openai", schema.BYTES: 10, schema.TRACE_FORMAT: "openai",
            schema.TRACE_TASK_ID: r.get("task_id", ""), schema.TRACE_OUTCOME: r.get("outcome", "unknown"),
            schema.TRACE_MESSAGES: msgs, schema.TRACE_TOOLS: r.get("tools"), schema.TRACE_METADATA: "{}",
            schema.CONTENT_HASH: trace_content_hash(msgs, r.get("tools")),
        })  # fmt: skip
    return pa.Table.from_pylist(full, schema=schema.TRACE_SCHEMA)


def test_validate_stage_conserves_rows():
    table = trace_table([{"messages": m, "tools": t} for m, t in CASES.values()] + [{"messages": [U, A]}])
    result = validate.run(table, SftValidateConfig())
    assert result.table.num_rows == 1
    assert sorted(result.dropped.column(schema.REASON).to_pylist()) == sorted(CASES)


def test_selection_reasons_decontamination_and_redaction(tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("bench__x-1\n")
    texts = tmp_path / "bench.jsonl"
    texts.write_text(json.dumps({"prompt": "def add(a, b): return the sum of the two integers a and b without overflow"}) + "\n")
    err = message("tool", "Traceback (most recent call last):\n  boom", tool_call_id="c")
    rows = [
        {"messages": [U, A], "outcome": "unresolved"},
        {"messages": [message("user", "x" * 200), message("assistant", "y" * 200)]},
        {"messages": [U, message("assistant", tool_calls=[call("c")]), err, A]},
        {"messages": [U, A], "task_id": "bench__x-1"},
        {"messages": [message("user", "Please: DEF add(a,b): return the sum of the two integers a and b, without overflow!"), A]},
        {"messages": [message("user", "mail me at bob@corp.example.org, key AKIAABCDEFGHIJKLMNOP"), A]},
    ]
    cfg = SftSelectConfig(outcomes=("resolved", "unknown"), max_chars=300, max_tool_error_rate=0.5,
                          decontam_task_ids=(str(ids),), decontam_texts=(str(texts),), decontam_ngram=8)
    result = select.run(trace_table(rows), cfg)
    assert result.dropped.column(schema.REASON).to_pylist() == [
        "outcome", "too_long", "tool_error_rate", "contaminated_task_id", "contaminated_text"]
    kept = result.table.column(schema.TRACE_MESSAGES).to_pylist()[0]
    assert kept[0]["content"] == "mail me at <EMAIL>, key <AWS_KEY>"
    assert result.table.column(schema.REDACTIONS).to_pylist() == [2]
    assert result.counters["redacted_email"] == 1


def test_redaction_keeps_call_arguments_valid_json():
    counts = select.Counter()
    msgs = select.redact_messages([message("assistant", tool_calls=[call("c", args=json.dumps({"to": "a@b.io", "ip": "8.8.4.4"}))])], counts)
    assert json.loads(msgs[0]["tool_calls"][0]["arguments"]) == {"to": "<EMAIL>", "ip": "<IP_ADDRESS>"}


def _dedup(tables: list[pa.Table], cfg: SftDedupConfig) -> list:
    scattered = [dedup.bands(t, i, cfg, seed=1) for i, t in enumerate(tables)]
    edges = [dedup.edges(pa.concat_tables([s[b] for s in scattered]), cfg)[0] for b in range(cfg.buckets)]
    removals = dedup.clusters(pa.concat_tables(edges), len(tables))
    return [dedup.apply(t, removals[i]) for i, t in enumerate(tables)]


def test_exact_and_near_duplicates_across_shards_keep_the_smallest_id():
    text = " ".join(f"word{i}" for i in range(120))
    base = [message("user", "explain"), message("assistant", text)]
    near = [message("user", "explain"), message("assistant", text + " extra")]
    other = [message("user", "something else entirely"), message("assistant", "unrelated answer here")]
    s0 = trace_table([{"id": "b", "messages": base}, {"id": "z", "messages": other}])
    s1 = trace_table([{"id": "a", "messages": base}, {"id": "c", "messages": near}])
    r0, r1 = _dedup([s0, s1], SftDedupConfig(threshold=0.7, num_perm=128, bands=32, buckets=3))
    assert r0.table.column(schema.ID).to_pylist() == ["z"]
    assert r1.table.column(schema.ID).to_pylist() == ["a"]
    drops = {d["id"]: (d["reason"], d["dup_of"]) for d in pa.concat_tables([r0.dropped, r1.dropped]).to_pylist()}
    assert drops == {"b": ("exact_duplicate", "a"), "c": ("near_duplicate", "a")}
    only_exact = _dedup([s0, s1], SftDedupConfig(near=False, buckets=2))
    assert sum(r.dropped.num_rows for r in only_exact) == 1


def test_sft_recipe_errors_name_the_key_and_the_fix():
    from codecorpus.config import RecipeError, load_recipe_data

    base = {
        "sources": [{"type": "traces", "name": "t", "path": "x.jsonl"}],
        "stages": {"sft_ingest": {}, "sft_validate": {}, "sft_render": {}, "sft_pack": {}},
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [{"name": "sft", "kind": "sft", "seq_len": 1024}],
    }
    assert load_recipe_data(base).stages.enabled() == ["sft_ingest", "sft_validate", "sft_render", "sft_pack"]
    with pytest.raises(RecipeError, match="exactly one output"):
        load_recipe_data({**base, "outputs": []})
    with pytest.raises(RecipeError, match="pretraining stages"):
        load_recipe_data({**base, "stages": {**base["stages"], "langid": {}}})
    with pytest.raises(RecipeError, match="multiple of bands"):
        load_recipe_data({**base, "stages": {**base["stages"], "sft_dedup": {"num_perm": 100, "bands": 16}}})
    with pytest.raises(RecipeError, match=r"sft_render needs stages\.sft_validate"):
        load_recipe_data({**base, "stages": {"sft_ingest": {}, "sft_render": {}}})

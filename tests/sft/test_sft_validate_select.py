"""Validation reasons, selection rules, decontamination, PII redaction and trace dedup."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import (
    BenchmarkFile,
    DecontamConfig,
    RedactConfig,
    SftDedupConfig,
    SftSelectConfig,
    SftValidateConfig,
)
from codecorpus.sft import dedup, select, validate
from codecorpus.sft.columns import REDACTIONS
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
    bench = tmp_path / "bench.jsonl"
    problem = "def add(a, b): return the sum of the two integers a and b without overflow or rounding"
    bench.write_text(json.dumps({"id": "p7", "question": problem}) + "\n")
    err = message("tool", "Traceback (most recent call last):\n  boom", tool_call_id="c")
    rows = [
        {"messages": [U, A], "outcome": "unresolved"},
        {"messages": [message("user", "x" * 200), message("assistant", "y" * 200)]},
        {"messages": [U, message("assistant", tool_calls=[call("c")]), err, A]},
        {"messages": [U, A], "task_id": "bench__x-1"},
        {"messages": [message("user", "Please:\n  def add(a,b):  return the sum of the two integers a and b without overflow or rounding!"), A]},
        {"messages": [message("user", "mail me at bob@corp.io, key AKIAABCDEFGHIJKLMNOP"), A]},
    ]
    decon = DecontamConfig(humaneval=False, files=(BenchmarkFile(name="mine", path=str(bench), text_fields=("question",), id_field="id"),), ngram=8)
    cfg = SftSelectConfig(outcomes=("resolved", "unknown"), max_chars=300, max_tool_error_rate=0.5,
                          decontam_task_ids=(str(ids),), decontam=decon)
    result = select.run(trace_table(rows), cfg)
    drops = result.dropped.to_pylist()
    assert [d[schema.REASON] for d in drops] == [
        "outcome", "too_long", "tool_error_rate", "contaminated_task_id", "contaminated_text"]
    assert drops[-1]["detail"] == "mine:p7:question" and drops[-1]["score"] == 1.0
    kept = result.table.column(schema.TRACE_MESSAGES).to_pylist()[0]
    assert kept[0]["content"] == "mail me at <EMAIL>, key <KEY>"
    assert result.table.column(REDACTIONS).to_pylist() == [2]
    assert result.counters == {"redact.email": 1, "redact.aws_access_key": 1, "redact.traces": 1, "decontam.mine": 1}
    assert result.table.num_rows + result.dropped.num_rows == len(rows)


def test_humaneval_from_the_package_is_matched_in_a_conversation():
    from codecorpus.filters.decontam import humaneval_entries

    prompt = next(e.text for e in humaneval_entries() if e.label == "HumanEval/0:prompt".join(["humaneval:", ""]))
    rows = [{"messages": [message("user", f"Solve this:\n{prompt}"), message("assistant", "sure")]},
            {"messages": [message("user", "write a function that checks close numbers"), A]}]
    result = select.run(trace_table(rows), SftSelectConfig())
    assert result.dropped.column("detail").to_pylist() == ["humaneval:HumanEval/0:prompt"]
    assert result.counters["decontam.humaneval"] == 1
    assert select.run(trace_table(rows), SftSelectConfig(decontam=None)).dropped.num_rows == 0


SECRETS = {
    "user": "my box is 8.8.8.8, token ghp_" + "a1B2c3D4" * 4 + "e5F6",
    "reasoning": "the key is -----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 80 + "\n-----END RSA PRIVATE KEY-----",
    "tool": "config: password = 'Hunter2isBack!' and sk_live_" + "x9Y8z7W6" * 3,
}


def test_every_message_reasoning_and_call_argument_is_redacted_and_arguments_stay_json():
    args = json.dumps({"command": "curl -u admin 8.8.4.4", "env": {"password": "Sup3rS3cretPw"}, "to": ["bob@corp.io"], "n": 3})
    msgs = [
        message("user", SECRETS["user"]),
        message("assistant", "on it", reasoning=SECRETS["reasoning"], tool_calls=[call("c", args=args)]),
        message("tool", SECRETS["tool"], tool_call_id="c"),
        A,
    ]
    result = select.run(trace_table([{"messages": msgs, "tools": TOOLS}]), SftSelectConfig())
    out = result.table.column(schema.TRACE_MESSAGES).to_pylist()[0]
    assert out[0]["content"] == "my box is <IP_ADDRESS>, token <KEY>"
    assert out[1]["reasoning"] == "the key is <KEY>"
    assert out[2]["content"] == "config: password = '<PASSWORD>' and <KEY>"
    arguments = out[1]["tool_calls"][0]["arguments"]
    assert json.loads(arguments) == {"command": "curl -u admin <IP_ADDRESS>", "env": {"password": "<PASSWORD>"},
                                     "to": ["<EMAIL>"], "n": 3}
    assert arguments == args.replace("8.8.4.4", "<IP_ADDRESS>").replace("Sup3rS3cretPw", "<PASSWORD>").replace("bob@corp.io", "<EMAIL>")
    assert result.counters == {"redact.ipv4": 2, "redact.github_token": 1, "redact.private_key": 1, "redact.password": 2,
                               "redact.stripe_key": 1, "redact.email": 1, "redact.traces": 1}
    assert result.table.column(REDACTIONS).to_pylist() == [8]
    untouched = select.run(trace_table([{"messages": msgs, "tools": TOOLS}]), SftSelectConfig(redact=None))
    assert untouched.table.column(schema.TRACE_MESSAGES).to_pylist()[0] == msgs and not untouched.counters


def test_argument_redaction_falls_back_to_values_when_a_placeholder_breaks_json():
    cfg = RedactConfig(placeholders={"email": '"mail"'}, ip_replacement="pseudonym")
    args = json.dumps({"to": "a@corp.io", "ip": "8.8.4.4", "again": "8.8.4.4"})
    counts = select.Counter()
    out = select.redact_arguments(args, cfg, "trace-1", counts)
    parsed = json.loads(out)
    assert parsed["to"] == '"mail"' and parsed["ip"] == parsed["again"] != "8.8.4.4"
    assert parsed["ip"] == json.loads(select.redact_arguments(args, cfg, "trace-1", select.Counter()))["ip"]
    assert counts == {"email": 1, "ipv4": 2}


def test_replaced_select_keys_name_their_replacement_and_benchmark_paths_resolve(tmp_path):
    from codecorpus.config import RecipeError, load_recipe

    for key, fix in (("decontam_texts", "decontam.files"), ("redact_pii", "redact"), ("decontam_ngram", "decontam.ngram")):
        with pytest.raises(ValueError, match=fix.replace(".", r"\.")):
            SftSelectConfig(**{key: True})
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "x"}) + "\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(json.dumps({
        "sources": [{"type": "traces", "name": "t", "path": "x.jsonl"}],
        "stages": {"sft_ingest": {}, "sft_validate": {}, "sft_select": {"decontam": {"files": [{"name": "b", "path": "b.jsonl"}]}},
                   "sft_render": {}, "sft_pack": {}},
        "tokenizer": {"builtin": "gpt2"}, "outputs": [{"name": "sft", "kind": "sft", "seq_len": 1024}],
    }))
    assert load_recipe(recipe).stages.sft_select.decontam.files[0].path == str(tmp_path / "b.jsonl")
    with pytest.raises(RecipeError, match="redact_pii"):
        recipe.write_text(recipe.read_text().replace('"sft_select": {', '"sft_select": {"redact_pii": true, '))
        load_recipe(recipe)


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

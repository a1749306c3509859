"""Ingest and normalization: the three input styles, compression, and every bad-record reason."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from codecorpus import schema
from codecorpus.config import SftIngestConfig, TracesSource
from codecorpus.sft.ingest import list_trace_files, plan_shards, read_shard
from codecorpus.sft.normalize import detect_format, normalize

DATA = Path(__file__).resolve().parents[2] / "pipelines" / "data" / "traces"


def test_openai_style_keeps_calls_reasoning_tools_and_content_parts():
    rec = {
        "task_id": "t1", "resolved": True, "tools": [{"type": "function", "function": {"name": "bash"}}],
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}]},
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "reasoning_content": "think",
             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}]},
            {"role": "tool", "tool_call_id": "c", "content": "a.py"},
        ],
    }  # fmt: skip
    out = normalize(rec, detect_format(rec))
    msgs = out[schema.TRACE_MESSAGES]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[0]["content"] == "be brief"
    assert msgs[2]["reasoning"] == "think"
    assert msgs[2]["tool_calls"] == [{"id": "c", "name": "bash", "arguments": '{"command": "ls"}'}]
    assert msgs[3]["tool_call_id"] == "c"
    assert (out[schema.TRACE_TASK_ID], out[schema.TRACE_OUTCOME], out[schema.TRACE_FORMAT]) == ("t1", "resolved", "openai")
    assert json.loads(out[schema.TRACE_TOOLS])[0]["function"]["name"] == "bash"


def test_sharegpt_style_maps_roles_and_function_calls():
    rec = {"system": "sys", "conversations": [
        {"from": "human", "value": "q"},
        {"from": "function_call", "value": json.dumps({"name": "f", "arguments": {"x": 1}})},
        {"from": "observation", "value": "42"},
        {"from": "gpt", "value": "a"},
    ]}  # fmt: skip
    msgs = normalize(rec, detect_format(rec))[schema.TRACE_MESSAGES]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    call = msgs[2]["tool_calls"][0]
    assert (call["name"], json.loads(call["arguments"])) == ("f", {"x": 1})
    assert msgs[3]["tool_call_id"] == call["id"]


def test_swe_agent_style_becomes_bash_calls_with_task_patch_and_outcome():
    rec = {"instance_id": "r__r-1", "repo": "o/r", "resolved": False, "problem_statement": "fix it",
           "trajectory": [{"thought": "look", "action": "ls", "observation": "a.py"},
                          {"role": "summary", "text": "so far: listed"},
                          {"thought": "done", "action": "submit", "observation": ""}],
           "info": {"submission": "diff"}}  # fmt: skip
    out = normalize(rec, detect_format(rec))
    msgs = out[schema.TRACE_MESSAGES]
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "user", "assistant", "tool"]
    assert msgs[0]["content"] == "fix it"
    assert json.loads(msgs[1]["tool_calls"][0]["arguments"]) == {"command": "ls"}
    assert msgs[3]["is_summary"] is True
    assert (out[schema.TRACE_TASK_ID], out[schema.TRACE_OUTCOME], out[schema.REPO]) == ("r__r-1", "unresolved", "o/r")
    assert json.loads(out[schema.TRACE_METADATA])["patch"] == "diff"


def _files(path: Path):
    return list_trace_files(TracesSource(type="traces", name="t", path=str(path)))


def test_every_bad_record_is_a_counted_drop_with_its_reason():
    result = read_shard(_files(DATA / "invalid.jsonl"), SftIngestConfig())
    reasons = sorted(result.dropped.column(schema.REASON).to_pylist())
    assert reasons == ["bad_json", "invalid_utf8", "invalid_utf8", "malformed", "not_an_object", "too_deep", "unknown_format"]
    assert result.table.num_rows == 0
    assert result.counters["records"] == 7 and result.counters["blank_lines"] == 1


def test_compressed_files_and_truncated_streams(tmp_path):
    good = json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(((good + "\n") * 3).encode()))
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress((good + "\n").encode() * 50)[:-30])  # cut stream
    files = _files(tmp_path)
    assert [f.rel for f in files] == ["a.jsonl.gz", "b.jsonl.gz"]
    result = read_shard(files, SftIngestConfig())
    assert result.table.num_rows >= 3
    assert result.dropped.column(schema.REASON).to_pylist() == ["unreadable"]
    assert result.counters["records"] == result.table.num_rows + result.dropped.num_rows


def test_plan_groups_files_deterministically_and_ids_are_stable():
    cfg = SftIngestConfig(shard_bytes=1)
    shards = plan_shards([TracesSource(type="traces", name="t", path=str(DATA))], cfg)
    assert [f.rel for s in shards for f in s] == sorted(f.rel for s in shards for f in s)
    assert len(shards) == 6  # one file each: 4 JSONL files and 2 SWE-agent .traj files
    a = read_shard(shards[1], cfg).table.column(schema.ID).to_pylist()
    b = read_shard(shards[1], cfg).table.column(schema.ID).to_pylist()
    assert a == b and len(set(a)) == len(a)


def test_missing_source_path_is_a_recipe_error(tmp_path):
    from codecorpus.config import RecipeError

    with pytest.raises(RecipeError, match="nothing at"):
        _files(tmp_path / "nope")

"""SWE-agent's own .traj files and whole-file JSON traces: detection, normalization, ingest, and
a folder of .traj files run end to end into an SFT set on a local Ray.

The .traj files are built here the way SWE-agent writes them (``DefaultAgent.get_trajectory_data``
and ``save_trajectory`` in sweagent/agent/agents.py, the ``HistoryItem`` / ``AgentInfo`` types in
sweagent/types.py): ``json.dumps({trajectory, history, info, replay_config, environment}, indent=2)``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from codecorpus import schema
from codecorpus.config import SftIngestConfig, SftValidateConfig, TracesSource
from codecorpus.sft import validate
from codecorpus.sft.ingest import choose_reader, list_trace_files, read_shard
from codecorpus.sft.normalize import detect_format, normalize

PATCH = "diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
SYSTEM = "You are a helpful assistant that can interact with a computer to solve tasks."
INSTANCE = ("<uploaded_files>\n/testbed\n</uploaded_files>\nI've uploaded a python code repository in the directory "
            "/testbed. Consider the following PR description:\n\n<pr_description>\n{problem}\n</pr_description>\n\n"
            "Can you help me implement the necessary changes to the repository so that the requirements specified "
            "in the <pr_description> are met?")  # fmt: skip


def _replay_config(instance_id: str, problem: str, github_url: str | None = None) -> str:
    repo = {"type": "github", "github_url": github_url} if github_url else {"type": "preexisting", "repo_name": "testbed"}
    return json.dumps({
        "env": {"deployment": {"type": "docker", "image": f"swebench/sweb.eval.x86_64.{instance_id}:latest"}, "repo": repo},
        "agent": {"tools": {"parse_function": {"type": "function_calling"}}, "model": {"name": "gpt-4o"}},
        "problem_statement": {"type": "text", "text": problem, "id": instance_id, "extra_fields": {}},
        "output_dir": "trajectories/me/run",
    })  # fmt: skip


def _info(exit_status: str | None, submission: str | None, calls: int) -> dict:
    return {
        "swe_agent_hash": "8b3dbf4", "swe_agent_version": "1.1.0", "swe_rex_version": "1.2.1", "swe_rex_hash": "unavailable",
        "submission": submission, "exit_status": exit_status,
        "edited_files30": "[File: calc/ops.py]\n 1: def add(a, b):\n 2:     return a + b" if submission else "",
        "model_stats": {"instance_cost": 0.0123 * calls, "tokens_sent": 4100 * calls, "tokens_received": 210 * calls,
                        "api_calls": calls},
    }  # fmt: skip


def function_calling_traj(instance_id: str, problem: str, steps: list[tuple[str, str, dict, str]],
                          exit_status: str | None = "submitted", submission: str | None = PATCH,
                          github_url: str | None = None) -> dict:
    """A SWE-agent 1.x run with the function-calling parser: (thought, tool, arguments, observation) steps."""
    history = [
        {"role": "system", "content": SYSTEM, "agent": "main", "message_type": "system_prompt"},
        {"role": "user", "content": [{"type": "text", "text": INSTANCE.format(problem=problem)}], "agent": "main",
         "message_type": "observation"},
    ]  # fmt: skip
    trajectory = []
    for i, (thought, tool, args, observation) in enumerate(steps):
        call_id = f"call_{instance_id.rsplit('-', 1)[-1]}{i:02d}"
        action = args["command"] if tool == "bash" else " ".join([tool, *(str(v) for v in args.values())])
        history.append({
            "role": "assistant", "content": thought, "thought": thought, "action": action, "agent": "main",
            "tool_calls": [{"index": 0, "function": {"arguments": json.dumps(args), "name": tool}, "id": call_id,
                            "type": "function"}],
            "message_type": "action", "thinking_blocks": [],
        })  # fmt: skip
        history.append({"role": "tool", "content": [{"type": "text", "text": f"OBSERVATION:\n{observation}"}],
                        "agent": "main", "message_type": "observation", "tool_call_ids": [call_id]})  # fmt: skip
        trajectory.append({"action": action, "observation": observation, "response": thought, "thought": thought,
                           "execution_time": 0.21, "state": {"working_dir": "/testbed"},
                           "query": history[:-2], "extra_info": {}})  # fmt: skip
    return {
        "trajectory": trajectory, "history": history, "info": _info(exit_status, submission, len(steps)),
        "replay_config": _replay_config(instance_id, problem, github_url), "environment": "main",
    }


def cost_exit(traj: dict) -> dict:
    """The same run stopped by the cost limit: SWE-agent's exit note and observation, no patch."""
    note = "Exit due to cost limit"
    traj["history"] += [
        {"role": "assistant", "content": note, "thought": note, "action": "", "agent": "main", "tool_calls": None,
         "message_type": "action", "thinking_blocks": None},
        {"role": "user", "content": "Your command ran successfully and did not produce any output.", "agent": "main",
         "message_type": "observation"},
    ]  # fmt: skip
    traj["trajectory"].append({"action": "", "observation": "", "response": note, "thought": note,
                               "execution_time": 0.0, "state": {}, "query": [], "extra_info": {}})  # fmt: skip
    traj["info"].update(exit_status="exit_cost", submission=None, edited_files30="")
    return traj


def thought_action_traj(instance_id: str, problem: str, steps: list[tuple[str, str, str]],
                        exit_status: str = "submitted", submission: str | None = PATCH) -> dict:
    """A text-parsed (0.x-style thought/action) run with a demonstration: (thought, command, observation) steps."""
    history = [
        {"role": "system", "content": "SETTING: You are an autonomous programmer working in a command line.",
         "agent": "primary"},
        {"role": "user", "content": "Here is a demonstration of how to correctly accomplish this task. ...",
         "agent": "primary", "is_demo": True},
        {"role": "user", "content": f"We're currently solving the following issue within our repository.\n"
                                    f"ISSUE:\n{problem}\n\n(Open file: n/a)\n(Current directory: /testbed)\nbash-$",
         "agent": "primary"},
    ]  # fmt: skip
    trajectory = []
    for thought, command, observation in steps:
        response = f"{thought}\n```\n{command}\n```"
        history.append({"role": "assistant", "content": response, "thought": thought, "action": command + "\n",
                        "agent": "primary"})
        history.append({"role": "user", "content": f"{observation}\n(Open file: n/a)\n(Current directory: /testbed)\nbash-$",
                        "agent": "primary"})
        trajectory.append({"action": command + "\n", "observation": observation, "response": response,
                           "thought": thought, "state": '{"open_file": "n/a", "working_dir": "/testbed"}'})  # fmt: skip
    info = {k: v for k, v in _info(exit_status, submission, len(steps)).items() if not k.startswith("swe_")}
    return {"environment": "swe_main", "trajectory": trajectory, "history": history, "info": info}


FC_STEPS = [
    ("Let me look at the implementation of add first.", "str_replace_editor",
     {"command": "view", "path": "/testbed/calc/ops.py"}, "Here's the result of running `cat -n` on /testbed/calc/ops.py:\n     1\tdef add(a, b):\n     2\t    return a - b"),
    ("add subtracts; replace the operator.", "str_replace_editor",
     {"command": "str_replace", "path": "/testbed/calc/ops.py", "old_str": "return a - b", "new_str": "return a + b"},
     "The file /testbed/calc/ops.py has been edited."),
    ("Check the fix with the tests.", "bash", {"command": "cd /testbed && python -m pytest -q tests/test_ops.py"},
     "3 passed in 0.02s"),
    ("The tests pass; submitting.", "submit", {}, PATCH),
]  # fmt: skip


def _write(path: Path, data: dict | list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


def _read(path: Path, **cfg):
    files = list_trace_files(TracesSource(type="traces", name="t", path=str(path)))
    return read_shard(files, SftIngestConfig(**cfg))


# --- normalization -----------------------------------------------------------------------------


def test_function_calling_history_maps_to_canonical_calls_results_and_tools():
    traj = function_calling_traj("acme__calcpy-17", "add() subtracts its arguments", FC_STEPS,
                                 github_url="https://github.com/acme/calcpy")  # fmt: skip
    assert detect_format(traj) == "swe-agent"
    out = normalize(traj, "swe-agent", "ignored")
    msgs = out[schema.TRACE_MESSAGES]
    assert [m["role"] for m in msgs] == ["system", "user"] + ["assistant", "tool"] * 4
    assert msgs[1]["content"].startswith("<uploaded_files>") and "add() subtracts" in msgs[1]["content"]
    first = msgs[2]["tool_calls"][0]
    assert (first["id"], first["name"], json.loads(first["arguments"])) == (
        "call_1700", "str_replace_editor", {"command": "view", "path": "/testbed/calc/ops.py"})
    assert msgs[3]["tool_call_id"] == "call_1700" and msgs[3]["content"].startswith("OBSERVATION:\n")
    assert msgs[8]["tool_calls"][0]["arguments"] == "{}"
    tools = {t["function"]["name"]: t["function"]["parameters"]["properties"] for t in json.loads(out[schema.TRACE_TOOLS])}
    assert sorted(tools) == ["bash", "str_replace_editor", "submit"]
    assert tools["str_replace_editor"] == {k: {"type": "string"} for k in ("command", "new_str", "old_str", "path")}
    assert (out[schema.TRACE_TASK_ID], out[schema.REPO], out[schema.TRACE_OUTCOME]) == (
        "acme__calcpy-17", "acme/calcpy", "submitted")
    meta = json.loads(out[schema.TRACE_METADATA])
    assert meta["patch"] == PATCH and meta["exit_status"] == "submitted" and meta["trajectory_steps"] == 4
    assert meta["info"]["model_stats"]["api_calls"] == 4 and "edited_files30" not in meta["info"]
    assert "history" not in meta and "trajectory" not in meta and len(meta["replay_config_sha256"]) == 64
    assert validate.check_trace(msgs, out[schema.TRACE_TOOLS], SftValidateConfig()) is None
    # a retry agent's final file: the chosen attempt at the top level, every attempt again below
    retry = {**traj, "attempts": [traj, traj], "info": {**traj["info"], "best_attempt_idx": 1}}
    again = normalize(retry, "swe-agent")
    assert again[schema.TRACE_MESSAGES] == msgs and json.loads(again[schema.TRACE_METADATA])["attempts"] == 2
    assert len(again[schema.TRACE_METADATA]) < len(json.dumps(traj)) / 4


def test_an_early_exit_loses_the_exit_note_and_is_incomplete():
    traj = cost_exit(function_calling_traj("acme__calcpy-18", "mul() is wrong", FC_STEPS[:2]))
    out = normalize(traj, "swe-agent")
    msgs = out[schema.TRACE_MESSAGES]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert not any("Exit due to" in m["content"] for m in msgs)
    assert out[schema.TRACE_OUTCOME] == "incomplete"
    meta = json.loads(out[schema.TRACE_METADATA])
    assert meta["exit_status"] == "exit_cost" and "patch" not in meta and meta["dropped_history"]["exit_note"] == 2
    assert validate.check_trace(msgs, out[schema.TRACE_TOOLS], SftValidateConfig()) is None
    autosubmitted = cost_exit(function_calling_traj("acme__calcpy-19", "mul() is wrong", FC_STEPS[:2]))
    autosubmitted["info"].update(exit_status="submitted (exit_cost)", submission=PATCH)
    assert normalize(autosubmitted, "swe-agent")[schema.TRACE_OUTCOME] == "incomplete"


def test_thought_action_history_stays_chat_without_demonstrations():
    traj = thought_action_traj("acme__calcpy-20", "add() subtracts", [
        ("First I'll find the function.", "grep -n 'def add' -r calc", "calc/ops.py:1:def add(a, b):"),
        ("Fix it and submit.", "submit", PATCH),
    ])  # fmt: skip
    out = normalize(traj, "swe-agent", "acme__calcpy-20")
    msgs = out[schema.TRACE_MESSAGES]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "demonstration" not in msgs[1]["content"] and "ISSUE:\nadd() subtracts" in msgs[1]["content"]
    assert msgs[2]["content"].endswith("```\ngrep -n 'def add' -r calc\n```") and msgs[2]["tool_calls"] == []
    assert out[schema.TRACE_TOOLS] is None
    # no replay config: the task id is the file's name, the repository its SWE-bench-style form
    assert (out[schema.TRACE_TASK_ID], out[schema.REPO], out[schema.TRACE_OUTCOME]) == (
        "acme__calcpy-20", "acme/calcpy", "submitted")
    assert json.loads(out[schema.TRACE_METADATA])["dropped_history"]["demonstrations"] == 1


def test_outcomes_follow_exit_status_and_an_evaluation_wins():
    base = function_calling_traj("acme__calcpy-21", "p", FC_STEPS)
    cases = {("submitted", PATCH): "submitted", ("submitted", ""): "unresolved", ("exit_context", None): "incomplete",
             ("early_exit", None): "incomplete", ("exit_format", PATCH): "incomplete", (None, None): "incomplete"}
    for (status, patch), want in cases.items():
        base["info"].update(exit_status=status, submission=patch)
        assert normalize(base, "swe-agent")[schema.TRACE_OUTCOME] == want, status
    base["info"]["resolved"] = True
    assert normalize(base, "swe-agent")[schema.TRACE_OUTCOME] == "resolved"


# --- ingest --------------------------------------------------------------------------------------


def test_a_folder_of_traj_files_is_read_whole_with_drops_for_the_bad_ones(tmp_path):
    good = function_calling_traj("acme__calcpy-17", "add() subtracts", FC_STEPS)
    _write(tmp_path / "run" / "acme__calcpy-17" / "acme__calcpy-17.traj", good)
    _write(tmp_path / "run" / "acme__calcpy-18" / "acme__calcpy-18.traj",
           cost_exit(function_calling_traj("acme__calcpy-18", "mul() is wrong", FC_STEPS[:2])))
    text = json.dumps(good, indent=2)
    (tmp_path / "run" / "killed.traj").write_text(text[: len(text) // 2])  # a run killed mid-write
    (tmp_path / "run" / "empty.traj").write_text("")
    _write(tmp_path / "run" / "no-history.traj", {k: v for k, v in good.items() if k != "history"})
    _write(tmp_path / "run" / "a-list.traj", [1, 2])
    _write(tmp_path / "run" / "retry-mid-run.traj", {"attempts": [good]})  # RetryAgent, before choosing
    (tmp_path / "run" / "notes.txt").write_text("not a trace file")
    result = _read(tmp_path / "run")
    rows = result.table.to_pylist()
    assert [(r["path"], r["task_id"], r["outcome"], r["reader"]) for r in rows] == [
        ("acme__calcpy-17/acme__calcpy-17.traj", "acme__calcpy-17", "submitted", "json"),
        ("acme__calcpy-18/acme__calcpy-18.traj", "acme__calcpy-18", "incomplete", "json"),
    ]
    drops = dict(zip(result.dropped.column(schema.PATH).to_pylist(), result.dropped.column(schema.REASON).to_pylist(), strict=True))
    assert drops == {"a-list.traj[0]": "not_an_object", "a-list.traj[1]": "not_an_object", "empty.traj": "truncated_json",
                     "killed.traj": "truncated_json", "no-history.traj": "malformed",
                     "retry-mid-run.traj": "malformed"}  # fmt: skip
    assert "history list" in result.dropped.filter(
        result.dropped.column(schema.PATH).to_numpy(zero_copy_only=False) == "no-history.traj"
    ).column(schema.DETAIL)[0].as_py()
    c = result.counters
    assert (c["records"], c["reader.json"], c["reader.json.records"], c.get("reader.jsonl", 0)) == (8, 7, 8, 0)
    assert rows[0]["bytes"] == len(json.dumps(good, indent=2).encode())


def test_a_huge_traj_file_is_one_record_too_large_drop(tmp_path):
    traj = function_calling_traj("acme__calcpy-17", "x" * 5000, FC_STEPS)
    _write(tmp_path / "big.traj", traj)
    gz = tmp_path / "big2.traj.gz"
    gz.write_bytes(gzip.compress(json.dumps(traj, indent=2).encode()))
    result = _read(tmp_path, max_record_bytes=4096)
    assert result.table.num_rows == 0
    assert result.dropped.column(schema.REASON).to_pylist() == ["record_too_large"] * 2
    assert max(result.dropped.column(schema.BYTES).to_pylist()) == 4097  # reading stopped past the cap
    assert _read(tmp_path).table.num_rows == 2


def test_json_files_get_the_reader_their_content_needs(tmp_path):
    chat = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    other = {"messages": [{"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]}
    _write(tmp_path / "pretty.json", chat)
    _write(tmp_path / "array.json", [chat, other, "oops"])
    (tmp_path / "compact-array.json").write_text(json.dumps([chat, other]))
    (tmp_path / "lines.json").write_text(f"{json.dumps(chat)}\n{json.dumps(other)}\n")
    (tmp_path / "broken-first-line.json").write_text('{"messages": [\n' + json.dumps(other) + "\n")
    (tmp_path / "pretty.jsonl").write_text(json.dumps(chat, indent=2))  # the name says JSONL: trusted
    files = {f.rel: f for f in list_trace_files(TracesSource(type="traces", name="t", path=str(tmp_path)))}
    assert {rel: choose_reader(f, SftIngestConfig()) for rel, f in files.items()} == {
        "array.json": "json", "broken-first-line.json": "jsonl", "compact-array.json": "json",
        "lines.json": "jsonl", "pretty.json": "json", "pretty.jsonl": "jsonl"}  # fmt: skip
    result = _read(tmp_path)
    got = sorted((r["path"], r["reader"]) for r in result.table.to_pylist())
    assert got == [("array.json[0]", "json"), ("array.json[1]", "json"), ("broken-first-line.json:2", "jsonl"),
                   ("compact-array.json[0]", "json"), ("compact-array.json[1]", "json"), ("lines.json:1", "jsonl"),
                   ("lines.json:2", "jsonl"), ("pretty.json", "json")]  # fmt: skip
    reasons = sorted(zip(result.dropped.column(schema.PATH).to_pylist(), result.dropped.column(schema.REASON).to_pylist(), strict=True))
    assert reasons[:2] == [("array.json[2]", "not_an_object"), ("broken-first-line.json:1", "bad_json")]
    assert all(reason == "bad_json" for path, reason in reasons if path.startswith("pretty.jsonl:"))
    assert result.counters["reader.json"] == 3 and result.counters["reader.jsonl"] == 3
    ids = result.table.column(schema.ID).to_pylist()
    assert len(set(ids)) == len(ids) and ids == _read(tmp_path).table.column(schema.ID).to_pylist()


# --- end to end ----------------------------------------------------------------------------------

E2E_RECIPE = """
name: traj-sft
seed: 7
out: {out}
sources:
  - {{type: traces, name: swe-agent-run, path: {path}}}
stages:
  sft_ingest: {{}}
  sft_validate: {{}}
  sft_select: {{outcomes: [resolved, submitted]}}
  sft_render: {{}}
  sft_pack: {{}}
tokenizer: {{builtin: qwen2.5}}
outputs:
  - {{name: sft, kind: sft, seq_len: 1024}}
"""


def test_a_folder_of_traj_files_becomes_an_sft_set(tmp_path, ray_local):
    from typer.testing import CliRunner

    from codecorpus.cli import app
    from codecorpus.config import load_recipe
    from codecorpus.runtime.executor import Executor

    run_dir, traj_dir = tmp_path / "run", tmp_path / "trajectories"
    for n, problem in enumerate(["add() subtracts", "sum() of an empty list raises", "mean() divides by zero"]):
        iid = f"acme__calcpy-{30 + n}"
        steps = [(f"{s[0]} ({problem})", s[1], s[2], s[3]) for s in FC_STEPS]
        _write(traj_dir / iid / f"{iid}.traj", function_calling_traj(iid, problem, steps))
    _write(traj_dir / "acme__calcpy-40" / "acme__calcpy-40.traj",
           cost_exit(function_calling_traj("acme__calcpy-40", "pow() overflows", FC_STEPS[:2])))
    text = json.dumps(function_calling_traj("acme__calcpy-41", "p", FC_STEPS), indent=2)
    (traj_dir / "acme__calcpy-41" / "acme__calcpy-41.traj").parent.mkdir()
    (traj_dir / "acme__calcpy-41" / "acme__calcpy-41.traj").write_text(text[:-40])
    recipe_path = tmp_path / "traj.yaml"
    recipe_path.write_text(E2E_RECIPE.format(out=run_dir, path=traj_dir))
    Executor(load_recipe(recipe_path), run_dir, quiet=True).run_pipeline()

    stats = {s: json.loads(schema.RunPaths(run_dir).stats(s).read_text()) for s in ("sft_ingest", "sft_select")}
    ingest = stats["sft_ingest"]
    assert (ingest["rows_in"], ingest["rows_out"], ingest["dropped"]) == (5, 4, {"truncated_json": 1})
    assert ingest["counters"]["reader.json"] == 5 and ingest["counters"]["reader.json.records"] == 5
    assert stats["sft_select"]["dropped"] == {"outcome": 1}  # the cost-limited run
    result = CliRunner().invoke(app, ["manifest", "verify", str(run_dir)])
    assert result.exit_code == 0, result.output
    m = json.loads((run_dir / "shards" / "sft" / "manifest.json").read_text())
    assert m["sft"]["traces"] == 3 and m["sft"]["formats"] == {"swe-agent": 3}
    assert m["sft"]["outcomes"] == {"submitted": 3}
    assert 0 < m["sft"]["loss_tokens"] < m["totals"]["tokens"]


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).resolve().parents[2] / "pipelines" / "data" / "traces").rglob("*.traj")))
def test_the_shipped_traj_examples_are_valid_traces(name):
    data = Path(__file__).resolve().parents[2] / "pipelines" / "data" / "traces"
    result = _read(next(data.rglob(name)))
    assert result.dropped.num_rows == 0 and result.table.num_rows == 1
    row = result.table.to_pylist()[0]
    assert row["format"] == "swe-agent" and row["reader"] == "json"
    assert validate.check_trace(row["messages"], row["tools"], SftValidateConfig()) is None


def test_hostile_traj_files_are_counted_drops(tmp_path):
    (tmp_path / "deep.traj").write_text('{"history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    traj = function_calling_traj("acme__calcpy-50", "p", FC_STEPS[:1])
    traj["history"][1]["content"] = "\\ud800 lone"
    (tmp_path / "surrogate.traj").write_text(json.dumps(traj, indent=2).replace("\\\\ud800", "\\ud800"))
    (tmp_path / "latin1.traj").write_bytes(json.dumps({"history": [], "info": {"x": "caf\xe9"}}, ensure_ascii=False).encode("latin-1"))
    result = _read(tmp_path)
    got = dict(zip(result.dropped.column(schema.PATH).to_pylist(), result.dropped.column(schema.REASON).to_pylist(), strict=True))
    assert got == {"deep.traj": "too_deep", "latin1.traj": "invalid_utf8", "surrogate.traj": "invalid_utf8"}
    assert result.table.num_rows == 0 and result.counters["records"] == 3


def test_traj_files_under_an_s3_prefix(s3_server, monkeypatch):
    from conftest import make_bucket

    client = make_bucket(s3_server, "traj-runs")
    traj = function_calling_traj("acme__calcpy-60", "add() subtracts", FC_STEPS)
    for key in ("run/acme__calcpy-60/acme__calcpy-60.traj", "run/other.traj"):
        client.put_object(Bucket="traj-runs", Key=key, Body=json.dumps(traj, indent=2).encode())
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server["access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server["secret_access_key"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server["endpoint_url"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    files = list_trace_files(TracesSource(type="traces", name="s3", path="s3://traj-runs/run"))
    assert [f.rel for f in files] == ["acme__calcpy-60/acme__calcpy-60.traj", "other.traj"]
    rows = read_shard(files, SftIngestConfig()).table.to_pylist()
    assert [(r["task_id"], r["reader"], r["outcome"]) for r in rows] == [("acme__calcpy-60", "json", "submitted")] * 2

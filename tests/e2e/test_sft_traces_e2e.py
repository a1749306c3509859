"""pipelines/sft-traces.yaml end to end on local Ray: counts, conservation, verify, Megatron, loader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from codecorpus import schema
from codecorpus.cli import app
from codecorpus.config import load_recipe
from codecorpus.manifests.megatron import open_loss_mask, open_tokens, read_index, read_segments
from codecorpus.runtime.executor import Executor
from codecorpus.tokenize.tokenizer import load_tokenizer

RECIPE = Path(__file__).resolve().parents[2] / "pipelines" / "sft-traces.yaml"

EXPECTED = {
    "sft_ingest": (28, 21, {"bad_json": 1, "invalid_utf8": 2, "malformed": 1, "not_an_object": 1,
                            "too_deep": 1, "unknown_format": 1}),
    "sft_validate": (21, 15, {"bad_role": 1, "bad_tool_arguments": 1, "empty_assistant": 1,
                              "orphan_tool_result": 1, "role_order": 1, "unknown_tool": 1}),
    "sft_select": (15, 11, {"contaminated_task_id": 1, "contaminated_text": 1, "outcome": 2}),
    "sft_dedup": (11, 9, {"exact_duplicate": 1, "near_duplicate": 1}),
    "sft_render": (9, 9, {}),
    "sft_pack": (9, 9, {}),
}  # fmt: skip


def run(run_dir: Path):
    recipe = load_recipe(RECIPE)
    return Executor(recipe, run_dir, quiet=True).run_pipeline()


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory, ray_local) -> Path:
    run_dir = tmp_path_factory.mktemp("sft-run")
    run(run_dir)
    return run_dir


def stats(run_dir: Path, stage: str) -> dict:
    return json.loads(schema.RunPaths(run_dir).stats(stage).read_text())


def test_every_stage_counts_and_conserves_rows(sft_run):
    for stage, (rows_in, rows_out, dropped) in EXPECTED.items():
        s = stats(sft_run, stage)
        assert (s["rows_in"], s["rows_out"], s["dropped"]) == (rows_in, rows_out, dropped), stage
        assert s["rows_in"] == s["rows_out"] + sum(s["dropped"].values())
    render = stats(sft_run, "sft_render")["counters"]
    assert render["split_traces"] == 2 and render["examples"] > 9
    # the two SWE-agent .traj files are read whole, every other file line by line
    ingest = stats(sft_run, "sft_ingest")["counters"]
    assert (ingest["reader.json"], ingest["reader.json.records"]) == (2, 2)
    assert (ingest["reader.jsonl"], ingest["reader.jsonl.records"]) == (4, 26)
    assert render["render_fast_path"] == render["examples"] and "render_exact_path" not in render
    # the filters' decontamination (HumanEval + a user benchmark file) and redaction, counted per kind
    select = stats(sft_run, "sft_select")["counters"]
    assert sum(v for k, v in select.items() if k.startswith("decontam.")) == 1
    assert select["redact.email"] == 2 and select["redact.traces"] == 2  # chat-2 and its copy


def test_manifest_verifies_and_describes_the_sft_set(sft_run):
    result = CliRunner().invoke(app, ["manifest", "verify", str(sft_run)])
    assert result.exit_code == 0, result.output
    m = json.loads((sft_run / "shards" / "sft" / "manifest.json").read_text())
    sft, totals = m["sft"], m["totals"]
    assert (sft["traces"], sft["examples"]) == (9, totals["segments"]) and totals["documents"] == 9
    assert sft["continuation_segments"] == totals["segments"] - 9 > 0
    assert 0 < sft["loss_tokens"] == totals["loss_tokens"] < totals["tokens"]
    assert sft["chat_template"]["source"] == "builtin"
    assert m["tokenizer"]["chat_template_sha256"] == sft["chat_template"]["sha256"]
    assert sft["selection"]["sft_select"]["outcomes"] == ["resolved", "submitted", "unknown"]
    assert sft["formats"] == {"openai": 3, "sharegpt": 2, "swe-agent": 4}
    # the function-calling .traj was submitted; the cost-limited one left at selection
    assert sft["outcomes"] == {"resolved": 4, "submitted": 1, "unknown": 4}


def test_the_funnel_gives_the_sets_tokens_on_its_own_row(sft_run):
    """sft_pack writes a set (its spec owns ``shards/``): the report's funnel puts the set's
    documents and tokens, as its manifest records them, on a row of its own under the stage;
    the sets table gives its kind, ``sft``."""
    from codecorpus.pipeline.pipelines import SFT
    from codecorpus.reports.tables import funnel, load_run, sets

    totals = json.loads((sft_run / "shards" / "sft" / "manifest.json").read_text())["totals"]
    data = load_run(sft_run)
    rows = funnel(data).to_pylist()
    assert [r["stage"] for r in rows if r["set"] is None] == [spec.name for spec in SFT]
    assert [(r["stage"], r["set"], r["step"], r["docs_out"], r["tokens_out"]) for r in rows if r["set"] is not None] == [
        ("sft_pack", "sft", len(SFT) - 1, totals["documents"], totals["tokens"])]
    assert next(r for r in rows if r["stage"] == "sft_pack" and r["set"] is None)["tokens_out"] is None
    assert [(r["set"], r["kind"]) for r in sets(data).to_pylist()] == [("sft", "sft")]


def test_megatron_reads_the_shard_and_the_mask_is_aligned(sft_run):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    prefix = sft_run / "shards" / "sft" / "part-00000"
    ds = IndexedDataset(str(prefix), mmap=True)
    index = read_index(f"{prefix}.idx")
    tokens = open_tokens(prefix, index.dtype)
    mask = open_loss_mask(prefix)
    assert len(ds) == len(index.sequence_lengths) == read_segments(prefix).num_rows
    assert np.array_equal(np.concatenate([ds[i] for i in range(len(ds))]), tokens)
    assert len(mask) == len(tokens) and set(np.unique(mask)) <= {0, 1}
    tok = load_tokenizer(load_recipe(RECIPE).tokenizer)
    # every example's trained text ends a turn; nothing of a user/tool/system turn is trained
    trained = tok.decode(tokens[mask == 1])
    assert "<|im_start|>" not in trained and trained.count("<|im_end|>") > 0
    assert all(n <= 2048 for n in index.packed_lengths)


def test_loader_yields_the_loss_mask(sft_run):
    from codecorpus.manifests.loader import PackedLoader

    loader = PackedLoader(sft_run / "shards" / "sft", rank=0, world_size=1, seed=3)
    sample = next(iter(loader))
    assert sample["loss_mask"].shape == sample["input_ids"].shape == (2048,)
    assert 0 < int(sample["loss_mask"].sum()) < int((sample["input_ids"] >= 0).sum())


def test_same_recipe_gives_the_same_bytes_and_a_rerun_resumes(sft_run, tmp_path):
    again = run(tmp_path / "again")
    for name in ("part-00000.bin", "part-00000.idx", "part-00000.mask.bin", "part-00000.seg.parquet", "manifest.json"):
        a = (sft_run / "shards" / "sft" / name).read_bytes()
        assert a == (tmp_path / "again" / "shards" / "sft" / name).read_bytes(), name
    resumed = run(tmp_path / "again")
    assert all(st.ran_jobs == 0 for st in resumed.stages)
    assert again.stages[-1].ran_jobs == 1

"""TRL's SFTTrainer trains on ``export-hf``'s rows of an SFT set and an edit set from the shipped recipes.

The sets come from ``pipelines/sft-traces.yaml`` and ``pipelines/repo-tasks.yaml`` as
shipped, with two changes a user makes with an edit of the file: the edit recipe mines
a repository made by git in a temporary folder (``tests/tasks/tasks_repos.py``), not
this project's own history, and both sets are packed shorter (1024 and 512 tokens) so
that a step of a model whose vocabulary is Qwen2.5's (151,851 ids) stays small on CPU.

The model is a randomly initialised two-layer Qwen2 with the set's vocabulary; nothing
is downloaded (``HF_HUB_OFFLINE``). The processing class only has to name the pad
token for pre-tokenized rows: a word-level tokenizer of the set's special tokens at
their ids. What is checked comes from the trainer's own collated batches (the two it
trained on, recorded in ``compute_loss``, and every batch of its train dataloader),
against the set's files read by the project's own loader, not against the export:
the labels are -100 exactly where the set's mask is 0, the positions restart at
every segment boundary (and TRL's ``cu_seq_lens`` are the set's boundaries), the
loss is finite. ``--per-example`` rows go through TRL's own best-fit packing with
every example intact and its mask the set's.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codecorpus.cli import app
from codecorpus.config import load_recipe
from codecorpus.manifests.hf import EXPORT_NAME
from codecorpus.manifests.loader import PackedLoader
from codecorpus.manifests.manifest import verify
from codecorpus.recipe_file import read_recipe_file
from codecorpus.runtime.executor import Executor

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded: model, tokenizer and data are local
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[2]
SFT_RECIPE = ROOT / "pipelines" / "sft-traces.yaml"
TASKS_RECIPE = ROOT / "pipelines" / "repo-tasks.yaml"
STEPS = 2


def _tasks_repos():
    """``tests/tasks/tasks_repos.py``, the git-made repositories of the tasks tests."""
    if "tasks_repos" in sys.modules:
        return sys.modules["tasks_repos"]
    spec = importlib.util.spec_from_file_location("tasks_repos", ROOT / "tests" / "tasks" / "tasks_repos.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["tasks_repos"] = module
    spec.loader.exec_module(module)
    return module


def _run(recipe: Path, data: dict, run_dir: Path) -> None:
    Executor(load_recipe(recipe, [], data), run_dir, quiet=True).run_pipeline()


@pytest.fixture(scope="module")
def sft_set(tmp_path_factory, ray_local) -> Path:
    data = read_recipe_file(SFT_RECIPE)
    data["outputs"][0]["seq_len"] = 1024
    run_dir = tmp_path_factory.mktemp("sft-traces")
    _run(SFT_RECIPE, data, run_dir)
    return run_dir / "shards" / "sft"


@pytest.fixture(scope="module")
def edit_set(tmp_path_factory, ray_local) -> Path:
    repos = tmp_path_factory.mktemp("repos")
    _tasks_repos().build_project(repos / "acme")
    data = read_recipe_file(TASKS_RECIPE)
    data["sources"] = [{"type": "git", "name": "repos", "path": str(repos)}]
    data["outputs"][0]["seq_len"] = 512
    run_dir = tmp_path_factory.mktemp("repo-tasks")
    _run(TASKS_RECIPE, data, run_dir)
    return run_dir / "shards" / "edit"


def set_rows(set_dir: Path) -> list[dict]:
    """Every packed sequence of the set from its own files: tokens, loss mask, positions, segment starts."""
    loader = PackedLoader(set_dir, shuffle=False)
    rows = []
    for j in range(loader.total_sequences):
        s = loader.sequence(j)
        n = s["num_tokens"]
        rows.append({"ids": s["input_ids"][:n].tolist(), "mask": s["loss_mask"][:n].tolist(),
                     "positions": s["position_ids"][:n].tolist(),
                     "starts": [int(c) for c in s["cu_seqlens"] if c < n]})  # fmt: skip
    return rows


def tokenizer_of(sidecar: dict):
    """A processing class that knows the set's special tokens at their ids (all TRL asks of it here)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    specials = sidecar["tokenizer"]["special_tokens"]
    eos = next(text for text, i in specials.items() if i == sidecar["tokenizer"]["eos_id"])
    vocabulary = Tokenizer(models.WordLevel(vocab=dict(specials), unk_token=None))
    return PreTrainedTokenizerFast(tokenizer_object=vocabulary, eos_token=eos, pad_token=eos)


def train(export: Path, work: Path, batch_size: int):
    """Two steps of SFTTrainer on the export's rows; returns the trainer and the batches it trained on."""
    import torch
    from datasets import load_dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import SFTConfig, SFTTrainer

    sidecar = json.loads((export / EXPORT_NAME).read_text())
    rows = load_dataset("parquet", data_files=str(export / "data" / "*.parquet"), split="train",
                        cache_dir=str(work / "hf-cache"))  # fmt: skip
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=sidecar["tokenizer"]["vocab_size"], hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=sidecar["set"]["seq_len"], tie_word_embeddings=True)  # fmt: skip
    trained_on: list[tuple[dict, float]] = []

    class RecordingTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            trained_on.append(({k: v.clone() if torch.is_tensor(v) else v for k, v in inputs.items()},
                               float(loss.detach())))  # fmt: skip
            return loss

    args = SFTConfig(
        output_dir=str(work / "trainer"), max_steps=STEPS, per_device_train_batch_size=batch_size, learning_rate=1e-3,
        logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, seed=0, disable_tqdm=True,
        dataloader_num_workers=0, **sidecar["trl"],  # completion_only_loss, padding_free, no repacking
    )  # fmt: skip
    trainer = RecordingTrainer(model=Qwen2ForCausalLM(config), args=args, train_dataset=rows,
                               processing_class=tokenizer_of(sidecar))  # fmt: skip
    trainer.train()
    return trainer, trained_on


def check_batch(batch: dict, rows: list[dict]) -> list[int]:
    """Assert a padding-free batch against the set's rows; return the rows it holds, in order."""
    assert "attention_mask" not in batch and batch["input_ids"].shape[0] == 1  # one flat sequence
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    positions = batch["position_ids"][0].tolist()
    by_start: dict[tuple, list[int]] = {}
    for j, r in enumerate(rows):
        by_start.setdefault(tuple(r["ids"][:16]), []).append(j)
    held, starts, at = [], [], 0
    while at < len(ids):
        candidates = [j for j in by_start.get(tuple(ids[at : at + 16]), [])
                      if ids[at : at + len(rows[j]["ids"])] == rows[j]["ids"]]  # fmt: skip
        assert candidates, f"batch tokens at {at} are no packed sequence of the set"
        row = rows[candidates[0]]
        n = len(row["ids"])
        want = [t if m else -100 for t, m in zip(row["ids"], row["mask"], strict=True)]
        assert labels[at : at + n] == want, "the labels are not -100 exactly where the set's mask is 0"
        assert positions[at : at + n] == row["positions"]
        starts += [at + s for s in row["starts"]]
        held.append(candidates[0])
        at += n
    assert [i for i, p in enumerate(positions) if p == 0] == starts  # a restart at every segment, nowhere else
    assert batch["cu_seq_lens_q"].tolist() == [*starts, len(ids)]
    return held


# a step's cost is its tokens times the vocabulary: the SFT set's rows are ~1,000 tokens, the edit set's ~500
@pytest.mark.parametrize(("which", "batch_size"), [("sft_set", 1), ("edit_set", 2)])
def test_sft_trainer_trains_on_the_export_with_the_sets_masks(which, batch_size, request, tmp_path):
    set_dir = request.getfixturevalue(which)
    export = tmp_path / "export"
    result = CliRunner().invoke(app, ["manifest", "export-hf", str(set_dir), str(export)])
    assert result.exit_code == 0, result.output
    assert verify(export) == []
    rows = set_rows(set_dir)
    assert any(len(r["starts"]) > 1 for r in rows) and any(0 in r["mask"] for r in rows)
    # TRL never trains a segment's first token; these recipes (train_on_system: false) never do either,
    # so "labels -100 exactly where the mask is 0" is what TRL must give, token for token
    assert all(r["mask"][s] == 0 for r in rows for s in r["starts"])

    trainer, trained_on = train(export, tmp_path, batch_size)
    assert trainer.state.global_step == STEPS and len(trained_on) == STEPS
    for batch, loss in trained_on:
        check_batch(batch, rows)
        assert math.isfinite(loss) and loss > 0
    logged = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert len(logged) == STEPS and all(math.isfinite(x) for x in logged)
    # every batch the trainer's own dataloader makes: the whole set, each row once
    seen = [j for batch in trainer.get_train_dataloader() for j in check_batch(batch, rows)]
    assert sorted(seen) == list(range(len(rows)))
    # and its collator on every two consecutive rows: a row's end is a segment boundary too
    prepared = trainer.train_dataset
    for i in range(len(prepared) - 1):
        assert len(check_batch(trainer.data_collator([prepared[i], prepared[i + 1]]), rows)) == 2
    trained_tokens = sum(sum(label != -100 for label in ex["labels"]) for ex in trainer.train_dataset)
    loss_tokens = json.loads((set_dir / "manifest.json").read_text())["totals"]["loss_tokens"]
    assert trained_tokens == loss_tokens == sum(sum(r["mask"]) for r in rows)


def set_segments(set_dir: Path) -> dict[tuple, list[dict]]:
    """Every segment (example) of the set from its own files, by its first tokens."""
    segments: dict[tuple, list[dict]] = {}
    for row in set_rows(set_dir):
        bounds = [*row["starts"], len(row["ids"])]
        for a, b in itertools.pairwise(bounds):
            seg = {"ids": row["ids"][a:b], "mask": row["mask"][a:b]}
            segments.setdefault(tuple(seg["ids"][:16]), []).append(seg)
    return segments


def test_trl_repacks_per_example_rows_and_keeps_the_sets_masks(edit_set, tmp_path):
    """``--per-example`` rows through TRL's own best-fit packing: every example intact, its mask as the set's."""
    import torch
    from datasets import load_dataset
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl import SFTConfig, SFTTrainer

    export = tmp_path / "export"
    result = CliRunner().invoke(app, ["manifest", "export-hf", "--per-example", str(edit_set), str(export)])
    assert result.exit_code == 0, result.output
    sidecar = json.loads((export / EXPORT_NAME).read_text())
    rows = load_dataset("parquet", data_files=str(export / "data" / "*.parquet"), split="train",
                        cache_dir=str(tmp_path / "hf-cache"))  # fmt: skip
    assert len(rows) == sidecar["set"]["totals"]["segments"]
    seq_len = sidecar["set"]["seq_len"]
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=sidecar["tokenizer"]["vocab_size"], hidden_size=8,
                                         intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=1, max_position_embeddings=seq_len))  # fmt: skip
    args = SFTConfig(output_dir=str(tmp_path / "trainer"), per_device_train_batch_size=2, report_to="none",
                     use_cpu=True, dataloader_num_workers=0, completion_only_loss=True, packing=True,
                     packing_strategy="bfd", max_length=seq_len)  # fmt: skip
    trainer = SFTTrainer(model=model, args=args, train_dataset=rows, processing_class=tokenizer_of(sidecar))
    assert len(trainer.train_dataset) < len(rows)  # TRL packed several examples into a row
    segments, seen = set_segments(edit_set), 0
    for batch in trainer.get_train_dataloader():
        ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
        starts = [i for i, p in enumerate(batch["position_ids"][0].tolist()) if p == 0]
        for a, b in zip(starts, [*starts[1:], len(ids)], strict=True):
            matches = [s for s in segments.get(tuple(ids[a : a + 16]), []) if s["ids"] == ids[a:b]]
            assert matches, f"TRL's packed tokens {a}:{b} are no example of the set"
            assert labels[a:b] == [t if m else -100 for t, m in zip(matches[0]["ids"], matches[0]["mask"], strict=True)]
            seen += 1
    assert seen == sidecar["set"]["totals"]["segments"]

"""Megatron-Core's own BlendedMegatronDatasetBuilder builds every split of every set, from the manifest.

Real pipeline runs make a short set, two long-context sets and an SFT set whose
natural shards include one of 3 packed sequences (the last ingest shard, the
last repository bucket, the last trace file): with ``--split 99,1,0`` that shard
gets no validation sequence and Megatron's GPTDataset never finishes building.
The set manifests must list only shards at or above the split floor, and
megatron-core, fed each manifest's ``data_path`` and ``sequences_per_dataset``
exactly as written, must build and iterate ``99,1,0``, ``969,30,1`` and
``100,0,0``. Megatron runs in a subprocess with a timeout, so a hang fails the
test instead of blocking the suite; one subprocess builds every set (torch and
megatron-core load once). Run as a script, this file is that subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

LAUNCH = ("99,1,0", "969,30,1", "100,0,0")
# pretrain_gpt.py's sample counts: train_iters * gbs, eval_iters * (train_iters // eval_interval + 1) * gbs,
# eval_iters * gbs, for gbs 8, train_iters 20, eval_interval 10, eval_iters 2
SIZES = [160, 48, 16]
MEGATRON_TIMEOUT_S = 300


# --- the subprocess: megatron-core on one set ----------------------------------------------


def build_and_iterate(jobs: list[tuple[str, list[str]]], cache: str) -> None:
    """For each (set directory, splits): build GPTDatasets from the set's manifest blend with each
    split, read every sample, print one JSON line per set and split. Each set is built in its
    directory: the blend's prefixes are relative to it."""
    import torch
    import torch.distributed as dist
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list
    from megatron.core.tokenizers.text.text_tokenizer import MegatronTokenizerText

    dist.init_process_group("gloo", init_method=f"file://{cache}/pg", rank=0, world_size=1)
    for n, (set_dir, splits) in enumerate(jobs):
        os.chdir(set_dir)
        manifest = json.loads(Path("manifest.json").read_text())
        vocab = manifest["tokenizer"]["vocab_size"]
        sequences = {prefix: tuple(v) for prefix, v in manifest["megatron"]["sequences_per_dataset"].items()}
        for split in splits:
            config = GPTDatasetConfig(
                random_seed=1234,
                sequence_length=manifest["seq_len"],
                blend=get_blend_from_list(manifest["megatron"]["data_path"]),
                split=split,
                path_to_cache=f"{cache}/{n}/{split}",
                tokenizer=MegatronTokenizerText(None, {"library": "null"}, vocab_size=vocab - 1),
                reset_position_ids=False,
                reset_attention_mask=False,
                eod_mask_loss=False,
                create_attention_mask=False,  # as with fused attention; a 256K set's mask alone is 64 GiB
                sequences_per_dataset=sequences,
            )
            datasets = BlendedMegatronDatasetBuilder(GPTDataset, SIZES, lambda: True, config).build()
            lengths, members = [], []
            for ds in datasets:
                lengths.append(None if ds is None else len(ds))
                if ds is None:
                    continue
                for i in range(len(ds)):
                    sample = ds[i]
                    tokens = sample["tokens"]
                    assert tokens.shape == (manifest["seq_len"],) and tokens.dtype == torch.int64
                    assert int(tokens.min()) >= 0 and int(tokens.max()) < vocab
                    assert torch.equal(sample["labels"][:-1], tokens[1:])
                members.append(sorted({int(k) for k in np.unique(ds.dataset_index)}))
            print(json.dumps({"set": set_dir, "split": split, "lengths": lengths, "members": members}), flush=True)
    dist.destroy_process_group()


def run_megatron(jobs: list[tuple[Path, tuple[str, ...]]], cache: Path) -> dict[str, dict[str, dict]]:
    """Megatron on each (set, splits) in one subprocess: {set directory: {split: what it built}}; a
    split it cannot finish within the timeout fails the test."""
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, __file__, json.dumps([(str(d), list(splits)) for d, splits in jobs]), str(cache)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=MEGATRON_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as e:
        built = [(Path(r["set"]).name, r["split"]) for r in map(json.loads, _json_lines((e.stdout or b"").decode()))]
        pytest.fail(f"Megatron did not finish within {MEGATRON_TIMEOUT_S} s; (set, split) built before it hung: {built}")
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, dict[str, dict]] = {str(d): {} for d, _ in jobs}
    for r in map(json.loads, _json_lines(done.stdout)):
        out[r["set"]][r["split"]] = r
    return out


def _json_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("{")]


# --- the runs --------------------------------------------------------------------------------

BIG_REPOS, FILES_PER_REPO, TAIL_FILES = 16, 65, 3
FILE_BYTES = 103  # every file the same size, so the ingest cut is exact: 520 files, 520 files, the tail


def repo_names(buckets: int) -> tuple[list[str], str]:
    """Sixteen big repositories in long buckets 0 and 1 (eight each), and a tail repository alone
    in bucket 2 that also sorts last (so it is the last ingest shard)."""
    from codecorpus.packing.longctx import bucket_of

    big: dict[int, list[str]] = {0: [], 1: []}
    j = 0
    while min(len(v) for v in big.values()) < BIG_REPOS // 2:
        name = f"r{j:03d}"
        b = bucket_of("fixture", name, buckets)
        if b in big and len(big[b]) < BIG_REPOS // 2:
            big[b].append(name)
        j += 1
    tail = next(f"zz{j}" for j in range(100) if bucket_of("fixture", f"zz{j}", buckets) == 2)
    return sorted(big[0] + big[1]), tail


def python_file(repo: str, i: int, rng: np.random.Generator) -> str:
    a, b = rng.integers(100, 1000, 2)
    text = f'def scale_{repo[-3:]}_{i:03d}(value):\n    """Scale the value by {a}, then add {b}."""\n    return value * {a} + {b}\n'
    assert len(text) == FILE_BYTES
    return text


def write_corpus(root: Path) -> Path:
    rng = np.random.default_rng(7)
    big, tail = repo_names(3)
    for repo, n in [*((r, FILES_PER_REPO) for r in big), (tail, TAIL_FILES)]:
        (root / repo).mkdir(parents=True)
        for i in range(n):
            (root / repo / f"m{i:03d}.py").write_text(python_file(repo, i, rng))
    return root


def pretrain_recipe(corpus: Path) -> dict:
    half = BIG_REPOS * FILES_PER_REPO // 2 * FILE_BYTES
    return {
        "seed": 11,
        "sources": [{"type": "local", "name": "fixture", "path": str(corpus), "layout": "repos"}],
        "stages": {"ingest": {"shard_bytes": half}, "langid": {}, "tokenize": {}, "pack": {}},
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [
            {"name": "short", "seq_len": 64},  # one file (38 to 43 tokens) per packed sequence
            {"name": "long", "kind": "long", "seq_len": 64, "long": {"buckets": 3}},
            {"name": "long-small", "kind": "long", "seq_len": 512, "long": {"buckets": 3}},
        ],
    }


TRACES_PER_FILE, TAIL_TRACES = 540, 3


def trace(k: int, rng: np.random.Generator) -> str:
    a, b = (int(x) for x in rng.integers(100, 1000, 2))
    return json.dumps({"messages": [
        {"role": "user", "content": f"What is {a} plus {b}? Answer with the sum only, please."},
        {"role": "assistant", "content": f"The sum of {a} and {b} is {a + b}; check {k:04d}."},
    ]})  # fmt: skip


def write_traces(root: Path) -> tuple[Path, int]:
    """Three trace files: two of 540 traces and a tail of 3; returns the folder and the shard size
    that makes each file one ingest shard."""
    rng = np.random.default_rng(5)
    sizes, k = [], 0
    for name, n in (("a.jsonl", TRACES_PER_FILE), ("b.jsonl", TRACES_PER_FILE), ("c.jsonl", TAIL_TRACES)):
        lines = []
        for _ in range(n):
            lines.append(trace(k, rng))
            k += 1
        (root / name).write_text("\n".join(lines) + "\n")
        sizes.append((root / name).stat().st_size)
    return root, min(sizes[:2])


def sft_recipe(traces: Path, shard_bytes: int) -> dict:
    return {
        "seed": 5,
        "sources": [{"type": "traces", "name": "chats", "path": str(traces)}],
        "stages": {"sft_ingest": {"shard_bytes": shard_bytes}, "sft_validate": {}, "sft_render": {}, "sft_pack": {}},
        "tokenizer": {"builtin": "qwen2.5"},
        "outputs": [{"name": "sft", "kind": "sft", "seq_len": 64}],
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory, ray_local) -> dict[str, Path]:
    from codecorpus.config import load_recipe_data
    from codecorpus.runtime.executor import Executor

    corpus = write_corpus(tmp_path_factory.mktemp("corpus"))
    pre = tmp_path_factory.mktemp("pretrain-run")
    Executor(load_recipe_data(pretrain_recipe(corpus)), pre, quiet=True).run_pipeline()
    traces, shard_bytes = write_traces(tmp_path_factory.mktemp("traces"))
    sft = tmp_path_factory.mktemp("sft-run")
    Executor(load_recipe_data(sft_recipe(traces, shard_bytes)), sft, quiet=True).run_pipeline()
    return {"short": pre, "long": pre, "long-small": pre, "sft": sft}


FLOOR_SET_SPLITS = ("99,1,0", "100,0,0")
"""The splits the set below the floor serves, built by Megatron to show it."""


@pytest.fixture(scope="module")
def megatron_built(runs, tmp_path_factory) -> dict[str, dict[str, dict]]:
    """What Megatron built of each set, by set name then split (one subprocess for all)."""
    jobs = [(manifest_of(runs, name)[0], LAUNCH) for name in ("short", "long", "sft")]
    jobs.append((manifest_of(runs, "long-small")[0], FLOOR_SET_SPLITS))
    built = run_megatron(jobs, tmp_path_factory.mktemp("megatron-cache"))
    return {Path(d).name: splits for d, splits in built.items()}


def manifest_of(runs: dict[str, Path], name: str) -> tuple[Path, dict]:
    set_dir = runs[name] / "shards" / name
    return set_dir, json.loads((set_dir / "manifest.json").read_text())


def megatron_elements(n: int, split: str) -> list[int | None]:
    """Megatron's own split of a blend member of ``n`` elements (its functions, its rounding)."""
    from megatron.core.datasets.blended_megatron_dataset_config import (
        convert_split_vector_to_split_matrix,
        parse_and_normalize_split,
    )

    matrix = convert_split_vector_to_split_matrix(parse_and_normalize_split(split))
    return [None if b is None else round(b[1] * float(n)) - round(b[0] * float(n)) for b in matrix]


# --- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["short", "long", "sft"])
def test_natural_shards_include_one_megatron_cannot_split(runs, name):
    """What the old code emitted: packed shards of which one leaves 99,1,0's validation split empty."""
    _, m = manifest_of(runs, name)
    natural = {p: n for merged in m["packing"]["merged_shards"].values() for p, n in merged.items()}
    assert min(natural.values()) == 3, natural
    tail = min(natural, key=natural.get)
    assert megatron_elements(natural[tail], "99,1,0")[1] == 0  # an empty validation split: the hang


@pytest.mark.parametrize("name", ["short", "long", "sft"])
def test_emitted_shards_reach_the_floor_and_verify(runs, name):
    from codecorpus.manifests.manifest import verify
    from codecorpus.manifests.splits import SHARD_FLOOR

    set_dir, m = manifest_of(runs, name)
    assert SHARD_FLOOR == 501
    assert len(m["shards"]) == 2 and all(s["sequences"] >= SHARD_FLOOR for s in m["shards"])
    natural = {p: n for merged in m["packing"]["merged_shards"].values() for p, n in merged.items()}
    assert m["totals"]["sequences"] == sum(natural.values()) + sum(
        s["sequences"] for s in m["shards"] if s["prefix"] not in m["packing"]["merged_shards"]
    )
    listed = {info["path"] for s in m["shards"] for info in s["files"].values()}
    assert {p.name for p in set_dir.iterdir()} == listed | {"manifest.json", "megatron-sequences.json"}
    assert m["megatron"]["split_floor"]["serves"] == dict.fromkeys(m["megatron"]["split_floor"]["serves"], True)
    assert verify(runs[name]) == []
    assert verify(set_dir, split="969,30,1") == []


@pytest.mark.parametrize("name", ["short", "long", "sft"])
def test_megatron_builds_and_iterates_every_launch_split(runs, megatron_built, name):
    _, m = manifest_of(runs, name)
    built = megatron_built[name]
    assert sorted(built) == sorted(LAUNCH)
    members = list(range(len(m["shards"])))
    for split in ("99,1,0", "969,30,1"):
        train, valid, _ = built[split]["lengths"]
        assert train >= SIZES[0] and valid >= SIZES[1]
        assert built[split]["members"][0] == members and built[split]["members"][1] == members
    assert built["969,30,1"]["lengths"][2] >= SIZES[2] and built["969,30,1"]["members"][2] == members
    assert built["99,1,0"]["lengths"][2] is None
    assert built["100,0,0"]["lengths"][1:] == [None, None] and built["100,0,0"]["lengths"][0] >= SIZES[0]


def test_a_set_below_the_floor_is_one_shard_that_states_the_splits_it_serves(runs, megatron_built):
    from codecorpus.manifests.manifest import split_notes, verify

    set_dir, m = manifest_of(runs, "long-small")
    (shard,) = m["shards"]
    n = shard["sequences"]
    assert 51 <= n < 501 and len(m["packing"]["merged_shards"][shard["prefix"]]) == 3
    statement = m["megatron"]["split_floor"]
    assert statement["smallest_member_sequences"] == n and statement["min_split_weight"] == round(1 / n, 6)
    assert statement["serves"] == {"99,1,0": True, "98,2,0": True, "969,30,1": False, "949,50,1": False,
                                   "100,0,0": True}  # fmt: skip
    assert verify(set_dir) == []
    (problem,) = verify(set_dir, split="969,30,1")
    assert f"shard {shard['prefix']}: {n} packed sequences" in problem and "test split" in problem
    (note,) = split_notes(set_dir)
    assert f"one shard of {n} packed sequences" in note and "not 969,30,1, 949,50,1" in note
    built = megatron_built["long-small"]
    assert sorted(built) == sorted(FLOOR_SET_SPLITS)
    assert built["99,1,0"]["lengths"][1] >= SIZES[1]  # its validation split is served


def test_verify_names_a_blend_member_below_the_floor(tmp_path):
    from codecorpus import schema
    from codecorpus.manifests import manifest as mf
    from codecorpus.manifests import megatron
    from codecorpus.packing.pack import pack_documents

    rng = np.random.default_rng(3)
    records = []
    for k, n_docs in enumerate((600, 3)):
        docs = [rng.integers(1, 1000, 20).astype(np.int64) for _ in range(n_docs)]
        packed = pack_documents([f"d{k}-{i}" for i in range(n_docs)], docs, ["Python"] * n_docs,
                                ["src"] * n_docs, 32, np.uint16)  # fmt: skip
        prefix = tmp_path / schema.shard_name(k)
        files = megatron.write_indexed_dataset(prefix, packed.tokens, packed.sequence_lengths, packed.document_indices)
        files["seg"] = megatron.write_segments(prefix, packed.segments)
        records.append(mf.record_shard(prefix, files, seq_len=32))
    m = mf.build_set_manifest(
        name="t", set_dir=tmp_path, shards=records, tokenizer={"name": "t", "vocab_size": 1000, "eos_id": 0},
        token_dtype="uint16", seq_len=32, packing={"algorithm": "bfd", "truncated_documents": 0},
        recipe_hash="x", provenance={},
    )  # fmt: skip
    mf.write_manifest(tmp_path / schema.MANIFEST_NAME, m)
    (problem,) = mf.verify(tmp_path)
    assert problem.startswith("shard part-00001: 3 packed sequences, below the floor of 501 per shard")
    assert "--split 99,1,0 / 98,2,0 / 969,30,1 / 949,50,1" in problem


def test_split_arithmetic_is_megatrons():
    from codecorpus.manifests import splits

    for split in (*splits.LAUNCH_SPLITS, "90,5,5", "1,1,1", "7,2,1", "80,20", "999,1", "0.5,0.3,0.2"):
        for n in range(1, 1200):
            assert splits.elements_per_split(n, split) == megatron_elements(n, split), (split, n)
    assert [splits.min_elements(s) for s in splits.LAUNCH_SPLITS] == [51, 25, 501, 501, 1]
    assert max(splits.min_elements(s) for s in splits.LAUNCH_SPLITS) == splits.SHARD_FLOOR
    assert splits.serves(50, "99,1,0") is False and splits.serves(51, "99,1,0") is True


if __name__ == "__main__":
    build_and_iterate([(d, splits) for d, splits in json.loads(sys.argv[1])], sys.argv[2])

"""A run with a short FIM set and a long-context set on local Ray: shards Megatron reads, verify, markers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from codecorpus import schema
from codecorpus.config import load_recipe_data
from codecorpus.manifests.inspect import load_set_tokenizer
from codecorpus.manifests.manifest import verify
from codecorpus.manifests.megatron import open_tokens, read_index, read_segments
from codecorpus.runtime.executor import Executor
from conftest import write_repos


def recipe(corpus: Path, out: Path) -> dict:
    return {
        "name": "long",
        "seed": 3,
        "out": str(out),
        "sources": [{"type": "local", "name": "fixture", "path": str(corpus)}],
        "stages": {"ingest": {"shard_bytes": 300}, "langid": {}, "dedup": {"buckets": 2}, "tokenize": {}, "pack": {}},
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [
            {"name": "short", "seq_len": 64, "fim": {"rate": 0.5}},
            {"name": "long", "kind": "long", "seq_len": 96, "long": {"buckets": 3}},
        ],
    }


@pytest.fixture(scope="module")
def long_run(tmp_path_factory, ray_local):
    corpus = write_repos(tmp_path_factory.mktemp("corpus"))
    run_dir = tmp_path_factory.mktemp("run")
    Executor(load_recipe_data(recipe(corpus, run_dir)), run_dir, quiet=True).run_pipeline()
    return run_dir


def long_run_corpus(run_dir: Path) -> Path:
    """The fixture corpus, from the resolved recipe the run wrote."""
    return Path(yaml.safe_load(schema.RunPaths(run_dir).recipe.read_text())["sources"][0]["path"])


def shards(set_dir: Path) -> list[Path]:
    m = json.loads((set_dir / schema.MANIFEST_NAME).read_text())
    return [set_dir / s["prefix"] for s in m["shards"]]


def test_run_verifies_and_lists_both_sets(long_run):
    assert verify(long_run) == []
    run_m = json.loads((long_run / schema.MANIFEST_NAME).read_text())
    assert sorted(run_m["sets"]) == ["long", "short"]
    short = json.loads((long_run / "shards/short/manifest.json").read_text())
    assert short["packing"]["fim"]["fim_documents"] > 0
    assert short["tokenizer"]["special_tokens"]["<|fim_prefix|>"] == 50257  # appended after gpt2's specials


def test_megatron_core_reads_every_shard(long_run):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    for name in ("short", "long"):
        for prefix in shards(long_run / "shards" / name):
            ds = IndexedDataset(str(prefix))
            index = read_index(f"{prefix}.idx")
            tokens = open_tokens(prefix, index.dtype)
            assert len(ds) == len(index.sequence_lengths)
            for i in range(len(ds)):
                start = int(index.sequence_pointers[i]) // index.dtype.itemsize
                np.testing.assert_array_equal(ds[i], tokens[start : start + int(index.sequence_lengths[i])])
            np.testing.assert_array_equal(ds.document_indices, index.document_indices)


def test_long_pieces_start_with_repo_marker_and_reassemble_the_repo(long_run):
    set_dir = long_run / "shards/long"
    tok = load_set_tokenizer(set_dir)
    pieces: dict[str, list[tuple[int, str]]] = {}
    for prefix in shards(set_dir):
        index = read_index(f"{prefix}.idx")
        tokens = open_tokens(prefix, index.dtype)
        for i, seg in enumerate(read_segments(prefix).to_pylist()):
            start = int(index.sequence_pointers[i]) // index.dtype.itemsize
            text = tok.decode(tokens[start : start + int(index.sequence_lengths[i])])
            assert text.startswith("<|repo_name|>repo-")
            pieces.setdefault(seg[schema.SEG_DOC_ID], []).append((seg[schema.SEG_DOC_OFFSET], text))
    assert len(pieces) == 2  # repo-a and repo-b, one document each
    m = json.loads((set_dir / schema.MANIFEST_NAME).read_text())
    assert m["long_context"]["continuations"] >= 1
    for parts in pieces.values():
        parts.sort()
        header = parts[0][1][: parts[0][1].index("<|file_sep|>")]
        repo = header.removeprefix("<|repo_name|>").strip()
        text = "".join(p.removeprefix(header) for _, p in parts)
        assert text.endswith("<|endoftext|>")
        files: dict[str, str] = {}
        for chunk in text.removesuffix("<|endoftext|>").split("<|file_sep|>")[1:]:
            path, _, body = chunk.partition("\n")
            files[path] = files.get(path, "") + body  # a file cut inside repeats its marker
        corpus = long_run_corpus(long_run)
        for path, body in files.items():  # every file decodes back to its source text
            assert (corpus / repo / path).read_text() == body


def test_verify_catches_long_context_stats_corruption(long_run, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(long_run, copy)
    path = copy / "shards/long/manifest.json"
    m = json.loads(path.read_text())
    m["long_context"]["single_repo_sequences"] += 1
    path.write_text(json.dumps(m))
    problems = verify(path)
    assert any("single_repo_sequences" in p for p in problems)


def repository_documents(set_dir: Path) -> dict[str, list[int]]:
    """Each repository document's tokens, its pieces put back in offset order."""
    pieces: dict[str, list[tuple[int, list[int]]]] = {}
    for prefix in shards(set_dir):
        index = read_index(f"{prefix}.idx")
        tokens = open_tokens(prefix, index.dtype)
        for i, seg in enumerate(read_segments(prefix).to_pylist()):
            start = int(index.sequence_pointers[i]) // index.dtype.itemsize
            piece = tokens[start : start + int(index.sequence_lengths[i])].tolist()
            pieces.setdefault(seg[schema.SEG_DOC_ID], []).append((seg[schema.SEG_DOC_OFFSET], piece))
    return {doc: [t for _, p in sorted(parts) for t in p] for doc, parts in pieces.items()}


def test_buckets_grow_with_tokens_and_documents_stay_the_same(long_run, tmp_path):
    """issue 9: ``long.bucket_tokens`` bounds a bucket, so a larger set gets more buckets
    (each task's memory stays bounded); the repository documents do not change."""
    import shutil

    from codecorpus.packing.long_bodies import bucket_count

    copy = tmp_path / "run"
    shutil.copytree(long_run, copy)
    data = recipe(long_run_corpus(long_run), copy)
    tokens = json.loads(schema.RunPaths(copy).stats("tokenize").read_text())["tokens_out"]
    data["outputs"][1]["long"]["bucket_tokens"] = tokens // 8 + 1
    cfg = load_recipe_data(data)
    assert bucket_count(cfg.outputs[1].long, tokens) == 8 > cfg.outputs[1].long.buckets
    Executor(cfg, copy, quiet=True).run_pipeline(only="pack")
    m = json.loads((copy / "shards/long" / schema.MANIFEST_NAME).read_text())
    assert m["long_context"]["repositories"] == 2
    assert len(list((copy / "pack" / "_done").glob("long-part-*"))) == 8
    assert repository_documents(copy / "shards/long") == repository_documents(long_run / "shards/long")
    assert verify(copy) == []

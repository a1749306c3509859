"""Trainer loader (sharding, shuffle, exact resume) and the datatrove export, read back by datatrove."""

from __future__ import annotations

import json

import numpy as np
import pytest

from codecorpus import schema
from codecorpus.manifests import manifest as mf
from codecorpus.manifests import megatron
from codecorpus.manifests.datatrove import export_datatrove
from codecorpus.manifests.loader import PackedLoader
from codecorpus.manifests.manifest import verify
from codecorpus.packing.pack import pack_documents

SEQ_LEN = 32
EOS = 0


def build_set(set_dir, n_shards=2, docs_per_shard=800, seed=0, mask=False):
    """Shards of more than the split floor (501) packed sequences each, as codecorpus emits them."""
    rng = np.random.default_rng(seed)
    records = []
    for k in range(n_shards):
        docs = [rng.integers(1, 1000, rng.integers(2, 50)).astype(np.int64) for _ in range(docs_per_shard)]
        packed = pack_documents([f"d{k}-{i}" for i in range(len(docs))], docs, ["Python"] * len(docs),
                                ["src"] * len(docs), SEQ_LEN, np.uint16)  # fmt: skip
        prefix = set_dir / schema.shard_name(k)
        files = megatron.write_indexed_dataset(prefix, packed.tokens, packed.sequence_lengths, packed.document_indices)
        files["seg"] = megatron.write_segments(prefix, packed.segments)
        loss = None
        if mask:
            m = (np.arange(len(packed.tokens)) % 3 != 0).astype(np.uint8)
            files["mask"] = megatron.write_loss_mask(prefix, m)
            loss = int(m.sum())
        records.append(mf.record_shard(prefix, files, seq_len=SEQ_LEN, loss_tokens=loss))
    m = mf.build_set_manifest(
        name="t", set_dir=set_dir, shards=records,
        tokenizer={"name": "test", "vocab_size": 1000, "eos_id": EOS}, token_dtype="uint16",
        seq_len=SEQ_LEN, packing={"algorithm": "bfd", "truncated_documents": 0}, recipe_hash="x", provenance={},
    )  # fmt: skip
    mf.write_manifest(set_dir / schema.MANIFEST_NAME, m)
    return m


@pytest.fixture
def packed_set(tmp_path):
    build_set(tmp_path)
    return tmp_path


def test_samples_carry_segments_positions_and_padding(packed_set):
    loader = PackedLoader(packed_set, shuffle=False)
    index = megatron.read_index(packed_set / "part-00000.idx")
    tokens = megatron.open_tokens(packed_set / "part-00000", index.dtype)
    d = index.document_indices
    j = next(j for j in range(len(d) - 1) if d[j + 1] - d[j] >= 2 and index.packed_lengths[j] < SEQ_LEN)
    sample = loader.sequence(j)
    lengths = index.sequence_lengths[d[j] : d[j + 1]]
    used = int(lengths.sum())
    start = int(index.sequence_pointers[d[j]]) // 2
    assert sample["input_ids"].shape == (SEQ_LEN,)
    np.testing.assert_array_equal(sample["input_ids"][:used], tokens[start : start + used])
    assert (sample["input_ids"][used:] == EOS).all()
    assert sample["cu_seqlens"][: len(lengths) + 1].tolist() == [0, *np.cumsum(lengths).tolist()]
    assert sample["cu_seqlens"][-1] == SEQ_LEN
    first = int(lengths[0])
    assert sample["position_ids"][:first].tolist() == list(range(first))
    assert sample["position_ids"][first] == 0
    assert sample["loss_mask"][:used].all() and not sample["loss_mask"][used:].any()


def test_ranks_partition_an_epoch_and_shuffle_is_seeded(packed_set):
    world = 3
    seen = []
    for r in range(world):
        loader = PackedLoader(packed_set, rank=r, world_size=world, seed=9)
        seen.append([tuple(s["input_ids"].tolist()) for s in loader])
    all_ids = [x for per in seen for x in per]
    assert len(set(map(len, seen))) == 1
    assert len(all_ids) == (PackedLoader(packed_set).total_sequences // world) * world
    a = [s["num_tokens"] for s in PackedLoader(packed_set, seed=1)]
    b = [s["num_tokens"] for s in PackedLoader(packed_set, seed=1)]
    c = [s["num_tokens"] for s in PackedLoader(packed_set, seed=2)]
    assert a == b and a != c


def test_resume_gives_exactly_the_uninterrupted_samples(packed_set):
    full = PackedLoader(packed_set, rank=1, world_size=2, seed=4)
    reference = [s["input_ids"].tolist() for _ in range(2) for s in full]  # two epochs
    first = PackedLoader(packed_set, rank=1, world_size=2, seed=4)
    got, it = [], iter(first)
    for _ in range(7):
        got.append(next(it)["input_ids"].tolist())
    state = json.loads(json.dumps(first.state_dict()))  # survives a checkpoint file
    resumed = PackedLoader(packed_set, rank=1, world_size=2, seed=4)
    resumed.load_state_dict(state)
    got += [s["input_ids"].tolist() for s in resumed]
    got += [s["input_ids"].tolist() for s in resumed]  # the next epoch
    assert got == reference
    with pytest.raises(ValueError, match="seed"):
        PackedLoader(packed_set, rank=1, world_size=2, seed=5).load_state_dict(state)


def test_loss_mask_file_is_applied_and_verified(tmp_path):
    build_set(tmp_path, mask=True)
    assert verify(tmp_path) == []
    loader = PackedLoader(tmp_path, shuffle=False)
    sample = next(iter(loader))
    n = sample["num_tokens"]
    assert sample["loss_mask"][:n].tolist() == [int(i % 3 != 0) for i in range(n)]
    mask_path = tmp_path / "part-00000.mask.bin"
    data = bytearray(mask_path.read_bytes())
    data[0] = 2
    mask_path.write_bytes(bytes(data))
    assert any("mask" in p for p in verify(tmp_path))


def test_sequences_json_matches_megatron_counts_and_is_verified(packed_set):
    seqs = json.loads((packed_set / schema.MEGATRON_SEQUENCES_FILE).read_text())
    index = megatron.read_index(packed_set / "part-00001.idx")
    assert seqs["part-00001"] == [len(index.sequence_lengths), len(index.document_indices)]
    (packed_set / schema.MEGATRON_SEQUENCES_FILE).write_text(json.dumps({**seqs, "part-00001": [1, 2]}))
    assert any(schema.MEGATRON_SEQUENCES_FILE in p for p in verify(packed_set))


def test_datatrove_reads_the_export_back(packed_set, tmp_path_factory):
    dataset_mod = pytest.importorskip("datatrove.utils.dataset")
    out = tmp_path_factory.mktemp("dt")
    export_datatrove(packed_set, out)
    ds = dataset_mod.DatatroveFolderDataset(str(out), seq_len=SEQ_LEN, token_size=2, return_positions=True)
    loader = PackedLoader(packed_set, shuffle=False)
    ours = list(loader)
    assert len(ds) == len(ours)
    for j, sample in enumerate(ours):
        theirs = ds[j]
        assert theirs["input_ids"][:SEQ_LEN].tolist() == sample["input_ids"].tolist()
        n = sample["num_tokens"]
        assert theirs["positions"][:n].tolist() == sample["position_ids"][:n].tolist()
    loss = np.fromfile(out / "part-00000.ds.loss", np.bool_)
    assert int(loss.sum()) == json.loads((packed_set / "manifest.json").read_text())["shards"][0]["tokens"]

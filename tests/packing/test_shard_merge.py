"""Merging packed shards below the split floor: the plan, the concatenated files, the resumable steps."""

from __future__ import annotations

import numpy as np
import pytest

from codecorpus import schema
from codecorpus.manifests import manifest as mf
from codecorpus.manifests import megatron
from codecorpus.packing import bodies as pack_bodies
from codecorpus.packing.pack import pack_documents
from codecorpus.packing.shards import merge_groups
from codecorpus.pipeline.bodies import JobContext

SEQ_LEN = 32


@pytest.mark.parametrize("seed", range(40))
def test_groups_cover_every_shard_in_order_and_reach_the_floor(seed):
    rng = np.random.default_rng(seed)
    floor = int(rng.integers(1, 60))
    counts = rng.integers(0, 3 * floor, int(rng.integers(0, 12))).tolist()
    groups = merge_groups(counts, floor)
    assert [i for g in groups for i in g] == list(range(len(counts)))
    held = [sum(counts[i] for i in g) for g in groups]
    if len(groups) > 1:
        assert min(held) >= floor
    else:
        assert groups == ([[*range(len(counts))]] if counts else [])
    # greedy: a group closes as soon as it holds the floor (only the last one takes a tail)
    for g in groups[:-1]:
        assert sum(counts[i] for i in g[:-1]) < floor


def test_a_small_tail_joins_the_group_before_it():
    assert merge_groups([520, 520, 3], 501) == [[0], [1, 2]]
    assert merge_groups([3, 520, 520], 501) == [[0, 1], [2]]
    assert merge_groups([41, 41, 1], 501) == [[0, 1, 2]]


def packed(seed: int, n_docs: int, mask: bool):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(1, 1000, int(rng.integers(2, 50))).astype(np.int64) for _ in range(n_docs)]
    p = pack_documents([f"d{seed}-{i}" for i in range(n_docs)], docs, ["Python"] * n_docs, ["src"] * n_docs,
                       SEQ_LEN, np.uint16)  # fmt: skip
    loss = (np.arange(len(p.tokens)) % 3 != 0).astype(np.uint8) if mask else None
    return p, loss


def write_shard(prefix, p, loss) -> mf.ShardRecord:
    files = megatron.write_indexed_dataset(prefix, p.tokens, p.sequence_lengths, p.document_indices)
    files["seg"] = megatron.write_segments(prefix, p.segments)
    if loss is not None:
        files["mask"] = megatron.write_loss_mask(prefix, loss)
    return mf.record_shard(prefix, files, seq_len=SEQ_LEN, loss_tokens=None if loss is None else int(loss.sum()))


@pytest.mark.parametrize("mask", [False, True])
def test_concatenated_shard_is_byte_identical_to_writing_the_whole(tmp_path, mask):
    import pyarrow as pa

    parts = [packed(s, n, mask) for s, n in ((0, 30), (1, 4), (2, 17))]
    sources = []
    for k, (p, loss) in enumerate(parts):
        sources.append(tmp_path / schema.shard_name(k))
        write_shard(sources[-1], p, loss)
    files = megatron.concat_shards(sources, tmp_path / "merged")

    whole = tmp_path / "whole"
    offsets = np.cumsum([0] + [len(p.sequence_lengths) for p, _ in parts[:-1]])
    docs = np.concatenate([[0]] + [p.document_indices[1:] + o for (p, _), o in zip(parts, offsets, strict=True)])
    expected = megatron.write_indexed_dataset(whole, np.concatenate([p.tokens for p, _ in parts]),
                                              np.concatenate([p.sequence_lengths for p, _ in parts]), docs)  # fmt: skip
    expected["seg"] = megatron.write_segments(whole, pa.concat_tables([p.segments for p, _ in parts]))
    if mask:
        expected["mask"] = megatron.write_loss_mask(whole, np.concatenate([m for _, m in parts]))
    assert sorted(files) == sorted(expected)
    for key in files:
        assert files[key]["sha256"] == expected[key]["sha256"] and files[key]["bytes"] == expected[key]["bytes"]
        assert megatron.shard_file(tmp_path / "merged", key).read_bytes() == megatron.shard_file(whole, key).read_bytes()

    from megatron.core.datasets.indexed_dataset import IndexedDataset

    ds = IndexedDataset(str(tmp_path / "merged"))
    assert len(ds) == sum(len(p.sequence_lengths) for p, _ in parts)
    assert len(ds.document_indices) - 1 == sum(p.sequences for p, _ in parts)


def test_concat_refuses_mixed_masks(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_shard(a, *packed(0, 5, True))
    write_shard(b, *packed(1, 5, False))
    with pytest.raises(ValueError, match="loss mask"):
        megatron.concat_shards([a, b], tmp_path / "m")


def test_merge_then_finish_twice_after_a_crash_mid_rename(tmp_path):
    """The merge task writes the staging shard and its marker; finish renames and removes. A crash
    between two renames is finished by the next run, and the set verifies."""
    run = schema.RunPaths(tmp_path / "run")
    set_dir = run.set_dir("s")
    stats = []
    for k, n in enumerate((700, 4, 9)):
        p, _ = packed(k, n, False)
        stats.append({"set": {"record": write_shard(set_dir / schema.shard_name(k), p, None).to_json()}})
    counts = [s["set"]["record"]["sequences"] for s in stats]
    assert counts[0] >= 501 > counts[1] + counts[2]
    kept, merges = pack_bodies.plan_merges(stats)
    assert kept == [] and [m.shards for m in merges] == [(0, 1, 2)]  # the small tail joins shard 0
    ctx = JobContext(run, "pack", "h")
    result = pack_bodies.merge_job(ctx, "s", SEQ_LEN, merges[0])
    staged_bin = megatron.shard_file(set_dir / "part-00000.merging", "bin")
    staged_bin.replace(megatron.shard_file(set_dir / "part-00000", "bin"))  # the crash: one rename done
    emitted = pack_bodies.finish_merges(run, "s", kept, merges, [result])
    again = pack_bodies.finish_merges(run, "s", kept, merges, [result])
    assert emitted.records == again.records
    assert [r.prefix for r in emitted.records] == ["part-00000"]
    assert emitted.merged == {"part-00000": dict(zip(["part-00000", "part-00001", "part-00002"], counts, strict=True))}
    listed = {info["path"] for r in emitted.records for info in r.files.values()}
    assert {p.name for p in set_dir.iterdir()} == listed
    m = mf.build_set_manifest(
        name="s", set_dir=set_dir, shards=emitted.records, tokenizer={"name": "t", "vocab_size": 1000, "eos_id": 0},
        token_dtype="uint16", seq_len=SEQ_LEN, packing={"algorithm": "bfd", "truncated_documents": 0},
        recipe_hash="x", provenance={},
    )  # fmt: skip
    mf.write_manifest(set_dir / schema.MANIFEST_NAME, m)
    assert mf.verify(set_dir) == []
    assert m["totals"]["sequences"] == sum(counts)

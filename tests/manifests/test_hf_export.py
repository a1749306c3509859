"""``manifest export-hf``: a set as Parquet rows for datasets/TRL, its refusals, and verify on an export."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from codecorpus import schema
from codecorpus.cli import app
from codecorpus.manifests import hf, megatron
from codecorpus.manifests import manifest as mf
from codecorpus.manifests.loader import PackedLoader
from codecorpus.packing.pack import pack_documents

SEQ_LEN = 64
EOS = 0
VOCAB = 1000
TEMPLATE_SHA = "ab" * 32


def build_set(set_dir, n_shards=2, docs_per_shard=60, seed=0, mask=True, vocab=VOCAB, dtype="uint16",
              train_starts=False):  # fmt: skip
    """A packed SFT-like set: documents of 2-40 tokens, the first token of each trained only if ``train_starts``."""
    rng = np.random.default_rng(seed)
    records = []
    for k in range(n_shards):
        docs = [rng.integers(1, min(vocab, 60000), rng.integers(2, 40)).astype(np.int64) for _ in range(docs_per_shard)]
        packed = pack_documents([f"d{k}-{i}" for i in range(len(docs))], docs, ["Python"] * len(docs),
                                ["src"] * len(docs), SEQ_LEN, np.dtype(dtype))  # fmt: skip
        prefix = set_dir / schema.shard_name(k)
        files = megatron.write_indexed_dataset(prefix, packed.tokens, packed.sequence_lengths, packed.document_indices)
        files["seg"] = megatron.write_segments(prefix, packed.segments)
        loss = None
        if mask:
            m = rng.integers(0, 2, len(packed.tokens)).astype(np.uint8)
            starts = np.concatenate([[0], np.cumsum(packed.sequence_lengths)[:-1]])
            m[starts] = 1 if train_starts else 0
            files["mask"] = megatron.write_loss_mask(prefix, m)
            loss = int(m.sum())
        records.append(mf.record_shard(prefix, files, seq_len=SEQ_LEN, loss_tokens=loss))
    tokenizer = {"name": "test", "vocab_size": vocab, "eos_id": EOS, "special_tokens": {"<eos>": EOS},
                 "chat_template_sha256": TEMPLATE_SHA}  # fmt: skip
    m = mf.build_set_manifest(
        name=set_dir.name, set_dir=set_dir, shards=records, tokenizer=tokenizer, token_dtype=dtype,
        seq_len=SEQ_LEN, packing={"algorithm": "bfd", "truncated_documents": 0}, recipe_hash="r" * 8,
        provenance={},
        extra={"sft": {"chat_template": {"source": "builtin", "sha256": TEMPLATE_SHA}, "render": {"train_on_system": False}}},
    )  # fmt: skip
    mf.write_manifest(set_dir / schema.MANIFEST_NAME, m)
    return m


@pytest.fixture
def sft_set(tmp_path):
    set_dir = tmp_path / "sets" / "sft"
    set_dir.mkdir(parents=True)
    build_set(set_dir)
    return set_dir


def read_rows(out_dir) -> pa.Table:
    files = sorted((out_dir / hf.DATA_DIR).glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files])


def set_sequences(set_dir) -> list[dict]:
    """Every packed sequence of the set, unpadded, as the project's own loader reads it."""
    loader = PackedLoader(set_dir, shuffle=False)
    rows = []
    for j in range(loader.total_sequences):
        s = loader.sequence(j)
        n = s["num_tokens"]
        cu = s["cu_seqlens"].tolist()
        rows.append({"input_ids": s["input_ids"][:n].tolist(), "mask": s["loss_mask"][:n].tolist(),
                     "lengths": np.diff([c for c in cu if c <= n]).tolist(),
                     "positions": s["position_ids"][:n].tolist()})  # fmt: skip
    return rows


def test_packed_rows_follow_trl_conventions_and_the_sets_mask(sft_set, tmp_path):
    out = tmp_path / "export"
    sidecar = hf.export_hf(sft_set, out)
    m = json.loads((sft_set / schema.MANIFEST_NAME).read_text())
    rows = read_rows(out)
    assert [f["path"] for f in sidecar["files"]] == ["data/train-00000-of-00002.parquet",
                                                      "data/train-00001-of-00002.parquet"]  # fmt: skip
    assert rows.column_names == ["input_ids", "completion_mask", "position_ids", "seq_lengths", "doc_ids"]
    expected = set_sequences(sft_set)
    assert rows.num_rows == m["totals"]["sequences"] == len(expected)
    for row, want in zip(rows.to_pylist(), expected, strict=True):
        assert row["input_ids"] == want["input_ids"]
        assert row["completion_mask"] == want["mask"]
        assert row["seq_lengths"] == want["lengths"] and sum(row["seq_lengths"]) == len(row["input_ids"])
        assert row["position_ids"] == want["positions"]
        starts = np.cumsum([0, *row["seq_lengths"][:-1]])
        assert [row["position_ids"][s] for s in starts] == [0] * len(starts)
        assert len(row["doc_ids"]) == len(row["seq_lengths"])
    assert any(len(r) > 1 for r in rows.column("seq_lengths").to_pylist())  # rows do hold several segments
    assert sidecar["counts"] == {"rows": m["totals"]["sequences"], "tokens": m["totals"]["tokens"],
                                 "segments": m["totals"]["segments"], "loss_tokens": m["totals"]["loss_tokens"],
                                 "trained_segment_starts": 0}  # fmt: skip
    # provenance: the tokenizer and chat template, in the sidecar and in every file's schema
    assert sidecar["tokenizer"] == m["tokenizer"] and sidecar["chat_template"]["sha256"] == TEMPLATE_SHA
    assert sidecar["set"]["manifest_sha256"] == mf.sha256_file(sft_set / schema.MANIFEST_NAME)
    assert sidecar["set"]["path"] == "../sets/sft" and sidecar["trl"]["completion_only_loss"] is True
    meta = json.loads(pq.read_schema(out / sidecar["files"][0]["path"]).metadata[b"codecorpus"])
    assert meta["tokenizer"]["chat_template_sha256"] == TEMPLATE_SHA and meta["set"]["name"] == "sft"
    assert json.loads((out / hf.EXPORT_NAME).read_text()) == sidecar


def test_datasets_loads_the_export_as_a_train_split(sft_set, tmp_path):
    from datasets import load_dataset

    out = tmp_path / "export"
    sidecar = hf.export_hf(sft_set, out)
    by_folder = load_dataset(str(out), split="train", cache_dir=str(tmp_path / "cache"))
    by_files = load_dataset("parquet", data_files=str(out / "data" / "*.parquet"), split="train",
                            cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert len(by_folder) == len(by_files) == sidecar["counts"]["rows"]
    assert str(by_folder.features["input_ids"].feature.dtype) == "int32"
    assert by_folder[3]["input_ids"] == read_rows(out).column("input_ids")[3].as_py()


def test_per_example_rows_are_the_sets_segments(sft_set, tmp_path):
    out = tmp_path / "export"
    sidecar = hf.export_hf(sft_set, out, per_example=True)
    m = json.loads((sft_set / schema.MANIFEST_NAME).read_text())
    rows = read_rows(out)
    assert rows.num_rows == m["totals"]["segments"] == sidecar["counts"]["rows"]
    assert rows.column_names == ["input_ids", "completion_mask", "position_ids", "seq_lengths", "doc_id", "doc_offset"]
    flat_set = [t for r in set_sequences(sft_set) for t in r["input_ids"]]
    assert [t for r in rows.column("input_ids").to_pylist() for t in r] == flat_set
    for r in rows.to_pylist():
        assert r["seq_lengths"] == [len(r["input_ids"])] and r["position_ids"] == list(range(len(r["input_ids"])))
    segs = pa.concat_tables([megatron.read_segments(sft_set / schema.shard_name(k)) for k in range(2)])
    assert rows.column("doc_id").to_pylist() == segs.column(schema.SEG_DOC_ID).to_pylist()
    assert sidecar["mode"] == hf.PER_EXAMPLE and hf.verify_export(out) == []


def test_same_set_same_bytes_and_a_rerun_rewrites_its_own_export(sft_set, tmp_path):
    a, b = tmp_path / "a" / "x", tmp_path / "b" / "x"
    hf.export_hf(sft_set, a)
    hf.export_hf(sft_set, b)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    hf.export_hf(sft_set, a)  # the same export again: allowed, same bytes
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert not [p for p in (tmp_path / "a").iterdir() if p.name != "x"]  # no staging folder left


def test_a_set_without_masks_is_refused_unless_all_ones(tmp_path):
    set_dir = tmp_path / "pretrain"
    set_dir.mkdir()
    m = build_set(set_dir, mask=False)
    with pytest.raises(hf.ExportError, match=r"no loss mask.*--all-ones-mask"):
        hf.export_hf(set_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    result = CliRunner().invoke(app, ["manifest", "export-hf", str(set_dir), str(tmp_path / "out")])
    assert result.exit_code == 2 and "--all-ones-mask" in result.output
    sidecar = hf.export_hf(set_dir, tmp_path / "out", all_ones_mask=True)
    assert sidecar["counts"]["loss_tokens"] == m["totals"]["tokens"] == m["totals"]["loss_tokens"]
    assert set(read_rows(tmp_path / "out").column("completion_mask").combine_chunks().flatten().to_pylist()) == {1}
    assert hf.verify_export(tmp_path / "out") == []


def test_a_vocabulary_larger_than_the_dtype_is_refused(tmp_path):
    set_dir = tmp_path / "big"
    set_dir.mkdir()
    build_set(set_dir, vocab=151_851, dtype="int32")
    with pytest.raises(hf.ExportError, match=r"151,851 ids, more than uint16 holds \(65,536\)"):
        hf.export_hf(set_dir, tmp_path / "out", id_dtype="uint16")
    hf.export_hf(set_dir, tmp_path / "out")  # int32 holds it
    result = CliRunner().invoke(app, ["manifest", "export-hf", "--id-dtype", "float32", str(set_dir), str(tmp_path / "f")])
    assert result.exit_code == 2 and "is not one of int32, int64, uint16, uint32" in result.output
    # a manifest whose vocabulary its own token dtype cannot hold is a damaged set
    small = tmp_path / "small"
    small.mkdir()
    m = build_set(small)
    m["tokenizer"]["vocab_size"] = 70_000
    mf.write_manifest(small / schema.MANIFEST_NAME, m)
    result = CliRunner().invoke(app, ["manifest", "export-hf", str(small), str(tmp_path / "out2")])
    assert result.exit_code == 2 and "more than the set's uint16 tokens hold" in result.output


def test_an_output_folder_holding_something_else_is_refused(sft_set, tmp_path):
    other = tmp_path / "sets" / "other"
    other.mkdir()
    build_set(other, seed=1)
    out = tmp_path / "out"
    hf.export_hf(other, out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(hf.ExportError, match="holds another export \\(set 'other'"):
        hf.export_hf(sft_set, out)
    with pytest.raises(hf.ExportError, match="holds another export"):
        hf.export_hf(other, out, per_example=True)  # same set, another mode: another export
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["manifest", "export-hf", str(sft_set), str(stray)])
    assert result.exit_code == 2 and "no export" in result.output and (stray / "notes.txt").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert hf.export_hf(sft_set, empty)["counts"]["rows"] > 0


def _rewrite(path, table):
    pq.write_table(table.replace_schema_metadata(pq.read_schema(path).metadata), path)


def test_verify_recounts_an_export_against_the_set_manifest(sft_set, tmp_path):
    out = tmp_path / "export"
    sidecar = hf.export_hf(sft_set, out)
    result = CliRunner().invoke(app, ["manifest", "verify", str(out)])
    assert result.exit_code == 0, result.output
    assert "export of set sft" in CliRunner().invoke(app, ["manifest", "show", str(out)]).output
    first = out / sidecar["files"][0]["path"]
    table = pq.read_table(first)

    # a lost row: rows, tokens and loss tokens no longer add up to the set manifest's
    _rewrite(first, table.slice(1))
    problems = hf.verify_export(out)
    assert any(p.startswith("export rows: expected") for p in problems)
    assert any(p.startswith("export tokens: expected") for p in problems)
    assert any(p.startswith(f"{sidecar['files'][0]['path']}: bytes: expected") for p in problems)
    result = CliRunner().invoke(app, ["manifest", "verify", str(out)])
    assert result.exit_code == 1 and "export rows" in result.output

    # one loss flag flipped: same rows and tokens, the loss count and the content differ
    masks = table.column("completion_mask").to_pylist()
    masks[0][0] = 1 - masks[0][0]
    flipped = table.set_column(1, "completion_mask", pa.array(masks, pa.list_(pa.int8())))
    _rewrite(first, flipped)
    problems = hf.verify_export(out)
    assert any(p.startswith("export loss_tokens") for p in problems)
    assert any("completion_mask differs from the loss mask of shard part-00000" in p for p in problems)

    # positions that do not restart at a segment
    positions = table.column("position_ids").to_pylist()
    row = next(i for i, s in enumerate(table.column("seq_lengths").to_pylist()) if len(s) > 1)
    positions[row] = list(range(len(positions[row])))
    _rewrite(first, table.set_column(2, "position_ids", pa.array(positions, pa.list_(pa.int32()))))
    assert any("do not restart at every segment" in p for p in hf.verify_export(out))


def test_verify_without_the_set_uses_the_recorded_totals(sft_set, tmp_path):
    out = tmp_path / "export"
    hf.export_hf(sft_set, out)
    moved = tmp_path / "moved"
    shutil.move(sft_set, moved)
    assert hf.verify_export(out) == []
    sidecar = json.loads((out / hf.EXPORT_NAME).read_text())
    sidecar["set"]["totals"]["loss_tokens"] += 1
    (out / hf.EXPORT_NAME).write_text(json.dumps(sidecar))
    assert any(p.startswith("export loss_tokens: expected") for p in hf.verify_export(out))
    shutil.move(moved, sft_set)  # the set is back: its manifest's totals disagree with the sidecar's
    assert any("set.totals" in p for p in hf.verify_export(out))


def test_segments_that_train_their_first_token_are_counted(tmp_path):
    set_dir = tmp_path / "system-trained"
    set_dir.mkdir()
    m = build_set(set_dir, train_starts=True)
    result = CliRunner().invoke(app, ["manifest", "export-hf", str(set_dir), str(tmp_path / "out")])
    assert result.exit_code == 0 and "never trains a segment's first token" in result.output
    sidecar = json.loads((tmp_path / "out" / hf.EXPORT_NAME).read_text())
    assert sidecar["counts"]["trained_segment_starts"] == m["totals"]["segments"]
    assert hf.verify_export(tmp_path / "out") == []


def test_row_groups_bound_a_readers_batch_without_changing_the_rows(sft_set, tmp_path, monkeypatch):
    hf.export_hf(sft_set, tmp_path / "one")
    monkeypatch.setattr(hf, "BATCH_TOKENS", 100)
    sidecar = hf.export_hf(sft_set, tmp_path / "many")
    path = tmp_path / "many" / sidecar["files"][0]["path"]
    assert pq.ParquetFile(path).metadata.num_row_groups > 5
    assert read_rows(tmp_path / "many").equals(read_rows(tmp_path / "one"))
    assert hf.verify_export(tmp_path / "many") == []

"""Set and run manifests: contents, determinism, and verify catching each kind of damage."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.manifests import (
    build_run_manifest,
    build_set_manifest,
    read_segments,
    record_shard,
    show,
    verify,
    write_indexed_dataset,
    write_manifest,
    write_run_manifest,
    write_segments,
)
from codecorpus.manifests.manifest import manifest_bytes
from codecorpus.storage.atomic import sha256_file

SEQ_LEN = 64
VOCAB = 1000
LANGS = ("python", "rust", "go")
SOURCES = ("github", "docs")
TOKENIZER = {
    "name": "test-bpe",
    "files": {"tokenizer.json": "0" * 64},
    "vocab_size": VOCAB,
    "special_tokens": {"<|endoftext|>": 0},
    "eos_id": 0,
}


def random_documents(seed: int, n: int) -> list[tuple[str, np.ndarray, str, str]]:
    rng = np.random.default_rng(seed)
    return [
        (
            f"doc{seed}-{i}",
            rng.integers(1, VOCAB, int(rng.integers(1, 3 * SEQ_LEN))),
            LANGS[i % 3],
            SOURCES[i % 2],
        )
        for i in range(n)
    ]


def write_packed_shard(prefix: Path, docs, seq_len: int = SEQ_LEN) -> dict:
    """Cut documents into pieces of <= seq_len and pack them in order (next-fit)."""
    pieces = [
        (doc_id, off, toks[off : off + seq_len], lang, src)
        for doc_id, toks, lang, src in docs
        for off in range(0, len(toks), seq_len)
    ]
    doc_indices, fill = [0], 0
    for i, piece in enumerate(pieces):
        if fill + len(piece[2]) > seq_len:
            doc_indices.append(i)
            fill = 0
        fill += len(piece[2])
    if pieces:
        doc_indices.append(len(pieces))
    lengths = np.array([len(p[2]) for p in pieces], np.int32)
    files = write_indexed_dataset(
        prefix,
        np.concatenate([np.zeros(0, np.uint16)] + [p[2] for p in pieces]).astype(np.uint16),
        lengths,
        np.array(doc_indices),
    )
    columns = (schema.SEG_DOC_ID, schema.SEG_DOC_OFFSET, None, schema.LANG, schema.SOURCE)
    table = pa.table({c: [p[k] for p in pieces] for k, c in enumerate(columns) if c})
    files["seg"] = write_segments(prefix, table.append_column(schema.SEG_LENGTH, pa.array(lengths)))
    return files


def build_set(set_dir: Path, seq_len: int = SEQ_LEN) -> tuple[Path, list]:
    all_docs, records = [], []
    for shard in range(3):
        docs = random_documents(shard, 450 + 5 * shard)  # > 501 packed sequences: the split floor
        prefix = set_dir / schema.shard_name(shard)
        records.append(record_shard(prefix, write_packed_shard(prefix, docs), seq_len=SEQ_LEN))
        all_docs += docs
    manifest = build_set_manifest(
        name="short-64",
        set_dir=set_dir,
        shards=records[::-1],  # any order in, prefix order out
        tokenizer=TOKENIZER,
        token_dtype="uint16",
        seq_len=seq_len,
        packing={"algorithm": "next-fit", "truncated_documents": 0},
        recipe_hash="abc123",
        provenance={"sources": list(SOURCES), "licenses": ["MIT"]},
    )
    path = set_dir / schema.MANIFEST_NAME
    write_manifest(path, manifest)
    return path, all_docs


@pytest.fixture
def run(tmp_path) -> tuple[Path, Path, list]:
    paths = schema.RunPaths(tmp_path / "run")
    set_manifest, docs = build_set(paths.set_dir("short-64"))
    write_run_manifest(paths.root, build_run_manifest(paths.root, [set_manifest]))
    return paths.root, set_manifest, docs


def edit_json(path: Path, change) -> None:
    m = json.loads(path.read_text())
    change(m)
    path.write_bytes(manifest_bytes(m))


def test_good_set_and_run_verify_clean(run):
    run_dir, set_manifest, _ = run
    assert verify(set_manifest) == []
    assert verify(set_manifest.parent) == []
    assert verify(run_dir) == []
    assert verify(run_dir / schema.MANIFEST_NAME) == []


def test_manifest_counts_match_the_source_documents(run):
    _, set_manifest, docs = run
    m = json.loads(set_manifest.read_text())
    n_tokens = sum(len(toks) for _, toks, _, _ in docs)
    n_pieces = sum(-(-len(toks) // SEQ_LEN) for _, toks, _, _ in docs)
    by_lang, by_source = Counter(), Counter()
    for _, toks, lang, src in docs:
        by_lang[lang] += len(toks)
        by_source[src] += len(toks)
    assert m["totals"]["tokens"] == n_tokens == m["totals"]["loss_tokens"]
    assert m["totals"]["documents"] == len(docs)
    assert m["totals"]["segments"] == n_pieces == m["packing"]["segments"]
    seqs = m["totals"]["sequences"]
    assert (
        m["totals"]["padding_tokens"] == seqs * SEQ_LEN - n_tokens == m["packing"]["padding_tokens"]
    )
    assert m["tokens_by_lang"] == dict(by_lang)
    assert m["tokens_by_source"] == dict(by_source)
    assert [s["prefix"] for s in m["shards"]] == ["part-00000", "part-00001", "part-00002"]
    assert m["shards"][1]["files"]["bin"]["path"] == "part-00001.bin"
    data_path = m["megatron"]["data_path"]
    assert data_path[1::2] == ["part-00000", "part-00001", "part-00002"]
    assert sum(float(w) for w in data_path[::2]) == pytest.approx(1.0, abs=1e-5)
    assert float(data_path[0]) == pytest.approx(m["shards"][0]["tokens"] / n_tokens, abs=1e-6)
    assert (m["kind"], m["format_version"], m["token_dtype"]) == ("codecorpus.set", 1, "uint16")


def test_manifests_are_deterministic_and_location_free(tmp_path):
    a, _ = build_set(tmp_path / "a" / "short-64")
    b, _ = build_set(tmp_path / "elsewhere" / "b" / "short-64")
    assert a.read_bytes() == b.read_bytes()
    text = a.read_text()
    assert str(tmp_path) not in text
    assert text == manifest_bytes(json.loads(text)).decode()  # sorted keys, indent 2


def test_run_manifest_lists_sets_by_relative_path(run):
    run_dir, set_manifest, _ = run
    m = json.loads((run_dir / schema.MANIFEST_NAME).read_text())
    assert m["kind"] == "codecorpus.run"
    entry = m["sets"]["short-64"]
    assert entry["path"] == "shards/short-64/manifest.json"
    assert entry["sha256"] == sha256_file(set_manifest)
    assert entry["totals"] == json.loads(set_manifest.read_text())["totals"]


def flip_byte(path: Path, at: int = 10) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def only(problems: list[str], needle: str) -> str:
    hits = [p for p in problems if needle in p]
    assert hits, f"no problem mentions {needle!r}: {problems}"
    return hits[0]


def test_flipped_byte_in_bin(run):
    _, set_manifest, _ = run
    flip_byte(set_manifest.parent / "part-00001.bin")
    problems = verify(set_manifest)
    msg = only(problems, "part-00001.bin: sha256: expected ")
    assert msg.endswith(f"found {sha256_file(set_manifest.parent / 'part-00001.bin')}")
    assert not any("part-00000" in p or "part-00002" in p for p in problems)


def test_truncated_bin(run):
    _, set_manifest, _ = run
    path = set_manifest.parent / "part-00002.bin"
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-2])
    problems = verify(set_manifest)
    only(problems, f"part-00002.bin: bytes: expected {size} (manifest), found {size - 2}")
    only(problems, f"part-00002.bin: size is {size - 2} bytes, the idx needs {size}")


def test_missing_idx(run):
    _, set_manifest, _ = run
    (set_manifest.parent / "part-00000.idx").unlink()
    only(verify(set_manifest), "part-00000.idx: missing (listed as shard part-00000 files.idx)")


def test_corrupt_idx_header(run):
    _, set_manifest, _ = run
    flip_byte(set_manifest.parent / "part-00000.idx", at=0)
    problems = verify(set_manifest)
    only(problems, "part-00000.idx: sha256: expected")
    only(problems, "part-00000.idx: bad magic")


def test_edited_total_tokens(run):
    _, set_manifest, _ = run
    tokens = json.loads(set_manifest.read_text())["totals"]["tokens"]
    edit_json(set_manifest, lambda m: m["totals"].update(tokens=tokens + 1))
    assert verify(set_manifest) == [
        f"manifest.json totals.tokens: expected {tokens} (recounted from the shard files), found {tokens + 1}"
    ]


def test_edited_shard_documents(run):
    _, set_manifest, _ = run
    docs = json.loads(set_manifest.read_text())["shards"][1]["documents"]
    edit_json(set_manifest, lambda m: m["shards"][1].update(documents=docs + 1))
    problems = verify(set_manifest)
    assert (
        f"manifest.json shards[1] (part-00001).documents: expected {docs} (recounted from part-00001.*), found {docs + 1}"
        in problems
    )


def test_edited_tokens_by_lang(run):
    _, set_manifest, _ = run
    edit_json(
        set_manifest, lambda m: m["tokens_by_lang"].update(python=m["tokens_by_lang"]["python"] - 5)
    )
    msg = only(verify(set_manifest), "manifest.json.tokens_by_lang: expected {")
    assert "'python': " in msg


def test_edited_data_path_weight(run):
    _, set_manifest, _ = run
    edit_json(set_manifest, lambda m: m["megatron"]["data_path"].__setitem__(0, "0.999999"))
    only(verify(set_manifest), "manifest.json.megatron: expected {'data_path': [")


def test_edited_file_size_in_manifest(run):
    _, set_manifest, _ = run
    edit_json(set_manifest, lambda m: m["shards"][0]["files"]["seg"].update(bytes=1))
    only(verify(set_manifest), "part-00000.seg.parquet: bytes: expected 1 (manifest), found ")


def test_segment_table_disagreeing_with_idx(run):
    _, set_manifest, _ = run
    prefix = set_manifest.parent / "part-00001"
    seg = read_segments(prefix)
    lengths = seg[schema.SEG_LENGTH].to_numpy().copy()
    lengths[4] += 1
    seg = seg.set_column(2, schema.SEG_LENGTH, pa.array(lengths, pa.int32()))
    info = write_segments(prefix, seg)  # a consistent hash: only the re-count can tell
    edit_json(set_manifest, lambda m: m["shards"][1]["files"].update(seg=info))
    problems = verify(set_manifest)
    only(
        problems,
        f"part-00001.seg.parquet: length[4]: expected {lengths[4] - 1} (idx sequence_lengths), found {lengths[4]} (1 rows differ)",
    )
    only(problems, "tokens_by_lang: expected")


def test_packed_sequence_longer_than_seq_len(run):
    _, set_manifest, _ = run
    edit_json(set_manifest, lambda m: m.update(seq_len=SEQ_LEN // 2))
    only(
        verify(set_manifest),
        f"part-00000.idx: packed sequence 0 has {SEQ_LEN} tokens, more than seq_len {SEQ_LEN // 2}",
    )


def test_token_outside_vocabulary(run):
    _, set_manifest, _ = run
    edit_json(set_manifest, lambda m: m["tokenizer"].update(vocab_size=10))
    problems = verify(set_manifest)
    only(problems, "part-00000.bin: token ids span [")
    only(problems, "outside the vocabulary [0, 10)")


def test_wrong_kind(run):
    _, set_manifest, _ = run
    edit_json(set_manifest, lambda m: m.update(kind="something"))
    assert "found 'something'" in verify(set_manifest)[0]


def test_run_detects_edited_set_manifest(run):
    run_dir, set_manifest, _ = run
    edit_json(set_manifest, lambda m: m["provenance"].update(licenses=["GPL-3.0"]))
    assert verify(set_manifest) == []  # provenance cannot be re-counted ...
    msg = only(
        verify(run_dir), "shards/short-64/manifest.json: sha256: expected "
    )  # ... but it is hashed
    assert "(run manifest)" in msg


def test_run_detects_missing_set(run):
    run_dir, set_manifest, _ = run
    set_manifest.unlink()
    assert verify(run_dir) == [
        "manifest.json: sets.short-64: shards/short-64/manifest.json is missing"
    ]


def test_build_set_manifest_rejects_bad_input(run):
    _, set_manifest, _ = run
    set_dir = set_manifest.parent
    records = [record_shard(set_dir / "part-00000", {}, seq_len=SEQ_LEN)]
    kwargs = dict(
        name="x", set_dir=set_dir, tokenizer=TOKENIZER, token_dtype="uint16", seq_len=SEQ_LEN,
        recipe_hash="h", provenance={}, packing={"algorithm": "a", "truncated_documents": 0},
    )  # fmt: skip
    with pytest.raises(ValueError, match="lists no 'bin' file"):
        build_set_manifest(shards=records, **kwargs)
    with pytest.raises(ValueError, match=r"packing lacks \['truncated_documents'\]"):
        build_set_manifest(shards=[], **{**kwargs, "packing": {"algorithm": "a"}})
    with pytest.raises(ValueError, match=r"packing\.sequences is 5 but the shards add up to 0"):
        build_set_manifest(
            shards=[], **{**kwargs, "packing": {**kwargs["packing"], "sequences": 5}}
        )
    with pytest.raises(ValueError, match="not a Megatron dtype"):
        build_set_manifest(shards=[], **{**kwargs, "token_dtype": "uint32"})


def test_record_shard_refuses_inconsistent_shard(run):
    _, set_manifest, _ = run
    prefix = set_manifest.parent / "part-00000"
    Path(f"{prefix}.bin").write_bytes(Path(f"{prefix}.bin").read_bytes()[:-2])
    with pytest.raises(ValueError, match=r"part-00000\.bin: size is"):
        record_shard(prefix, {}, seq_len=SEQ_LEN)


def test_show_summarises_a_set_and_a_run(run):
    run_dir, set_manifest, _ = run
    m = json.loads(set_manifest.read_text())
    text = show(set_manifest.parent)
    assert "set short-64" in text
    assert "test-bpe" in text
    assert f"uint16  seq_len {SEQ_LEN}  packing next-fit" in text
    assert f"tokens      {m['totals']['tokens']:,}" in text
    assert "python" in text
    assert "shards      3" in text
    assert " ".join(m["megatron"]["data_path"]) in text
    assert show(run_dir).startswith("run ") and "set short-64" in show(run_dir)


def test_empty_shard_is_a_valid_set(tmp_path):
    prefix = tmp_path / "part-00000"
    files = write_packed_shard(prefix, [])
    record = record_shard(prefix, files, seq_len=SEQ_LEN)
    assert (record.tokens, record.documents, record.sequences, record.tokens_by_lang) == (
        0,
        0,
        0,
        {},
    )
    manifest = build_set_manifest(
        name="empty", set_dir=tmp_path, shards=[record], tokenizer=TOKENIZER, token_dtype="uint16",
        seq_len=SEQ_LEN, packing={"algorithm": "a", "truncated_documents": 0}, recipe_hash="h",
        provenance={},
    )  # fmt: skip
    assert manifest["megatron"]["data_path"] == []
    write_manifest(tmp_path / schema.MANIFEST_NAME, manifest)
    assert verify(tmp_path) == []

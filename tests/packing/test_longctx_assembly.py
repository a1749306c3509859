"""Repository documents: markers, continuation pieces, upsampling, short share, packing stats."""

from __future__ import annotations

import numpy as np
import pytest

from codecorpus.config import LongContextConfig, OutputSet, TokenizerConfig
from codecorpus.packing import longctx
from codecorpus.tokenize.tokenizer import load_tokenizer, with_set_tokens


@pytest.fixture(scope="module")
def tok():
    cfg = with_set_tokens(TokenizerConfig(builtin="gpt2"), [OutputSet(name="l", kind="long")])
    return load_tokenizer(cfg)


def repo_files(tok, texts: dict[str, str]) -> list[longctx.RepoFile]:
    enc = tok.encode_batch(list(texts.values()))
    return [longctx.RepoFile(p, "Python", t, np.asarray(e, np.uint32))
            for (p, t), e in zip(texts.items(), enc, strict=True)]  # fmt: skip


FILES = {
    "pkg/main.py": "from pkg.core import run\n\nrun()\n",
    "pkg/core.py": "def run():\n    return 1\n" * 30,
    "pkg/extra.py": "X = 1\n",
}


def test_special_markers_in_dependency_order_round_trip(tok):
    cfg = LongContextConfig()
    doc = longctx.assemble_repository("r1", "src", "org/repo", repo_files(tok, FILES), tok, cfg, 4096, True)
    assert len(doc.pieces) == 1
    text = tok.decode(doc.pieces[0])
    expected = (
        "<|repo_name|>org/repo\n"
        + "<|file_sep|>pkg/core.py\n" + FILES["pkg/core.py"]
        + "<|file_sep|>pkg/extra.py\n" + FILES["pkg/extra.py"]
        + "<|file_sep|>pkg/main.py\n" + FILES["pkg/main.py"]
        + "<|endoftext|>"
    )  # fmt: skip
    assert text == expected


def test_text_markers_are_path_comments(tok):
    cfg = LongContextConfig(markers="text")
    files = repo_files(tok, {"a.js": "let a = 1;\n", "b.py": "b = 2\n"})
    doc = longctx.assemble_repository("r", "s", "org/r", files, tok, cfg, 4096, False)
    assert tok.decode(doc.pieces[0]) == "# repo: org/r\n// path: a.js\nlet a = 1;\n# path: b.py\nb = 2\n"


def test_long_repository_splits_at_file_boundaries_with_repeated_repo_marker(tok):
    cfg = LongContextConfig()
    files = repo_files(tok, {f"m{i:02d}.py": f"value_{i} = {i}\n" * 12 for i in range(12)})
    seq_len = 128
    doc = longctx.assemble_repository("r", "s", "org/big", files, tok, cfg, seq_len, True)
    assert len(doc.pieces) > 2 and doc.split_files == 0
    repo_id = tok.special_tokens["<|repo_name|>"]
    file_id = tok.special_tokens["<|file_sep|>"]
    for piece in doc.pieces:
        assert len(piece) <= seq_len
        assert piece[0] == repo_id
        assert tok.decode(piece).startswith("<|repo_name|>org/big\n<|file_sep|>")  # cut at a file boundary
    # the pieces without their repeated headers give back the repository document
    header = len(tok.encode_batch(["org/big\n"])[0]) + 1
    joined = np.concatenate([doc.pieces[0]] + [p[header:] for p in doc.pieces[1:]])
    body = "".join(f"<|file_sep|>{f.path}\n{f.text}" for f in files)
    assert tok.decode(joined) == "<|repo_name|>org/big\n" + body + "<|endoftext|>"
    assert file_id in doc.pieces[1]


def test_a_file_longer_than_a_sequence_is_cut_and_its_marker_repeated(tok):
    cfg = LongContextConfig()
    files = repo_files(tok, {"huge.py": "x = 1\n" * 200})
    doc = longctx.assemble_repository("r", "s", "o/h", files, tok, cfg, 64, True)
    assert doc.split_files == 1 and len(doc.pieces) > 3
    for piece in doc.pieces:
        assert len(piece) <= 64
        assert tok.decode(piece).startswith("<|repo_name|>o/h\n<|file_sep|>huge.py\n")


def doc_of(n_tokens: int, repo: str, source: str = "s") -> longctx.RepoDocument:
    return longctx.RepoDocument(f"id-{repo}", source, repo, "Python", [np.ones(n_tokens, np.uint32)], 1)


def test_upsampling_repeats_long_documents_of_named_sources():
    cfg = LongContextConfig(upsample={"s": 3.0}, upsample_min_tokens=100)
    docs, added = longctx.upsample([doc_of(200, "a"), doc_of(50, "b"), doc_of(500, "c", "t")], cfg, 1)
    assert added == 2
    assert [d.doc_id for d in docs] == ["id-a", "id-a#1", "id-a#2", "id-b", "id-c"]
    frac = LongContextConfig(upsample={"s": 1.5}, upsample_min_tokens=1)
    many = [doc_of(10, f"r{i}") for i in range(400)]
    _, added = longctx.upsample(many, frac, 7)
    assert 140 < added < 260  # about half the documents get a second copy
    assert longctx.upsample(many, frac, 7)[1] == added  # seeded


def test_short_document_share_is_capped():
    cfg = LongContextConfig(short_doc_tokens=100, short_doc_share=0.2)
    docs = [doc_of(1000, "big")] + [doc_of(50, f"s{i}") for i in range(20)]
    kept, left = longctx.limit_short_documents(docs, cfg, 3)
    short = sum(d.tokens for d in kept if d.tokens < 100)
    assert short <= 0.25 * 1000 and short >= 0.25 * 1000 - 50
    assert len(kept) + len(left) == len(docs)


def test_pack_repositories_respects_capacity_and_counts_single_repo_sequences():
    docs = [
        longctx.RepoDocument("a", "s", "a", "Python", [np.ones(100, np.uint32), np.ones(30, np.uint32)], 2),
        doc_of(60, "b"),
        doc_of(10, "c"),
    ]
    packed = longctx.pack_repositories(docs, 100)
    lengths = np.diff(np.concatenate([[0], np.cumsum(packed.sequence_lengths)])[packed.document_indices])
    assert lengths.max() <= 100 and lengths.sum() == 200
    assert packed.stats["sequences"] == 2
    assert packed.stats["single_repo_sequences"] == 1  # the full piece of a; the rest mixes a, b, c
    assert packed.stats["single_repo_tokens"] == 100

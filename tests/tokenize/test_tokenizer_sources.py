"""Cached Hugging Face tokenizer names (offline) and special tokens added for the sets."""

from __future__ import annotations

import shutil

import pytest

from codecorpus.config import (
    FimConfig,
    OutputSet,
    RecipeError,
    TokenizerConfig,
    TrainTokenizerConfig,
)
from codecorpus.tokenize.tokenizer import load_tokenizer, train_tokenizer, with_set_tokens

TEXTS = ["def add(a, b):\n    return a + b\n" * 20, "import os\nprint(os.getcwd())\n" * 20]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return train_tokenizer(TEXTS, TrainTokenizerConfig(vocab_size=600, min_frequency=1), tmp_path_factory.mktemp("tok"))


def fake_hf_cache(root, repo_id: str, source) -> None:
    """The hub cache layout huggingface_hub writes: refs/main -> snapshots/<commit>/tokenizer.json."""
    repo_dir = root / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text(commit)
    snap = repo_dir / "snapshots" / commit
    snap.mkdir(parents=True)
    shutil.copy(source, snap / "tokenizer.json")


def test_cached_hf_name_loads_offline(tmp_path, trained):
    fake_hf_cache(tmp_path, "acme/coder", trained)
    tok = load_tokenizer(TokenizerConfig(hf_name="acme/coder", hf_cache=str(tmp_path)))
    by_path = load_tokenizer(TokenizerConfig(path=str(trained)))
    assert tok.name == "acme/coder"
    assert tok.encode_batch(TEXTS) == by_path.encode_batch(TEXTS)
    assert tok.fingerprint()["files"] == by_path.fingerprint()["files"]


def test_missing_hf_name_is_a_clear_error_not_a_download(tmp_path):
    with pytest.raises(RecipeError, match="never downloads"):
        load_tokenizer(TokenizerConfig(hf_name="acme/absent", hf_cache=str(tmp_path)))


def test_set_tokens_are_added_to_a_trained_tokenizer_as_specials(trained):
    outputs = [OutputSet(name="s", fim=FimConfig()), OutputSet(name="l", kind="long")]
    cfg = with_set_tokens(TokenizerConfig(path=str(trained)), outputs)
    assert cfg.added_tokens == ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|repo_name|>", "<|file_sep|>")
    plain = load_tokenizer(TokenizerConfig(path=str(trained)))
    tok = load_tokenizer(cfg)
    assert tok.vocab_size == plain.vocab_size + 5
    assert sorted(tok.special_tokens[t] for t in cfg.added_tokens) == list(range(plain.vocab_size, tok.vocab_size))
    # document text that spells a marker stays text: only the pipeline emits marker ids
    ids = tok.encode_batch(["x = '<|repo_name|>'\n"])[0]
    assert tok.special_tokens["<|repo_name|>"] not in ids
    assert tok.fingerprint()["special_tokens"]["<|file_sep|>"] == tok.special_tokens["<|file_sep|>"]


def test_text_markers_need_no_tokens():
    out = OutputSet(name="l", kind="long", long={"markers": "text"})
    cfg = TokenizerConfig(builtin="gpt2")
    assert with_set_tokens(cfg, [out]) is cfg


def test_long_settings_validate():
    assert OutputSet(name="l", kind="long").seq_len == 262144
    with pytest.raises(ValueError, match="kind: long"):
        OutputSet(name="s", long={})
    with pytest.raises(ValueError, match="upsample"):
        OutputSet(name="l", kind="long", long={"upsample": {"x": 0}})

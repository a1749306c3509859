"""The encoding engine (fastokens) against each vocabulary's own library, id for id."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import random
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tokenizers
from test_tokenizer import TRICKY, stdlib_files
from tokenizers import decoders, models, normalizers, pre_tokenizers

from codecorpus.config import TokenizeConfig, TokenizerConfig, TrainTokenizerConfig
from codecorpus.tokenize import stage
from codecorpus.tokenize.tokenizer import (
    EXPECT_BUILD_CHARS,
    LIBRARY_FIRST_CHARS,
    PROBE,
    Encoder,
    EngineMismatch,
    load_tokenizer,
    sample_for_training,
    train_tokenizer,
)

PIECES = [
    "a", "Z", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\x85",
    "\x1c", "'s", "'S", "'ll", "123", "4567", "é", "ß", "中文", "日本語", "한국어", "😀", "👍🏽", "\u200b",
    "\x00", "<|endoftext|>", "<|im_start|>", "<|fim_prefix|>", "def", " foo", "_bar", ".x", "!!", "    ",
    "\n    ", "\ufb01", "Ω", "\u0301", "١٢٣", "\U0001d518", "\ufeff", "\U0010ffff", "e\u0301",
]  # fmt: skip


def fuzz_texts(n: int, seed: int = 0) -> list[str]:
    """Seeded strings mixing the pieces pre-tokenizers split differently (spaces, digits, scripts, specials)."""
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 60))) for _ in range(n)]


def corpus() -> list[str]:
    return [*stdlib_files(120), *TRICKY, *fuzz_texts(3000), " " * 20000 + "x", "a" * 50000, "\n" * 5000, ""]


def assert_same_as_library(cfg: TokenizerConfig) -> None:
    tok = load_tokenizer(cfg)
    assert tok.engine == "fastokens"
    texts = corpus()
    ours, theirs = tok.encode_batch(texts), tok.encoder.reference(texts)
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert not differ, f"{len(differ)} of {len(texts)} texts differ, first {[texts[i][:40] for i in differ[:3]]}"
    assert sum(map(len, ours)) > 300_000  # real volume was compared


def test_gpt2_engine_gives_tiktokens_ids() -> None:
    assert_same_as_library(TokenizerConfig(builtin="gpt2"))


def test_qwen25_engine_gives_tiktokens_ids() -> None:
    assert_same_as_library(TokenizerConfig(builtin="qwen2.5"))


def test_tiktoken_file_engine_gives_tiktokens_ids(tmp_path: Path) -> None:
    copy = tmp_path / "copy.tiktoken"
    shutil.copyfile(load_tokenizer(TokenizerConfig(builtin="qwen2.5")).files[0], copy)
    assert_same_as_library(TokenizerConfig(path=str(copy), special_tokens=("<|endoftext|>",)))


def test_trained_tokenizer_json_engine_gives_hf_ids(tmp_path: Path) -> None:
    """A BPE this project trains (Split regex + ByteLevel), with added special tokens."""
    cfg = TrainTokenizerConfig(vocab_size=2048, min_frequency=2, sample_bytes=1_000_000)
    path = train_tokenizer(sample_for_training(stdlib_files(300), cfg.sample_bytes), cfg, tmp_path)
    assert_same_as_library(TokenizerConfig(path=str(path), added_tokens=("<|fim_prefix|>", "<|repo_name|>")))


def test_flat_form_holds_the_library_ids() -> None:
    tok = load_tokenizer(TokenizerConfig(builtin="gpt2"))
    texts = ["", "def f():\n    pass\n", "", "x"]
    ids, offsets = tok.encode_flat(texts)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64
    assert offsets.tolist()[0] == 0 and len(offsets) == len(texts) + 1
    assert [ids[a:b].tolist() for a, b in itertools.pairwise(offsets)] == tok.encoder.reference(texts)


def test_tokenizer_json_with_normalizer_and_plain_added_tokens(tmp_path: Path) -> None:
    """An NFC normalizer and an added token that is not special (HF matches it in text)."""
    hf = tokenizers.Tokenizer(models.BPE())
    hf.normalizer = normalizers.NFC()
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.train_from_iterator(stdlib_files(60), tokenizers.trainers.BpeTrainer(vocab_size=1500, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.add_tokens(["<tool_call>"])
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    assert_same_as_library(TokenizerConfig(path=str(path)))
    tok = load_tokenizer(TokenizerConfig(path=str(path)))
    assert tok.encode_batch(["a <tool_call> b"])[0].count(hf.token_to_id("<tool_call>")) == 1


def test_truncation_and_padding_of_a_tokenizer_json_are_off(tmp_path: Path) -> None:
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.train_from_iterator(stdlib_files(20), tokenizers.trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf.decoder = decoders.ByteLevel()
    hf.enable_truncation(max_length=8)
    hf.enable_padding(pad_id=0, pad_token="<|endoftext|>")
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    tok = load_tokenizer(TokenizerConfig(path=str(path)))
    texts = [stdlib_files(1)[0][:2000], "x"]
    ids = tok.encode_batch(texts)
    assert tok.engine == "fastokens"
    assert len(ids[0]) > 100 and len(ids[1]) == 1  # neither cut to 8 nor padded to the longest
    assert [tok.decode(i) for i in ids] == texts


# --- choosing the engine, and the per-shard check -----------------------------------------


def _with_encoder(fast, name: str = "gpt2"):
    tok = load_tokenizer(TokenizerConfig(builtin=name))
    return dataclasses.replace(tok, encoder=Encoder(tok.name, "tiktoken", tok.encoder.reference, fast))


def test_a_vocabulary_fastokens_cannot_load_is_encoded_by_the_library(caplog: pytest.LogCaptureFixture) -> None:
    def cannot_load():
        raise ValueError("unsupported pre-tokenizer")

    tok = _with_encoder(cannot_load)
    with caplog.at_level(logging.WARNING):
        assert tok.engine == "tiktoken"
    assert "cannot load it" in caplog.text and "unsupported pre-tokenizer" in caplog.text
    texts = stdlib_files(5) + TRICKY
    assert tok.encode_batch(texts) == tok.encoder.reference(texts)
    tok.check(texts[0])  # the library is its own reference


def _off_by_one_except_on(good: set[str], real):
    """A flat encoder that gives the real ids for ``good`` texts and shifted ids for the rest."""

    def encode_flat(texts: list[str]):
        ids, offsets = real(texts)
        ids = ids.copy()
        for i, text in enumerate(texts):
            if text not in good:
                ids[offsets[i] : offsets[i + 1]] += 1
        return ids, offsets

    return encode_flat


def test_an_engine_that_fails_the_probe_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    real = load_tokenizer(TokenizerConfig(builtin="gpt2")).encoder.engine()[1]
    tok = _with_encoder(lambda: _off_by_one_except_on(set(), real))
    with caplog.at_level(logging.WARNING):
        assert tok.engine == "tiktoken"
    assert "differently" in caplog.text


def test_an_engine_wrong_on_a_shard_fails_the_task() -> None:
    """It passed the probe, then disagrees with the library on a shard's first document."""
    real = load_tokenizer(TokenizerConfig(builtin="gpt2")).encoder.engine()[1]
    tok = _with_encoder(lambda: _off_by_one_except_on({PROBE, ""}, real))
    assert tok.engine == "fastokens"
    with pytest.raises(EngineMismatch, match="fastokens and tiktoken differ at token 0"):
        tok.check("def f():\n    return 1\n")


def test_the_first_text_a_process_encodes_is_checked() -> None:
    """Whatever part of the pipeline encodes first (FIM, SFT rendering, long-context markers)."""
    real = load_tokenizer(TokenizerConfig(builtin="gpt2")).encoder.engine()[1]
    tok = _with_encoder(lambda: _off_by_one_except_on({PROBE, ""}, real))
    assert tok.engine == "fastokens"  # chosen (a process past its first LIBRARY_FIRST_CHARS)
    tok.encode_batch(["", ""])  # nothing to check yet
    with pytest.raises(EngineMismatch):
        tok.encode_batch(["", "x = 1\n"])


def test_a_process_starts_with_the_library_then_builds_the_engine() -> None:
    """Small runs never pay the engine's build; the ids are the library's before and after."""
    real = load_tokenizer(TokenizerConfig(builtin="gpt2")).encoder.engine()[1]
    builds = []
    tok = _with_encoder(lambda: builds.append(1) or real)
    texts = stdlib_files(40)
    assert sum(map(len, texts)) < LIBRARY_FIRST_CHARS
    first = tok.encode_batch(texts)
    assert not builds and tok.encoder.chosen is None and tok.encoder.library_chars == sum(map(len, texts))
    tok.check(texts[0])  # nothing but the library has encoded: nothing to compare
    big = ["x = 1\n" * (LIBRARY_FIRST_CHARS // 6 + 1)]
    tok.encode_batch(big)  # crosses the threshold with the library
    assert tok.encode_batch(texts) == first == tok.encoder.reference(texts)
    assert builds == [1] and tok.encoder.chosen == "fastokens" and tok.encoder.checked


def test_a_shard_past_the_threshold_builds_the_engine_before_its_first_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shard past EXPECT_BUILD_CHARS, of which the library would encode 2M characters before the
    engine takes over, gets the engine at once; a small shard stays with the library. The ids are
    the library's either way."""
    real = load_tokenizer(TokenizerConfig(builtin="gpt2")).encoder.engine()[1]
    builds = []
    tok = _with_encoder(lambda: builds.append(1) or real)
    monkeypatch.setattr(stage, "load_tokenizer", lambda _cfg: tok)
    cfg = TokenizeConfig(batch_size=4)
    small = pa.table({"text": pa.array(stdlib_files(5), pa.large_string())})
    stage.run(small, cfg, TokenizerConfig(builtin="gpt2"))
    assert not builds and tok.encoder.chosen is None
    line = "x = 1\n"
    big_texts = [line * (EXPECT_BUILD_CHARS // len(line) // 8 + 1)] * 8
    big = pa.table({"text": pa.array(big_texts, pa.large_string())})
    out = stage.run(big, cfg, TokenizerConfig(builtin="gpt2")).table
    assert builds == [1] and tok.encoder.chosen == "fastokens"
    assert tok.encoder.library_chars == sum(map(len, small.column("text").to_pylist()))  # not one of big's
    eos = tok.eos_id
    assert out.column("tokens").to_pylist() == [[*ids, eos] for ids in tok.encoder.reference(big_texts)]


def test_the_stage_checks_each_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    real = load_tokenizer(TokenizerConfig(builtin="gpt2")).encoder.engine()[1]
    tok = _with_encoder(lambda: _off_by_one_except_on({PROBE, ""}, real))
    monkeypatch.setattr(stage, "load_tokenizer", lambda _cfg: tok)
    table = pa.table({"text": pa.array(["import os\n", "x = 1\n"], pa.large_string())})
    assert tok.engine == "fastokens"
    tok.encoder.checked = True  # the process has checked a text before: the shard's own check fails it
    with pytest.raises(EngineMismatch):
        stage.run(table, TokenizeConfig(), TokenizerConfig(builtin="gpt2"))

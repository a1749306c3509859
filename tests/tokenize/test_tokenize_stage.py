"""The tokenize stage on a tiny document table."""

from __future__ import annotations

import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import TokenizeConfig, TokenizerConfig
from codecorpus.tokenize import stage
from codecorpus.tokenize.tokenizer import load_tokenizer

QWEN = TokenizerConfig(builtin="qwen2.5")

TEXTS = [
    'def greet(name: str) -> str:\n    return f"hello {name}"\n',
    "export const PI = 3.14159;\n",
    "",
    'marker = "<|endoftext|>"  # text, not a boundary\n',
    "pub fn fib(n: u64) -> u64 { if n < 2 { n } else { fib(n - 1) + fib(n - 2) } }\n",
    "# 中文注释 and émojis 🐍\n",
    "x = 1\n" * 200,
]


def doc_table(texts: list[str]) -> pa.Table:
    n = len(texts)
    ids = [schema.document_id("src", "repo", f"f{i}.py", "v1") for i in range(n)]
    encoded = [t.encode() for t in texts]
    columns = {
        schema.ID: ids,
        schema.SOURCE: ["src"] * n,
        schema.REPO: ["repo"] * n,
        schema.PATH: [f"f{i}.py" for i in range(n)],
        schema.REVISION: ["v1"] * n,
        schema.LICENSE: ["MIT"] * n,
        schema.LANG: ["python"] * n,
        schema.KIND: ["code"] * n,
        schema.TEXT: texts,
        schema.BYTES: [len(b) for b in encoded],
        schema.CONTENT_HASH: [schema.content_hash(b) for b in encoded],
        schema.ENCODING: ["utf-8"] * n,
    }
    return pa.table(columns, schema=schema.DOC_SCHEMA)


@pytest.mark.parametrize("batch_size", [1, 3, 256])
def test_adds_typed_columns_and_keeps_every_row(batch_size: int) -> None:
    table = doc_table(TEXTS)
    result = stage.run(table, TokenizeConfig(batch_size=batch_size), QWEN)
    out = result.table
    assert result.dropped.num_rows == 0
    assert out.num_rows == table.num_rows
    assert out.select(table.column_names).equals(table)  # annotator: rows untouched, in order
    assert out.schema.field(schema.TOKENS).type == pa.large_list(pa.uint32())
    assert out.schema.field(schema.NUM_TOKENS).type == pa.int64()


def test_tokens_end_with_eos_and_match_the_tokenizer() -> None:
    tok = load_tokenizer(QWEN)
    out = stage.run(doc_table(TEXTS), TokenizeConfig(batch_size=2), QWEN)
    tokens = out.table.column(schema.TOKENS).to_pylist()
    num_tokens = out.table.column(schema.NUM_TOKENS).to_pylist()
    for text, ids, n in zip(TEXTS, tokens, num_tokens, strict=True):
        assert ids == [*tok.encode_batch([text])[0], tok.eos_id]
        assert n == len(ids)
        assert ids.count(tok.eos_id) == 1  # the literal marker text is not an EOS
    assert tokens[2] == [tok.eos_id]  # an empty document still closes with EOS
    assert out.counters["tokens"] == sum(num_tokens)


def test_without_eos() -> None:
    tok = load_tokenizer(QWEN)
    out = stage.run(doc_table(TEXTS), TokenizeConfig(append_eos=False), QWEN)
    tokens = out.table.column(schema.TOKENS).to_pylist()
    assert tokens == tok.encode_batch(TEXTS)
    assert tokens[2] == []
    assert out.counters["tokens"] == sum(map(len, tokens))


def test_sliced_and_chunked_input() -> None:
    full = doc_table(TEXTS)
    chunked = pa.concat_tables([full.slice(0, 3), full.slice(3)])
    assert chunked.column(schema.TEXT).num_chunks == 2
    a = stage.run(chunked, TokenizeConfig(batch_size=2), QWEN).table.column(schema.TOKENS)
    b = stage.run(full, TokenizeConfig(), QWEN).table.column(schema.TOKENS)
    assert a.to_pylist() == b.to_pylist()
    sliced = stage.run(full.slice(2, 3), TokenizeConfig(), QWEN).table.column(schema.TOKENS)
    assert sliced.to_pylist() == b.to_pylist()[2:5]


def test_empty_table() -> None:
    out = stage.run(doc_table([]), TokenizeConfig(), QWEN)
    assert out.table.num_rows == 0
    assert out.table.schema.field(schema.TOKENS).type == pa.large_list(pa.uint32())
    assert out.counters["tokens"] == 0

import doctest
import math

import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import FiltersConfig
from codecorpus.filters import basic
from codecorpus.filters import stage as filters
from codecorpus.filters.columns import ALNUM_FRAC, MAX_LINE_LEN, MEAN_LINE_LEN, STAGE_COLUMNS


def _docs(*texts: str, lang: str = "Python") -> pa.Table:
    """A DOC_SCHEMA table with one row per text, ids doc0, doc1, ..."""
    n = len(texts)
    return pa.table(
        {
            schema.ID: [f"doc{i}" for i in range(n)],
            schema.SOURCE: ["src"] * n,
            schema.REPO: ["repo"] * n,
            schema.PATH: [f"f{i}.py" for i in range(n)],
            schema.REVISION: ["rev"] * n,
            schema.LICENSE: ["MIT"] * n,
            schema.LANG: [lang] * n,
            schema.KIND: ["code"] * n,
            schema.TEXT: list(texts),
            schema.BYTES: [len(t.encode()) for t in texts],
            schema.CONTENT_HASH: ["h"] * n,
            schema.ENCODING: ["utf-8"] * n,
        },
        schema=schema.DOC_SCHEMA,
    )


def _kept_ids(result) -> list[str]:
    return result.table.column(schema.ID).to_pylist()


def _reasons(result) -> list[str]:
    return result.dropped.column(schema.REASON).to_pylist()


# Small thresholds make hand-made documents easy to put on either side of a rule.
CFG = FiltersConfig(max_line_len=10, max_mean_line_len=6.0, min_alnum_frac=0.5)


def test_max_line_len_both_sides_of_the_threshold() -> None:
    at = "a" * 10 + "\n" + "\n".join(["b"] * 5)  # longest 10, mean 15/6 = 2.5
    over = "a" * 11 + "\n" + "\n".join(["b"] * 5)
    result = filters.run(_docs(at, over), CFG)
    assert _kept_ids(result) == ["doc0"]
    assert _reasons(result) == ["max_line_len"]
    assert result.dropped.column(schema.SCORE).to_pylist() == [11.0]
    assert result.dropped.column(schema.THRESHOLD).to_pylist() == [10.0]


def test_mean_line_len_both_sides_of_the_threshold() -> None:
    at = "abcdefgh\nabcd"  # lines 8 and 4: mean 6.0, exactly the threshold
    over = "abcdefgh\nabcde"  # mean 6.5
    result = filters.run(_docs(at, over), CFG)
    assert _kept_ids(result) == ["doc0"]
    assert _reasons(result) == ["mean_line_len"]
    assert result.dropped.column(schema.SCORE).to_pylist() == [6.5]
    assert result.dropped.column(schema.THRESHOLD).to_pylist() == [6.0]


def test_alnum_frac_both_sides_of_the_threshold() -> None:
    at = "ab{}"  # 2 of 4
    under = "ab{}!"  # 2 of 5
    result = filters.run(_docs(at, under), CFG)
    assert _kept_ids(result) == ["doc0"]
    assert _reasons(result) == ["alnum_frac"]
    assert result.dropped.column(schema.SCORE).to_pylist() == [pytest.approx(0.4)]
    assert result.dropped.column(schema.THRESHOLD).to_pylist() == [0.5]


def test_starcoder_defaults() -> None:
    ok = "def f(x):\n    return x + 1\n"
    minified = "var a=1;" * 200  # one 1600-char line
    wide = ("x = 1  # " + "y" * 150 + "\n") * 3  # lines of 160 chars, none over 1000
    symbols = "#" * 80 + "\n" + "# hi\n"
    result = filters.run(_docs(ok, minified, wide, symbols), FiltersConfig())
    assert _kept_ids(result) == ["doc0"]
    assert _reasons(result) == ["max_line_len", "mean_line_len", "alnum_frac"]


def test_first_failing_rule_is_the_reason() -> None:
    everything_wrong = "{" * 20  # too long, mean too long, no alphanumerics
    mean_and_alnum = "{{{{{{{\n{{{{{{{"  # mean 7, longest 7
    result = filters.run(_docs(everything_wrong, mean_and_alnum), CFG)
    assert _reasons(result) == ["max_line_len", "mean_line_len"]
    assert result.dropped.column(schema.SCORE).to_pylist() == [20.0, 7.0]


def test_exempt_languages_skip_only_the_line_rules() -> None:
    cfg = CFG.model_copy(update={"exempt_langs": ("SQL",)})
    long_line = '{"k": "' + "v" * 30 + '"}'
    symbols = "{}[]"
    result = filters.run(_docs(long_line, symbols, lang="SQL"), cfg)
    assert _kept_ids(result) == ["doc0"]
    assert _reasons(result) == ["alnum_frac"]
    assert filters.run(_docs(long_line), cfg).dropped.num_rows == 1  # Python is not exempt


def test_scores_are_annotated_with_their_types_on_kept_rows() -> None:
    result = filters.run(_docs("ab\ncdef\n", "héllo wörld"), FiltersConfig())
    out = result.table
    for name in basic.RULES:
        assert out.schema.field(name).type == STAGE_COLUMNS[name]
    assert out.column(MAX_LINE_LEN).to_pylist() == [4, 11]
    # "ab\ncdef\n" splits into ["ab", "cdef", ""]: 6 characters over 3 lines
    assert out.column(MEAN_LINE_LEN).to_pylist() == [2.0, 11.0]
    alnum = out.column(ALNUM_FRAC).to_pylist()
    assert alnum[0] == pytest.approx(6 / 8)
    assert alnum[1] == pytest.approx(10 / 11)  # é and ö count as letters, lengths in characters


def test_scores_match_python_definitions() -> None:
    texts = ["", "\n", "x", "a_b c\r\n1", "日本語のコード = 1\n", "٣٤ ½ Ⅻ ß\t", "x" * 5000]
    scores = basic.line_scores(pa.chunked_array([pa.array(texts[:3]), pa.array(texts[3:])]))
    for i, text in enumerate(texts):
        lines = text.split("\n")
        assert scores.max_line_len[i] == max(len(line) for line in lines)
        assert scores.mean_line_len[i] == sum(len(line) for line in lines) / len(lines)
        expected = sum(c.isalnum() for c in text) / len(text) if text else 0.0
        assert math.isclose(scores.alnum_frac[i], expected)


def test_scores_of_a_sliced_array() -> None:
    arr = pa.array(["{{{{", "abc\nde", "!!"], pa.large_string()).slice(1, 1)
    scores = basic.line_scores(arr)
    assert scores.max_line_len.tolist() == [3]
    assert scores.alnum_frac.tolist() == [5 / 6]


def test_empty_text_is_dropped_by_alnum_frac() -> None:
    result = filters.run(_docs(""), FiltersConfig())
    assert _reasons(result) == ["alnum_frac"]
    assert result.dropped.column(schema.SCORE).to_pylist() == [0.0]


def test_drop_rows_carry_the_document_and_the_accounting_adds_up() -> None:
    table = _docs("ok\nfine\n", "{" * 20, "ab{}!", "abcdefgh\nabcde")
    result = filters.run(table, CFG)
    dropped = result.dropped
    assert dropped.schema == schema.DROP_SCHEMA
    assert table.num_rows == result.table.num_rows + dropped.num_rows
    assert dropped.column(schema.ID).to_pylist() == ["doc1", "doc2", "doc3"]
    assert set(dropped.column(schema.STAGE).to_pylist()) == {"filters"}
    assert dropped.column(schema.LANG).to_pylist() == ["Python"] * 3
    assert dropped.column(schema.BYTES).to_pylist() == [20, 5, 14]
    assert dropped.column(schema.PATH).to_pylist() == ["f1.py", "f2.py", "f3.py"]
    assert None not in dropped.column(schema.SCORE).to_pylist()
    assert None not in dropped.column(schema.THRESHOLD).to_pylist()


def test_empty_table() -> None:
    result = filters.run(_docs(), FiltersConfig())
    assert result.table.num_rows == 0 and result.dropped.num_rows == 0
    assert ALNUM_FRAC in result.table.column_names


def test_basic_doctests() -> None:
    assert doctest.testmod(basic).failed == 0

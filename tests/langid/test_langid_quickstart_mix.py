"""The quickstart's own mix, tagged for real: no Haskell or Forth in the Python standard library and numpy.

Runs ``--until langid`` on the python-env source (the standard library with its tests,
and numpy) that this environment holds, in 2 MB shards so that the standard library's
``.decTest`` files and numpy span several shards and the vote must see them across shards.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codecorpus import schema
from codecorpus.config import load_recipe_data
from codecorpus.langid import vote
from codecorpus.langid.stage import LANG_METHOD

WRONG = {"Haskell", "Forth"}
"""Languages a person would call wrong anywhere in these two repositories."""


@pytest.fixture(scope="module")
def tagged(tmp_path_factory, ray_local) -> pa.Table:
    from codecorpus.runtime.executor import Executor

    recipe = {
        "sources": [{"type": "python-env", "name": "pyenv", "stdlib": True, "distributions": ["numpy"]}],
        "stages": {"ingest": {"max_file_bytes": 1_000_000, "shard_bytes": 2_000_000}, "langid": {}},
    }
    run_dir = tmp_path_factory.mktemp("quickstart-langid")
    Executor(load_recipe_data(recipe), run_dir, quiet=True).run_pipeline(until="langid")
    parts = sorted((run_dir / "langid").glob("part-*.parquet"))
    tables = [
        pq.read_table(p, columns=[schema.REPO, schema.PATH, schema.LANG, LANG_METHOD])
        .append_column("shard", pa.array([i] * pq.read_metadata(p).num_rows, pa.int32()))
        for i, p in enumerate(parts)
    ]
    return pa.concat_tables(tables)


def _rows(table: pa.Table, suffix: str) -> list[dict]:
    return [r for r in table.to_pylist() if r[schema.PATH].endswith(suffix)]


def test_no_haskell_or_forth(tagged: pa.Table) -> None:
    repos = set(tagged.column(schema.REPO).to_pylist())
    assert {"python-stdlib", "numpy"} <= repos
    wrong = [(r[schema.REPO], r[schema.PATH], r[schema.LANG]) for r in tagged.to_pylist() if r[schema.LANG] in WRONG]
    assert wrong == []


def test_numpy_fortran_sources_are_fortran(tagged: pa.Table) -> None:
    rows = [r for r in _rows(tagged, ".f") if r[schema.REPO] == "numpy"]
    assert len(rows) >= 10
    assert {r[schema.LANG] for r in rows} == {"Fortran"}
    # Linguist's heuristics decide most; the vote the ones its classifier would call Forth
    assert {r[LANG_METHOD] for r in rows} <= {"content", vote.VOTE_METHOD}


def test_dectest_is_data_not_code(tagged: pa.Table) -> None:
    rows = _rows(tagged, ".decTest")
    assert len(rows) >= 50
    assert {r[schema.LANG] for r in rows} == {schema.UNKNOWN}
    assert len({r["shard"] for r in rows}) >= 2  # the vote saw them across shards


def test_python_stays_python(tagged: pa.Table) -> None:
    py = _rows(tagged, ".py")
    assert len(py) > 1000
    assert {r[schema.LANG] for r in py} == {"Python"}

"""pyarrow's first conversion without importing pandas, and pandas as pyarrow's own once imported.

Each check runs in a fresh interpreter: the probe's answer lasts for a process's life.
The run test drives the CLI with two stages of a user's own: the first records, in each
worker, whether pandas was imported by anything before it; the second imports pandas and
converts a Series, which pyarrow must read as it does in a process that never probed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import fixture_recipe, write_repos

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="needs pandas installed")

REPO = Path(__file__).resolve().parents[2]

CONVERSIONS = """
import io, sys
import numpy as np, pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
pa.array([1, 2]); pa.array(["a", None]); pa.array(np.arange(3)); pa.scalar(1.5)
pa.Table.from_pylist([{"a": "x", "b": [1, 2]}]); pa.table({"c": [1.0]}); pc.sum(pa.array([3]))
buf = io.BytesIO(); pq.write_table(pa.table({"x": ["s"]}), buf); pq.ParquetFile(io.BytesIO(buf.getvalue())).read()
"""

PANDAS_OBJECTS = """
import importlib.util
importlib.util.find_spec("pandas")  # an availability check first, as many libraries make
import numpy as np, pandas as pd, pyarrow as pa
objs = [pd.Series([1, None]), pd.Series(["a", None]), pd.Series(pd.Categorical(["x", "y", "x"])),
        pd.Series(pd.to_datetime(["2020-01-01", None]).tz_localize("UTC")), pd.array([1, None], dtype="Int64"),
        [pd.Timestamp("2020-01-01"), None]]
for obj in objs:
    arr = pa.array(obj)
    print(arr.type, arr.to_pylist())
df = pd.DataFrame({"a": [1, None], "c": pd.Categorical(["x", "y"])})
print(pa.table(df).schema.types, pa.Table.from_pandas(df).to_pandas().dtypes.to_dict())
"""


def python(script: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_conversions_after_the_answer_import_no_pandas():
    probe = "from codecorpus.storage.pandas_probe import answer_pandas_probe\nanswer_pandas_probe()\n"
    check = "\nprint('pandas' in sys.modules)\n"
    assert python(CONVERSIONS + check).strip() == "True"  # what the answer saves: pyarrow's own import
    assert python(probe + CONVERSIONS + check).strip() == "False"


def test_pandas_imported_afterwards_converts_as_in_a_process_that_never_probed():
    probe = "from codecorpus.storage.pandas_probe import answer_pandas_probe\nanswer_pandas_probe()\n"
    plain = python(CONVERSIONS + PANDAS_OBJECTS)
    answered = python(probe + CONVERSIONS + "assert 'pandas' not in sys.modules\n" + PANDAS_OBJECTS)
    assert answered == plain
    assert "double [1.0, None]" in answered  # a Series' NaN is a null, as pandas conversion makes it
    assert "dictionary<values=" in answered  # a categorical is a dictionary array


def test_a_process_that_imported_pandas_first_is_left_as_it_is():
    script = ("import sys, pandas, pyarrow as pa\nfinders = list(sys.meta_path)\n"
              "from codecorpus.storage.pandas_probe import answer_pandas_probe\nanswer_pandas_probe()\n"
              "print(sys.meta_path == finders, pa.array(pandas.Series([1, None])).to_pylist())")
    assert python(script).strip() == "True [1.0, None]"


STAGES = '''
import sys
import pyarrow as pa


def pandas_state(table):
    """Whether anything in this worker imported pandas before this stage."""
    return {"pandas_before": pa.array(["pandas" in sys.modules] * table.num_rows)}


def series_nulls(table):
    """A user's stage that uses pandas: pyarrow must convert its Series as its own."""
    import pandas as pd
    nulls = pa.array(pd.Series([1.0, None])).null_count
    return {"series_nulls": pa.array([nulls] * table.num_rows, pa.int32())}
'''


def test_a_run_imports_pandas_in_no_worker_and_a_users_pandas_stage_converts_as_pyarrow(tmp_path):
    write_repos(tmp_path / "corpus")
    (tmp_path / "pdstages.py").write_text(textwrap.dedent(STAGES))
    data = fixture_recipe(tmp_path / "corpus", name="pandas-probe", seed=3)
    data["stages"] = {
        **data["stages"],
        "pandas_state": {"use": "pdstages:pandas_state", "kind": "annotator", "after": "filters"},
        "series_nulls": {"use": "pdstages:series_nulls", "kind": "annotator", "after": "pandas_state"},
    }
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(tmp_path)])}
    cmd = [sys.executable, "-m", "codecorpus", "run", str(recipe), "--out", str(tmp_path / "run"),
           "--workers", "2", "--quiet"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    parts = sorted((tmp_path / "run" / "series_nulls").glob("part-*.parquet"))
    assert len(parts) > 1
    table = pq.read_table(parts)
    assert table.num_rows > 0
    assert set(table.column("pandas_before").to_pylist()) == {False}  # ingest, langid, filters: no pandas
    assert set(table.column("series_nulls").to_pylist()) == {1}

"""pyarrow's first conversion without importing pandas, and who may make it that way.

Each check of the answer itself runs in a fresh interpreter: the answer lasts for a process's
life. The run tests start the pipeline as the ``codecorpus`` command does, in a process of its
own: with codecorpus's stages alone, neither the driver nor a worker imports pandas; with a
stage of the user's, whose code may convert pandas objects, pyarrow keeps its own probe and a
Series holding ``pd.NA`` or a nanosecond timestamp converts as pyarrow converts it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from codecorpus.storage.pandas_probe import _HidePandas
from conftest import fixture_recipe, write_repos

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="needs pandas installed")

REPO = Path(__file__).resolve().parents[2]
ANSWER = "from codecorpus.storage.pandas_probe import answer_pandas_probe\nanswer_pandas_probe()\n"

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
        pd.Series(pd.to_datetime(["2020-01-01", None]).tz_localize("UTC")), pd.array([1, None], dtype="Int64")]
for obj in objs:
    arr = pa.array(obj)
    print(arr.type, arr.to_pylist())
df = pd.DataFrame({"a": [1, None], "c": pd.Categorical(["x", "y"])})
print(pa.table(df).schema.types, pa.Table.from_pandas(df).to_pandas().dtypes.to_dict())
"""


def python(script: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_conversions_after_the_answer_import_no_pandas():
    check = "\nprint('pandas' in sys.modules)\n"
    assert python(CONVERSIONS + check).strip() == "True"  # what the answer saves: pyarrow's own import
    assert python(ANSWER + CONVERSIONS + check).strip() == "False"


def test_pandas_imported_afterwards_turns_pyarrows_pandas_path_back_on():
    """A Series' NaN is a null, a categorical a dictionary, as in a process that never probed."""
    plain = python(CONVERSIONS + PANDAS_OBJECTS)
    answered = python(ANSWER + CONVERSIONS + "assert 'pandas' not in sys.modules\n" + PANDAS_OBJECTS)
    assert answered == plain
    assert "double [1.0, None]" in answered and "dictionary<values=" in answered


def test_a_process_that_imported_pandas_first_is_left_as_it_is():
    script = ("import sys, pandas, pyarrow as pa\nfinders = list(sys.meta_path)\n" + ANSWER +
              "print(sys.meta_path == finders, pa.array(pandas.Series(['a', pandas.NA], dtype=object)).to_pylist())")
    assert python(script).strip() == "True ['a', None]"


def test_pandas_is_hidden_from_the_answering_thread_alone():
    hide = _HidePandas(threading.get_ident())
    with pytest.raises(ModuleNotFoundError):
        hide.find_spec("pandas.core")
    seen: list[object] = []
    other = threading.Thread(target=lambda: seen.append(hide.find_spec("pandas")))
    other.start()
    other.join()
    assert seen == [None]  # another thread's import goes on to the real finders


PROBE_RUN = """
import json, os, sys
import ray
from codecorpus.config import load_recipe
from codecorpus.runtime.launch import start

@ray.remote
def modules():
    return os.getpid(), "pandas" in sys.modules

executor = start(lambda: (load_recipe(sys.argv[1]), sys.argv[2]), 2, own_process=True, quiet=True)
executor.run_pipeline()
seen = dict(ray.get([modules.remote() for _ in range(40)]))
print(json.dumps({"driver": "pandas" in sys.modules, "workers": sorted(seen.values()), "n": len(seen)}))
ray.shutdown()
"""

STAGES = '''
import pandas as pd
import pyarrow as pa


def pandas_values(table):
    """A user's stage that converts pandas objects: a pd.NA in object data, a nanosecond timestamp."""
    nulls = pa.array(pd.Series(["a", pd.NA], dtype=object)).null_count
    ns = pa.array([pd.Timestamp("2020-01-01 00:00:00.000000005")], pa.timestamp("ns")).cast(pa.int64())[0].as_py()
    return {"na_nulls": pa.array([nulls] * table.num_rows, pa.int32()),
            "ns_value": pa.array([ns] * table.num_rows, pa.int64())}
'''


def _recipe(tmp_path: Path, user_stage: bool) -> Path:
    write_repos(tmp_path / "corpus")
    data = fixture_recipe(tmp_path / "corpus", name="pandas-probe", seed=3)
    if user_stage:
        (tmp_path / "pdstages.py").write_text(textwrap.dedent(STAGES))
        data["stages"] = {**data["stages"],
                          "pandas_values": {"use": "pdstages:pandas_values", "kind": "annotator", "after": "filters"}}
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    return recipe


def test_a_run_of_codecorpus_stages_imports_pandas_in_no_process(tmp_path):
    recipe = _recipe(tmp_path, user_stage=False)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([sys.executable, "-c", PROBE_RUN, str(recipe), str(tmp_path / "run")], env=env,
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"driver": False, "workers": [False, False], "n": 2}, seen


def test_a_users_stage_converts_pandas_objects_as_pyarrow_does(tmp_path):
    """The command keeps pyarrow's own probe where a stage of the user's runs."""
    recipe = _recipe(tmp_path, user_stage=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(tmp_path)])}
    cmd = [sys.executable, "-m", "codecorpus", "run", str(recipe), "--out", str(tmp_path / "run"),
           "--workers", "2", "--quiet"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    parts = sorted((tmp_path / "run" / "pandas_values").glob("part-*.parquet"))
    assert len(parts) > 1
    table = pq.read_table(parts)
    assert table.num_rows > 0
    assert set(table.column("na_nulls").to_pylist()) == {1}
    assert set(table.column("ns_value").to_pylist()) == {1577836800000000005}

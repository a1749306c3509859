"""Stages of a user's own and datatrove filters, named in a recipe.

One real run through the CLI on a local Ray (the example stages of examples/mystages,
datatrove's RegexFilter and a user BaseFilter subclass) checks columns, drops, drop
reasons, conservation, the report and resume; the other tests check, without Ray,
that every kind of bad ``use:`` fails before any work with an error naming the fix,
and that the stage hash follows the code it runs.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from codecorpus import schema
from codecorpus.config import RecipeError, load_recipe_data
from codecorpus.pipeline.pipelines import enabled_specs
from codecorpus.runtime.executor import Executor, stage_hashes
from conftest import fixture_recipe, write_repos

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

CONFLICT_MD = "# Notes\n\n<<<<<<< HEAD\nShip the release on Monday.\n=======\nShip the release on Friday.\n>>>>>>> feature\n"
TODO_PY = "def g():\n    # TODO: handle errors\n    # FIXME later\n    return 0  # TODO\n"
REPEATED_PY = "results = []\n" + "results.append(compute_value(item))\n" * 30


def user_stages() -> dict:
    return {
        "todo_density": {"use": "mystages.quality:todo_density", "kind": "annotator", "after": "filters"},
        "drop_tests": {"use": "mystages.quality:drop_test_files", "kind": "filter", "after": "todo_density",
                       "config": {"dirs": ["tests"]}},
        "conflicts": {"use": "datatrove.pipeline.filters:RegexFilter", "kind": "filter", "after": "drop_tests",
                      "config": {"regex_exp": "(?m)^(<<<<<<<|>>>>>>>) "}},
        "repeats": {"use": "mystages.dtfilters:MaxLineRepeatFilter", "kind": "filter", "after": "conflicts",
                    "config": {"max_repeats": 20}},
    }


def corpus(root: Path) -> Path:
    write_repos(root)
    (root / "repo-a" / "tests").mkdir()
    (root / "repo-a" / "tests" / "check_main.py").write_text("from main import greet\n\nassert greet('x')\n")
    (root / "repo-b" / "test_other.py").write_text("def test_twice():\n    assert 2 * 2 == 4\n")
    (root / "repo-b" / "NOTES.md").write_text(CONFLICT_MD)
    (root / "repo-b" / "todo.py").write_text(TODO_PY)
    (root / "repo-b" / "counter.py").write_text(REPEATED_PY)
    return root


def cli_run(recipe: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(EXAMPLES)])}
    cmd = [sys.executable, "-c", "from codecorpus.cli import app; app()", "run", str(recipe), "--out", str(out),
           "--workers", "2"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=recipe.parent, timeout=600)


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("user")
    data = fixture_recipe(corpus(root / "corpus"), name="user-stages", seed=7)
    data["stages"] = {**data["stages"], **user_stages()}
    recipe = root / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    proc = cli_run(recipe, root / "run")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return recipe, root / "run", proc


def stats(run: Path, stage: str) -> dict:
    return json.loads(schema.RunPaths(run).stats(stage).read_text())


def drops(run: Path, stage: str) -> list[dict]:
    files = sorted((run / stage / "_dropped").glob("part-*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


def rows(run: Path, stage: str) -> list[dict]:
    return [r for f in sorted(run.glob(f"{stage}/part-*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_user_stages_run_in_recipe_order_with_their_columns_and_drops(user_run):
    _, run, _ = user_run
    order = yaml.safe_load((run / "recipe.yaml").read_text())["stages"]
    assert list(order)[:8] == ["ingest", "langid", "filters", "todo_density", "drop_tests", "conflicts",
                               "repeats", "dedup"]
    todo = {r["path"]: (r["todo_count"], r["todo_per_kline"]) for r in rows(run, "todo_density")}
    assert todo["todo.py"] == (3, 750.0) and todo["main.py"][0] == 0
    assert stats(run, "todo_density")["dropped"] == {}
    tests = {(d["repo"], d["path"]): d["reason"] for d in drops(run, "drop_tests")}
    assert tests == {("repo-a", "tests/check_main.py"): "in_test_dir", ("repo-b", "test_other.py"): "test_file"}
    assert [(d["path"], d["reason"]) for d in drops(run, "conflicts")] == [("NOTES.md", "RegexFilter")]
    assert [(d["path"], d["reason"]) for d in drops(run, "repeats")] == [("counter.py",
                                                                          "MaxLineRepeatFilter:repeated_line")]
    kept = {r["path"] for r in rows(run, "dedup")}
    assert {"todo.py", "Other.java"} <= kept and not kept & {"NOTES.md", "counter.py", "test_other.py"}
    assert "todo_count" in pq.read_schema(next((run / "tokenize").glob("part-*.parquet"))).names


def test_user_stages_keep_the_runtime_contract(user_run):
    _, run, _ = user_run
    names = ["filters", "todo_density", "drop_tests", "conflicts", "repeats", "dedup"]
    for before, stage in itertools.pairwise(names):
        s = stats(run, stage)
        assert s["rows_in"] == s["rows_out"] + sum(s["dropped"].values()) == stats(run, before)["rows_out"]
        assert sum(s["dropped"].values()) == len(drops(run, stage))
        assert len(list((run / stage / "_done").glob("part-*"))) == s["shards"]


def test_user_stage_drops_are_in_the_report(user_run):
    _, run, _ = user_run
    table = pq.read_table(schema.RunPaths(run).report_table("drops", ".parquet")).to_pylist()
    reported = {(r["stage"], r["reason"]): r["docs"] for r in table}
    assert reported[("drop_tests", "in_test_dir")] == 1 and reported[("drop_tests", "test_file")] == 1
    assert reported[("conflicts", "RegexFilter")] == 1
    assert reported[("repeats", "MaxLineRepeatFilter:repeated_line")] == 1
    funnel = pq.read_table(schema.RunPaths(run).report_table("funnel", ".parquet")).column("stage").to_pylist()
    assert funnel.index("filters") < funnel.index("repeats") < funnel.index("dedup")
    assert "repeats" in (run / "report" / "index.html").read_text()


def test_rerun_resumes_user_stages_from_their_markers(user_run):
    recipe, run, _ = user_run
    before = {p: p.stat().st_mtime_ns for p in run.glob("repeats/part-*.parquet")}
    proc = cli_run(recipe, run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert before and {p: p.stat().st_mtime_ns for p in run.glob("repeats/part-*.parquet")} == before


# --- before any work: a bad use: ------------------------------------------------------------


def write_module(root: Path, name: str, source: str) -> None:
    (root / f"{name}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def stage_modules(tmp_path, monkeypatch):
    mods = tmp_path / "mods"
    mods.mkdir()
    write_module(mods, "bad_stages", """
        import pyarrow as pa

        def shrink(table):
            return {"score": pa.array(range(table.num_rows - 1))}

        def keep_mask(table):
            return pa.array([True] * table.num_rows)

        def blank_reasons(table):
            return pa.array([""] * table.num_rows)

        NOT_A_FUNCTION = 3
    """)
    monkeypatch.syspath_prepend(str(mods))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return tmp_path


BAD_USES = [
    ({"use": "no_such_package.quality:score", "kind": "annotator"}, r"cannot import module 'no_such_package.quality'"),
    ({"use": "mystages.quality:nope", "kind": "filter"}, r"module mystages.quality has no 'nope'"),
    ({"use": "bad_stages:NOT_A_FUNCTION", "kind": "filter"}, r"is not a function"),
    ({"use": "mystages.quality:drop_test_files", "kind": "filter", "config": {"colour": "red"}},
     r"cannot be called as fn\(table, \*\*config\) with config keys \['colour'\]"),
    ({"use": "bad_stages:shrink", "kind": "annotator"}, r"returned 1 values .* an annotator keeps every row"),
    ({"use": "bad_stages:keep_mask", "kind": "filter"}, r"string array of drop reasons .* got an array of bool"),
    ({"use": "bad_stages:blank_reasons", "kind": "filter"}, r"returned an empty reason"),
    ({"use": "datatrove.pipeline.filters:RegexFilter", "kind": "annotator", "config": {"regex_exp": "x"}},
     r"is a datatrove filter: set kind: filter"),
    ({"use": "datatrove.pipeline.filters:RegexFilter", "kind": "filter", "config": {"pattern": "x"}},
     r"RegexFilter\(pattern\) failed"),
]


@pytest.mark.parametrize(("stage", "message"), BAD_USES, ids=[u["use"].split(":")[1] for u, _ in BAD_USES])
def test_bad_use_fails_before_any_work(stage_modules, stage, message):
    run = stage_modules / "run"
    data = fixture_recipe(write_repos(stage_modules / "corpus"))
    data["stages"]["mine"] = {"after": "filters", **stage}
    recipe = load_recipe_data(data)
    with pytest.raises(RecipeError, match=message) as err:
        Executor(recipe, run, quiet=True).run_pipeline()
    assert "stages.mine" in str(err.value)
    assert not run.exists()  # not even the resolved recipe: nothing was planned or written


def test_datatrove_filter_missing_its_own_dependency_fails_before_any_work(stage_modules, monkeypatch):
    """GopherRepetitionFilter's English word tokenizer needs spaCy: without it (simulated by
    hiding the module), the recipe fails before any work and names the missing package."""
    pytest.importorskip("datatrove")
    from datatrove.utils import _import_utils

    _import_utils._is_package_available.cache_clear()  # datatrove caches what it found installed
    monkeypatch.setitem(sys.modules, "spacy", None)  # `import spacy` now raises ImportError
    data = fixture_recipe(write_repos(stage_modules / "corpus"))
    data["stages"]["gopher"] = {"use": "datatrove.pipeline.filters:GopherRepetitionFilter", "kind": "filter",
                                "after": "filters", "config": {"language": "eng"}}
    with pytest.raises(RecipeError, match=r"stages.gopher: .*GopherRepetitionFilter cannot run here: .*spacy"):
        Executor(load_recipe_data(data), stage_modules / "run", quiet=True).run_pipeline()


REPEATED_PROSE_MD = "# Release notes\n\n" + "The build now passes on every supported platform.\n\n" * 12


def test_gopher_repetition_filter_runs_from_a_recipe(tmp_path):
    """datatrove's GopherRepetitionFilter, named as the issue's recipe names it, on real files:
    the document whose lines repeat is dropped with the filter's own reason, the rest stay."""
    pytest.importorskip("datatrove")
    pytest.importorskip("spacy")
    from datatrove.utils import _import_utils

    from codecorpus.reports.build import write_report

    _import_utils._is_package_available.cache_clear()  # a test before may have hidden spaCy

    root = write_repos(tmp_path / "corpus")
    (root / "repo-b" / "RELEASE.md").write_text(REPEATED_PROSE_MD)
    data = fixture_recipe(root)
    data["stages"]["gopher_rep"] = {"use": "datatrove.pipeline.filters:GopherRepetitionFilter",
                                    "kind": "filter", "after": "filters",
                                # the line rule alone: Gopher's n-gram and paragraph rules are for prose
                                "config": {"dup_line_frac": 0.3, "dup_para_frac": 1.0, "dup_para_char_frac": 1.0,
                                           "dup_line_char_frac": 1.0, "top_n_grams": [], "dup_n_grams": []}}
    run = tmp_path / "run"
    Executor(load_recipe_data(data), run, quiet=True).run_pipeline(until="gopher_rep")
    dropped = {(d["path"], d["reason"]) for d in drops(run, "gopher_rep")}
    assert dropped == {("RELEASE.md", "GopherRepetitionFilter:dup_line_frac")}
    s = stats(run, "gopher_rep")
    assert s["rows_in"] == s["rows_out"] + sum(s["dropped"].values()) == stats(run, "filters")["rows_out"]
    assert s["rows_out"] > 0
    write_report(run)
    table = pq.read_table(schema.RunPaths(run).report_table("drops", ".parquet")).to_pylist()
    assert any(r["stage"] == "gopher_rep" and r["reason"] == "GopherRepetitionFilter:dup_line_frac"
               for r in table)


@pytest.mark.parametrize(("stage", "message"), [
    ({"use": "m:f", "kind": "filter", "after": "tokenize"}, r"stages.mine.after: 'tokenize' is not a stage"),
    ({"use": "m:f", "kind": "filter", "after": "nowhere"}, r"stages.mine.after: 'nowhere' is not a stage"),
    ({"use": "m:f", "kind": "sorter", "after": "filters"}, r"stages.mine: kind"),
    ({"use": "not a path", "kind": "filter", "after": "filters"}, r"stages.mine: use"),
    ({"kind": "filter", "after": "filters"}, r"stages.mine: unknown stage"),
])
def test_bad_user_stage_keys_fail_when_the_recipe_loads(tmp_path, stage, message):
    data = fixture_recipe(tmp_path)
    data["stages"]["mine"] = stage
    with pytest.raises(RecipeError, match=message):
        load_recipe_data(data)


def test_stage_hash_follows_config_and_the_code_it_runs(stage_modules):
    mods = stage_modules / "mods"
    write_module(mods, "hashed_stage", """
        import pyarrow as pa

        def flag(table, limit=1):
            return pa.array([None] * table.num_rows, pa.string())
    """)
    data = fixture_recipe(write_repos(stage_modules / "corpus"))
    data["stages"]["mine"] = {"use": "hashed_stage:flag", "kind": "filter", "after": "filters"}
    first = stage_hashes(load_recipe_data(data), "plan")
    (mods / "hashed_stage.py").write_text((mods / "hashed_stage.py").read_text() + "\n# changed\n")
    edited = stage_hashes(load_recipe_data(data), "plan")
    data["stages"]["mine"]["config"] = {"limit": 2}
    configured = stage_hashes(load_recipe_data(data), "plan")
    names = [s.name for s in enabled_specs(load_recipe_data(data))]
    assert names[names.index("filters") + 1] == "mine"
    for name in ("ingest", "langid", "filters"):
        assert first[name] == edited[name] == configured[name]
    for name in ("mine", "dedup", "tokenize", "pack"):
        assert len({first[name], edited[name], configured[name]}) == 3

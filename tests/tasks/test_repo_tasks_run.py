"""The repository-tasks pipeline end to end on a local Ray, over a folder of git-made repositories.

The folder holds ``acme/proj`` (every kind of commit the source handles), its fork
``forks/fork`` (a clone with the project's last fix cherry-picked later) and
``broken/x`` (a ``.git`` git cannot open). The run writes the edit set, the train and
evaluation task files, the run manifest and the report; ``manifest verify`` passes;
1 and 2 workers give the same bytes; a rerun skips every task.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from tasks_repos import build_fork, build_project
from typer.testing import CliRunner

from codecorpus import schema
from codecorpus.cli import app
from codecorpus.config import load_recipe, load_recipe_data
from codecorpus.pipeline.pipelines import REPO_TASKS, enabled_specs, pipeline_of
from codecorpus.pipeline.spec import PLAN_INLINE_ENV
from codecorpus.preflight import check_recipe_inputs
from codecorpus.reports.build import write_report
from codecorpus.reports.run import load_run
from codecorpus.runtime.executor import Executor
from codecorpus.storage.parquet import read_parquet
from codecorpus.tasks import columns as C
from codecorpus.tasks import plan as tplan
from codecorpus.tasks import swebench
from conftest import run_outputs

SHIPPED = Path(__file__).resolve().parents[2] / "pipelines" / "repo-tasks.yaml"
EVAL_AFTER = "2024-01-15T00:00:00Z"


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("history")
    project = build_project(root / "acme")
    original = project.git("rev-parse", "HEAD")
    divide_fix = project.git("log", "--format=%H", "-F", "--grep=Fix division by zero in divide")
    build_fork(root / "forks", project, cherry_pick=original)
    (root / "broken" / "x" / ".git").mkdir(parents=True)
    return root, {"sqrt_fix": original, "divide_fix": divide_fix}


def recipe(root: Path) -> dict:
    return {
        "name": "history", "seed": 7,
        "sources": [{"type": "git", "name": "repos", "path": str(root)}],
        "stages": {
            "commits": {"commits_per_slice": 6},
            "commit_filters": {"max_files_changed": 10, "require_imperative": False},  # "Reject ..." is no verb
            "commit_dedup": {"buckets": 3},
            "task_candidates": {},
            "edit_set": {"target": "diff"},
            "sft_render": {},
            "task_outputs": {"eval_after": EVAL_AFTER},
        },
        "tokenizer": {"builtin": "qwen2.5"},
        "outputs": [{"name": "edit", "kind": "sft", "seq_len": 2048}],
    }  # fmt: skip


def run(root: Path, run_dir: Path, max_tasks: int | None = None):
    result = Executor(load_recipe_data(recipe(root)), run_dir, quiet=True, max_tasks=max_tasks).run_pipeline()
    write_report(run_dir)
    return result


@pytest.fixture(scope="module")
def finished(repos, tmp_path_factory, ray_local) -> Path:
    run_dir = tmp_path_factory.mktemp("tasks-run")
    run(repos[0], run_dir)
    return run_dir


def stats(run_dir: Path, stage: str) -> dict:
    return json.loads(schema.RunPaths(run_dir).stats(stage).read_text())


def records(run_dir: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "tasks" / name).read_text().splitlines()]


def test_recipe_runs_the_repo_tasks_pipeline(repos):
    r = load_recipe_data(recipe(repos[0]))
    assert pipeline_of(r) is REPO_TASKS
    assert [s.name for s in enabled_specs(r)] == [
        "commits", "commit_filters", "commit_dedup", "task_candidates", "edit_set", "sft_render",
        "task_outputs",
    ]  # fmt: skip


def test_every_stage_conserves_rows_and_names_its_drops(finished):
    for spec in REPO_TASKS:
        s = stats(finished, spec.name)
        assert s["rows_in"] == s["rows_out"] + sum(s["dropped"].values()), spec.name
    commits = stats(finished, "commits")
    assert commits["shards"] >= 5  # two histories in slices of 6, and the broken repository's drop
    assert commits["dropped"]["bad_repository"] == 1 and "merge" not in commits["dropped"]  # merges are changes
    # the edit set wants single commits: its CommitPackFT filters drop the two mainline merges
    assert stats(finished, "commit_filters")["dropped"]["merge"] == 2
    # the tasks' path reads the commits source, not the edit set's filters
    candidates = stats(finished, "task_candidates")
    assert candidates["rows_in"] == commits["rows_out"]
    assert "message_too_few_words" not in candidates["dropped"]
    dedup = stats(finished, "commit_dedup")
    # the fork repeats the project's commits (same shas, another repository) and the cherry-pick
    assert dedup["dropped"]["duplicate_exact"] >= 2
    edit = stats(finished, "edit_set")
    assert edit["dropped"]["eval_holdout"] >= 2


def test_task_outputs_are_swebench_instances_split_by_time(finished, repos):
    _, shas = repos
    train, held = records(finished, swebench.TRAIN_FILE), records(finished, swebench.EVAL_FILE)
    assert train and held
    for r in train + held:
        assert swebench.check_instance(r) == []
    cut = dt.datetime.fromisoformat(EVAL_AFTER.replace("Z", "+00:00"))
    assert all(dt.datetime.fromisoformat(r["created_at"].replace("Z", "+00:00")) <= cut for r in train)
    assert all(dt.datetime.fromisoformat(r["created_at"].replace("Z", "+00:00")) > cut for r in held)
    ids = {r["instance_id"] for r in train} | {r["instance_id"] for r in held}
    assert f"acme__proj-{shas['divide_fix'][:12]}" in {r["instance_id"] for r in train}
    assert f"acme__proj-{shas['sqrt_fix'][:12]}" in {r["instance_id"] for r in held}
    # the fork's copies of the project's changes and its later cherry-pick are the same tasks: the
    # originals are kept (task_outputs' own exact dedup; commit_dedup serves the edit set)
    assert not any(i.startswith("forks__fork-") for i in ids)
    outputs = stats(finished, "task_outputs")
    assert outputs["dropped"]["duplicate_task"] >= 2
    assert {r["statement_source"] for r in train + held} == {"commits"}  # no PR numbers, no metadata
    assert [r["instance_id"] for r in train] == sorted(r["instance_id"] for r in train)
    fix = next(r for r in train if r["commit"] == shas["divide_fix"])
    assert "tests/test_calc.py" in fix["test_patch"] and "src/calc.py" in fix["patch"]
    assert outputs["rows_out"] == len(train) + len(held) == outputs["rows_in"] - outputs["dropped"]["duplicate_task"]
    assert outputs["rows_in"] == stats(finished, "task_candidates")["rows_out"]


def test_edit_set_holds_no_evaluation_commit_and_megatron_reads_it(finished):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    held = {r["instance_id"] for r in records(finished, swebench.EVAL_FILE)}
    run = schema.RunPaths(finished)
    edit_ids = set()
    for i in range(stats(finished, "edit_set")["shards"]):
        edit_ids |= set(read_parquet(run.part("edit_set", i)).column(schema.TRACE_TASK_ID).to_pylist())
    assert edit_ids and not edit_ids & held
    m = json.loads((finished / "shards" / "edit" / "manifest.json").read_text())
    assert m["kind_of_set"] == "edit" and m["sft"]["formats"] == {"edit": m["totals"]["documents"]}
    assert 0 < m["totals"]["loss_tokens"] < m["totals"]["tokens"]
    shard = m["shards"][0]
    ds = IndexedDataset(str(finished / "shards" / "edit" / Path(shard["files"]["bin"]["path"]).stem), mmap=True)
    assert len(ds) == shard["segments"] and int(np.sum(ds.sequence_lengths)) == shard["tokens"]


def test_run_manifest_lists_the_task_outputs_and_verify_checks_them(finished, tmp_path):
    m = json.loads((finished / "manifest.json").read_text())
    assert set(m["sets"]) == {"edit"}
    assert {k: v["path"] for k, v in m["files"].items()} == {"tasks": "tasks/tasks.jsonl",
                                                            "tasks-eval": "tasks/tasks-eval.jsonl"}
    assert m["files"]["tasks"]["records"] == len(records(finished, swebench.TRAIN_FILE))
    result = CliRunner().invoke(app, ["manifest", "verify", str(finished)])
    assert result.exit_code == 0, result.output
    copy = tmp_path / "copy"
    shutil.copytree(finished, copy)
    with (copy / "tasks" / "tasks.jsonl").open("a") as f:
        f.write("{}\n")
    result = CliRunner().invoke(app, ["manifest", "verify", str(copy)])
    assert result.exit_code == 1 and "tasks/tasks.jsonl: sha256" in result.output


def test_report_has_the_tasks_funnel_and_distributions(finished):
    funnel = {r["what"]: r["count"] for r in read_parquet(finished / "report" / "tasks_funnel.parquet").to_pylist()}
    assert funnel["commits listed"] == stats(finished, "commits")["rows_in"]
    assert funnel["task candidates"] == stats(finished, "task_candidates")["rows_out"]
    assert funnel["evaluation tasks"] == len(records(finished, swebench.EVAL_FILE))
    assert funnel["training tasks"] == len(records(finished, swebench.TRAIN_FILE))
    dist = read_parquet(finished / "report" / "tasks_distributions.parquet").to_pylist()
    langs = {(r["split"], r["lang"]): r["tasks"] for r in dist if r["metric"] == "lang"}
    assert sum(langs.values()) == funnel["unique tasks (duplicates across repositories dropped)"]
    assert {r["metric"] for r in dist} == {"patch_lines", "patch_files", "description_chars", "lang"}
    assert "Tasks from repository history" in (finished / "report" / "index.html").read_text()
    sources = read_parquet(finished / "report" / "tasks_statement_sources.parquet").to_pylist()
    assert sum(r["tasks"] for r in sources) == stats(finished, "task_outputs")["rows_out"]
    assert {r["statement_source"] for r in sources} == {"commits"}  # no PR numbers, no metadata in this history
    assert read_parquet(finished / "report" / "tasks_left_out.parquet").num_rows == 0  # the whole history was read


def test_report_funnel_lists_the_stages_in_the_order_they_ran(repos, finished, tmp_path):
    """The recipe dump's ``stages:`` keys put ``sft_render`` first (the SFT list comes before this
    one); the funnel follows this run's pipeline, as the executor ran it."""
    ran = [spec.name for spec in enabled_specs(load_recipe_data(recipe(repos[0])))]
    rows = read_parquet(finished / "report" / "funnel.parquet").to_pylist()
    assert [(r["step"], r["stage"]) for r in rows if r["set"] is None] == list(enumerate(ran))
    assert f"stages: {' -&gt; '.join(ran)}" in (finished / "report" / "index.html").read_text()
    # rewritten where the mined repositories are gone (their path is checked when a recipe loads)
    moved = tmp_path / "moved"
    shutil.copytree(finished, moved, ignore=shutil.ignore_patterns("report"))
    data = yaml.safe_load((moved / "recipe.yaml").read_text())
    data["sources"][0]["path"] = str(tmp_path / "gone")
    (moved / "recipe.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_run(moved).stages == ran


def test_report_set_row_and_kind_are_the_edit_sets_own(finished):
    """task_outputs writes the edit set (its spec owns shards/): its row in the funnel gives the
    documents and tokens the set's manifest records; the sets table gives its kind as the manifest
    does (``edit``)."""
    manifests = {p.parent.name: json.loads(p.read_text()) for p in (finished / "shards").glob("*/manifest.json")}
    rows = [r for r in read_parquet(finished / "report" / "funnel.parquet").to_pylist() if r["set"] is not None]
    step = len(REPO_TASKS) - 1
    assert len(manifests) == 1 and [(r["stage"], r["set"], r["step"], r["docs_out"], r["tokens_out"]) for r in rows] == [
        ("task_outputs", name, step, m["totals"]["documents"], m["totals"]["tokens"]) for name, m in manifests.items()]
    sets = read_parquet(finished / "report" / "sets.parquet").to_pylist()
    assert [(r["set"], r["kind"]) for r in sets] == [(name, "edit") for name in manifests]


def test_report_page_draws_every_chart_in_chromium(finished, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH: install Debian's `chromium` package (.ci/run does)")
    page = finished / "report" / "index.html"
    done = subprocess.run([
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-extensions", "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path}",
        "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", page.as_uri(),
    ], capture_output=True, text=True, timeout=180, check=True)  # fmt: skip
    charts = page.read_text().count('<div class="chart" data-spec=')
    assert charts >= 2 and f'data-charts-drawn="{charts}"' in done.stdout and "Uncaught" not in done.stderr


def test_same_bytes_with_one_and_two_workers_and_a_rerun_skips_everything(repos, finished, tmp_path):
    """One task at a time against two at once (the reference) on the same 2-CPU Ray."""
    one = tmp_path / "one"
    run(repos[0], one, max_tasks=1)
    a, b = run_outputs(finished), run_outputs(one)
    assert a.keys() == b.keys() and "tasks/tasks.jsonl" in a
    assert [k for k in a if a[k] != b[k]] == []
    again = run(repos[0], one)
    assert all(s.ran_jobs == 0 and s.skipped_jobs > 0 for s in again.stages)
    assert run_outputs(one) == b


def test_planning_in_tasks_gives_the_drivers_plan_and_bytes(repos, tmp_path, monkeypatch, caplog, ray_local):
    """A folder of more than ``INLINE_REPOSITORIES`` is planned in tasks: the same plan hash and
    bytes, a walk of every parent's files included (written by the planning tasks), the broken
    repository's drop too."""
    data = recipe(repos[0])
    data["stages"]["commits"] = {"commits_per_slice": 6, "first_parent": False}
    monkeypatch.setattr(tplan, "BATCH_REPOSITORIES", 1)  # a task per repository: their results joined in order
    runs, said = {}, {}
    for inline in ("64", "0"):
        monkeypatch.setenv(PLAN_INLINE_ENV, inline)
        runs[inline] = tmp_path / f"inline-{inline}"
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="codecorpus.tasks.plan"):
            Executor(load_recipe_data(data), runs[inline], quiet=True).run_pipeline()
        said[inline] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("commits: planned")]
    assert said["64"] == [] and len(said["0"]) == 1
    assert said["0"][0].startswith("commits: planned 3 repositories of repos in planning tasks (3)")
    inline, in_tasks = (run_outputs(runs[k]) for k in ("64", "0"))
    assert [k for k in inline if k.startswith("_plan/commits/")]  # the acme history spans slices
    assert inline.keys() == in_tasks.keys() and [k for k in inline if inline[k] != in_tasks[k]] == []
    hashes = [json.loads((runs[k] / "commits" / "_stage.json").read_text()) for k in ("64", "0")]
    assert hashes[0] == hashes[1]
    assert stats(runs["0"], "commits")["dropped"].get("bad_repository") == 1


def _rows(run_dir: Path, stage: str, kind: str) -> list[dict]:
    run = schema.RunPaths(run_dir)
    folder = run.stage_dir(stage) if kind == "rows" else run.dropped_dir(stage)
    return [r for p in sorted(folder.glob("part-*.parquet")) for r in read_parquet(p).to_pylist()]


def test_small_histories_share_a_shard_and_give_the_same_rows(repos, finished, tmp_path, ray_local):
    """With slices of 1,000 commits the folder's three repositories (the broken one's drop
    included) are one commits shard, and so one shard of every later stage: the rows and drops
    are the six-commit slices' (``finished``), in the same order."""
    data = recipe(repos[0])
    data["stages"]["commits"] = {"commits_per_slice": 1000}
    run_dir = tmp_path / "one-shard"
    Executor(load_recipe_data(data), run_dir, quiet=True).run_pipeline()
    assert stats(finished, "commits")["shards"] > 3 and stats(run_dir, "commits")["shards"] == 1
    assert {stats(run_dir, spec.name)["shards"] for spec in REPO_TASKS if spec.name != "task_outputs"} == {1}
    for kind in ("rows", "drops"):
        assert _rows(run_dir, "commits", kind) == _rows(finished, "commits", kind)
    assert records(run_dir, swebench.TRAIN_FILE) == records(finished, swebench.TRAIN_FILE)


def test_commit_rows_carry_the_history(finished, repos):
    _, shas = repos
    run = schema.RunPaths(finished)
    rows = [r for i in range(stats(finished, "commits")["shards"]) for r in read_parquet(run.part("commits", i)).to_pylist()]
    fix = next(r for r in rows if r[C.SHA] == shas["divide_fix"] and r[schema.REPO] == "acme/proj")
    assert {f["path"] for f in fix[C.FILES]} == {"src/calc.py", "tests/test_calc.py"}
    assert fix[schema.LICENSE] == "MIT"


def test_shipped_recipe_loads_and_names_a_repository():
    r = load_recipe(SHIPPED)
    assert pipeline_of(r) is REPO_TASKS
    check_recipe_inputs(r)
    src = Path(r.sources[0].path)
    assert src == SHIPPED.parents[1] and (src / ".git").exists()
    assert r.stages.task_outputs.eval_after is not None and r.outputs[0].kind == "sft"
    # the demo's bound names its own history: a source pointed elsewhere is read whole
    assert r.stages.commits.max_commits_per_repo == {r.sources[0].repo: 300}


def test_a_changed_task_setting_redoes_the_sink_only(repos, finished, tmp_path):
    import shutil

    run_dir = tmp_path / "changed"
    shutil.copytree(finished, run_dir)
    data = recipe(repos[0])
    data["stages"]["task_outputs"] = {"eval_after": EVAL_AFTER, "version": "2.0"}
    result = Executor(load_recipe_data(data), run_dir, quiet=True).run_pipeline()
    ran = {s.name: s.ran_jobs for s in result.stages}
    assert ran.pop("task_outputs") > 0 and set(ran.values()) == {0}
    assert {r["version"] for r in records(run_dir, swebench.TRAIN_FILE)} == {"2.0"}
    def shard_files(root: Path) -> dict[str, bytes]:  # the manifest holds the recipe's hash: it differs
        return {p.name: p.read_bytes() for p in (root / "shards" / "edit").iterdir() if p.name != "manifest.json"}

    assert shard_files(run_dir) == shard_files(finished)  # repacked: the same bytes
    assert CliRunner().invoke(app, ["manifest", "verify", str(run_dir)]).exit_code == 0


@pytest.mark.parametrize(("change", "message"), [
    ({"sources": [{"type": "local", "name": "x", "path": "."}]}, "takes only `type: git` sources"),
    ({"stages": {"commits": {}, "tokenize": {}}}, "do not run on commits"),
    ({"stages": {"commits": {}, "sft_render": {}}}, "stages.sft_render needs stages.edit_set"),
])  # fmt: skip
def test_a_commits_recipe_is_checked_when_it_loads(repos, change, message):
    from codecorpus.model import RecipeError

    with pytest.raises(RecipeError, match=message):
        load_recipe_data({**recipe(repos[0]), **change})


def test_a_walk_without_commits_is_a_recipe_error_before_any_work(repos, tmp_path, ray_local):
    from codecorpus.model import RecipeError

    data = recipe(repos[0])
    data["sources"] = [{"type": "git", "name": "one", "path": str(repos[0] / "acme" / "proj")}]
    data["stages"]["commits"] = {"until": "2001-01-01T00:00:00"}
    with pytest.raises(RecipeError, match=r"stages\.commits: no commit"):
        Executor(load_recipe_data(data), tmp_path / "none", quiet=True).run_pipeline()
    assert not (tmp_path / "none" / "commits").exists()

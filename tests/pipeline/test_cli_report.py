"""The CLI writes the report after the run; a report that fails never loses the run."""

from __future__ import annotations

import json
import re

import yaml
from typer.testing import CliRunner

from codecorpus import schema
from codecorpus.cli import app
from codecorpus.reports import build
from conftest import fixture_recipe, write_repos


def test_report_failure_keeps_the_run_and_report_rebuilds_it(tmp_path, ray_local, monkeypatch):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(fixture_recipe(write_repos(tmp_path / "corpus"), name="cli-report")))
    run = tmp_path / "run"

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(build, "write_report", broken)
    res = CliRunner().invoke(app, ["run", str(recipe), "--out", str(run), "--workers", "2", "--quiet"])
    assert res.exit_code == 0, res.output
    assert "report failed" in res.output and f"codecorpus report {run}" in " ".join(res.output.split())
    paths = schema.RunPaths(run)
    assert paths.manifest.is_file() and not paths.report_index.exists()
    monkeypatch.undo()
    res = CliRunner().invoke(app, ["report", str(run)])
    assert res.exit_code == 0, res.output
    assert paths.report_index.is_file() and paths.report_table("funnel", ".parquet").is_file()


def test_run_prints_where_the_time_went(tmp_path, ray_local):
    """Start-up, then one line per stage with its task seconds, CPU and share outside tasks."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(fixture_recipe(write_repos(tmp_path / "corpus"), name="cli-timing")))
    res = CliRunner().invoke(app, ["run", str(recipe), "--out", str(tmp_path / "run"), "--workers", "2"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "time on 2 CPUs, start-up" in text and "plan" in text
    stages = [json.loads(p.read_text())["stage"] for p in sorted((tmp_path / "run").glob("*/_stats.json"))]
    measured = []
    for stage in stages:
        line = re.search(rf"{stage} +([\d.]+) s wall +([\d.]+) task-s +([\d.]+) CPU-s +(\d+)% outside", text)
        assert line, (stage, text[-2000:])
        wall, task_s, _cpu, share = map(float, line.groups())
        assert 0 <= share <= 100
        measured.append((wall, task_s))
    # printed to 0.1 s: a stage of this tiny corpus can round to 0.0 on a fast, idle machine
    assert sum(w for w, _ in measured) > 0 and sum(t for _, t in measured) > 0
    outside = re.search(r"outside tasks: ([\d.]+) s \(start-up ([\d.]+), stages ([\d.]+), end ([\d.]+) "
                        r"with the report ([\d.]+)\)", text)
    assert outside, text[-2000:]
    total, start_up, stages_out, end, report = map(float, outside.groups())
    assert abs(total - (start_up + stages_out + end)) <= 0.15  # the parts add up (each rounded to 0.1 s)
    assert report <= end + 0.1  # the report is part of the end
    head = re.search(r"start-up ([\d.]+) s \(imports ([\d.]+), Ray ([\d.]+), plan ([\d.]+) beside it\)", text)
    assert head and float(head.group(1)) == start_up
    # start-up runs until the first stage begins: at least the imports and Ray's start
    assert start_up + 0.1 >= float(head.group(2)) + float(head.group(3))
    assert "MB/s" in text and "docs/s" in text and "ETA" in text  # the progress bars' throughput columns

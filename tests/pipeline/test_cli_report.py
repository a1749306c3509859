"""The CLI writes the report after the run; a report that fails never loses the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from codecorpus import schema
from codecorpus.cli import app
from codecorpus.reports import build
from conftest import fixture_recipe, write_repos

REPO = Path(__file__).resolve().parents[2]


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
    _total, start_up, _stages, end, report = map(float, outside.groups())
    assert report <= end + 0.1  # the report is part of the end
    head = re.search(r"start-up ([\d.]+) s \(before Ray ([\d.]+), Ray ([\d.]+), plan ([\d.]+) beside it\)", text)
    assert head, text[-2000:]
    # start-up runs until the pipeline begins: at least what came before Ray's start, and Ray's start
    assert start_up + 0.1 >= float(head.group(2)) + float(head.group(3))
    assert "MB/s" in text and "docs/s" in text and "ETA" in text  # the progress bars' throughput columns


def test_the_time_outside_tasks_is_the_wall_time_less_the_task_seconds(tmp_path):
    """The command's own account, measured around its process as ``bench/e2e_vs_datatrove.py`` does:
    its wall time, until the account's last line, less its task seconds over the CPUs (the line
    leaves out the interpreter's exit after it, Ray's own teardown included)."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(fixture_recipe(write_repos(tmp_path / "corpus"), name="cli-wall")))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "200"}
    t0 = time.perf_counter()
    wall, lines = None, []
    with subprocess.Popen([sys.executable, "-m", "codecorpus", "run", str(recipe), "--out", str(tmp_path / "run"),
                           "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env) as done:  # fmt: skip
        for line in done.stdout:
            lines.append(line)
            if "outside tasks:" in line:
                wall = time.perf_counter() - t0
    text = "".join(lines)
    assert done.returncode == 0 and wall is not None, text[-3000:]
    task_s = sum(float(t) for t in re.findall(r"([\d.]+) task-s", text))
    parts = re.search(r"outside tasks: ([\d.]+) s \(start-up ([\d.]+), stages ([\d.]+), end ([\d.]+) ", text)
    assert parts, text[-3000:]
    total, start_up, stages, end = map(float, parts.groups())
    assert abs(total - (start_up + stages + end)) <= 0.15  # each printed to 0.1 s
    assert abs(total - (wall - task_s / 2)) <= 0.5, (total, wall, task_s)

"""The CLI writes the report after the run; a report that fails never loses the run."""

from __future__ import annotations

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

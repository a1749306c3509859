"""A run's private Ray keeps Ray's token authentication, without Ray's warning about it at every start."""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

from conftest import fixture_recipe, write_repos


def test_a_cli_run_has_token_auth_and_no_warning(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(fixture_recipe(write_repos(tmp_path / "corpus"), name="auth", seed=1)))
    home = tmp_path / "home"  # a new user's: no Ray token yet
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"} | {"HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "codecorpus", "run", str(recipe), "--out", str(tmp_path / "run"), "--workers", "1",
         "--until", "ingest", "--quiet"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Token authentication is enabled" not in proc.stderr + proc.stdout
    assert (home / ".ray" / "auth_token").is_file()  # Ray made the token: its authentication is on

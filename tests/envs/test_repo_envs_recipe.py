"""pipelines/repo-envs.yaml as shipped: the example folders become snapshot repositories with
the commit ids the example task names, both environments verify (at least 5 tests each, per
test, reproduced in a fresh tree), the CLI prints each one's verdict, the task validates, and
``manifest verify`` accepts the run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from envs_helpers import needs_bwrap

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "pipelines" / "repo-envs.yaml"
pytestmark = needs_bwrap


def test_shipped_recipe_runs_and_verifies(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    run = tmp_path / "run"
    cmd = [sys.executable, "-c", "from codecorpus.cli import app; app()"]
    proc = subprocess.run([*cmd, "run", str(RECIPE), "--out", str(run), "--quiet"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    repos = sorted(json.loads(p.read_text())["repo"] for p in run.glob("envs/*.json"))
    assert repos == (["calc", "greet"] if shutil.which("node") else ["calc"])
    tasks = [json.loads(line) for line in (run / "verified" / "tasks.jsonl").read_text().splitlines()]
    assert [json.loads(t["FAIL_TO_PASS"]) for t in tasks] == [["test_calc.CalcTest.test_clamp"]]
    # the per-repository verdicts, printed at the end of the run
    verdicts = [ln for ln in proc.stderr.splitlines() if re.match(r"^(calc|greet)@[0-9a-f]{12}: ", ln)]
    assert re.fullmatch(r"calc@[0-9a-f]{12}: verified \(5 passed, 0 failed, [\d.]+ s\)", verdicts[0])
    assert len(verdicts) == (2 if shutil.which("node") else 1), proc.stderr
    verify = subprocess.run([*cmd, "manifest", "verify", str(run)], env=env, capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr

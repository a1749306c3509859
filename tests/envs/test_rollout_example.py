"""examples/rollout.py on the shipped repo-envs recipe's run: the scripted policy's gold
edits, made through write_file, resolve the example task (reward 1.0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from envs_helpers import needs_bwrap

REPO = Path(__file__).resolve().parents[2]
pytestmark = needs_bwrap


def test_the_scripted_policy_earns_the_reward(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "codecorpus", "run", str(REPO / "pipelines" / "repo-envs.yaml"),
                           "--out", str(run), "--quiet"], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    example = subprocess.run([sys.executable, str(REPO / "examples" / "rollout.py"), str(run)], env=env,
                             capture_output=True, text=True, timeout=600)
    assert example.returncode == 0, example.stdout + example.stderr[-3000:]
    last = example.stdout.strip().splitlines()[-1]
    assert last.endswith("resolved=True reward=1.0"), example.stdout
    assert "+++ b/calc.py" in example.stdout  # the diff the policy's writes made

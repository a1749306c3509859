"""``codecorpus evaluate``: SWE-bench predictions graded on a real local Ray, the harness's
report layout written, bad lines reported with reasons, a rerun resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from envs_helpers import PATCH, needs_bwrap
from rollout_helpers import F2P, planted_run

from codecorpus.envs import evaluation
from codecorpus.envs.manifest_tasks import tasks_of

pytestmark = needs_bwrap
SRC = str(Path(__file__).resolve().parents[2] / "src")
MODEL = "org/model-7b"


def _evaluate(manifest: Path, preds: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "codecorpus", "evaluate", str(manifest), str(preds),
                           "--out", str(out), "--workers", "2"], env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def test_evaluate_writes_the_harness_layout_and_resumes(tmp_path):
    manifest, _ = planted_run(tmp_path / "run")
    assert sorted(tasks_of(manifest)) == ["example__calc-1", "example__calc-2", "example__calc-3"]
    rows = [{"instance_id": "example__calc-1", "model_name_or_path": MODEL, "model_patch": PATCH},
            {"instance_id": "example__calc-2", "model_name_or_path": MODEL,
             "model_patch": PATCH.replace("return a - b", "return a * b")},
            {"instance_id": "example__calc-3", "model_name_or_path": MODEL, "model_patch": ""},
            {"instance_id": "nope-1", "model_name_or_path": MODEL, "model_patch": PATCH},
            {"instance_id": "example__calc-1", "model_name_or_path": MODEL, "model_patch": ""},
            {"instance_id": "example__calc-2", "model_patch": PATCH}]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n[1, 2]\n")
    out = tmp_path / "out"
    proc = _evaluate(manifest, preds, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 to grade" not in proc.stderr and "2 to grade" in proc.stderr, proc.stderr
    report = json.loads((out / "org__model-7b" / "example__calc-1" / evaluation.REPORT).read_text())
    one = report["example__calc-1"]
    assert one["resolved"] and one["patch_successfully_applied"] and one["patch_exists"]
    assert one["tests_status"]["FAIL_TO_PASS"] == {"success": [F2P], "failure": []}
    assert set(one["tests_status"]) == {"FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"}
    two = json.loads((out / "org__model-7b" / "example__calc-2" / evaluation.REPORT).read_text())["example__calc-2"]
    assert not two["resolved"] and not two["patch_successfully_applied"]
    assert two["reason"] == "patch_does_not_apply"
    summary = json.loads((out / evaluation.SUMMARY).read_text())
    assert summary["resolved_ids"] == ["example__calc-1"]
    assert summary["unresolved_ids"] == ["example__calc-2"]
    assert summary["empty_patch_ids"] == ["example__calc-3"]
    assert summary["failure_reasons"] == {"example__calc-2": "patch_does_not_apply"}
    assert summary["total_instances"] == 3 and summary["error_ids"] == [] and summary["incomplete_ids"] == []
    reasons = [(p["line"], p["reason"]) for p in summary["problems"]]
    assert reasons == [(4, "unknown_instance"), (5, "duplicate_prediction"), (6, "malformed_prediction"),
                       (7, "malformed_prediction"), (8, "malformed_prediction")]
    # Every line is accounted for: graded + empty + problems.
    assert len(summary["submitted_ids"]) + len(summary["problems"]) == 8
    # A rerun grades nothing again and writes the same summary.
    before = (out / evaluation.SUMMARY).read_bytes()
    again = _evaluate(manifest, preds, out)
    assert again.returncode == 0 and "0 to grade" in again.stderr, again.stderr[-2000:]
    assert (out / evaluation.SUMMARY).read_bytes() == before

"""``codecorpus evaluate``: SWE-bench predictions graded against an RL manifest's tasks.

Input is SWE-bench's predictions format, one JSON object a line with ``instance_id``,
``model_name_or_path`` and ``model_patch``. Output is the harness's report layout under
``OUT``:

- ``OUT/<model>/<instance_id>/report.json``: ``{instance_id: {patch_is_None, patch_exists,
  patch_successfully_applied, resolved, tests_status}}`` with ``tests_status`` holding
  FAIL_TO_PASS / PASS_TO_PASS (and FAIL_TO_FAIL / PASS_TO_FAIL, empty) each as ``success``
  and ``failure`` lists, the keys ``swebench.harness.grading.get_eval_report`` writes; this
  module adds ``reason`` (why a patch was not graded: ``patch_does_not_apply``, a sandbox
  violation) and ``reward``.
- ``OUT/<model>/<instance_id>/run_instance.log``: the patch and the per-test statuses.
- ``OUT/summary.json``: the keys of the harness's run report (``total_instances``,
  ``resolved_ids``, ``unresolved_ids``, ``empty_patch_ids``, ``error_ids`` ...), with
  ``problems``: every prediction line not graded (``malformed_prediction``,
  ``unknown_instance``, ``duplicate_prediction``) with its line number and reason.

Each patch is graded in its own fresh session tree (``session.evaluate_patch``). A
report.json is written last, atomically: a rerun skips every instance that has one. Lines
that are not graded never stop the run; ``lines = graded + empty + problems`` always holds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codecorpus.envs import sandbox as sb
from codecorpus.envs.manifest_tasks import tasks_of
from codecorpus.envs.session import SessionConfig, TaskEntry, evaluate_patch
from codecorpus.storage.atomic import atomic_write_bytes

REPORT = "report.json"
LOG = "run_instance.log"
SUMMARY = "summary.json"
MALFORMED = "malformed_prediction"
UNKNOWN = "unknown_instance"
DUPLICATE = "duplicate_prediction"
KEYS = ("instance_id", "model_name_or_path", "model_patch")


@dataclass(frozen=True)
class Prediction:
    line: int
    instance_id: str
    model: str
    patch: str | None


def read_predictions(path: Path, known: set[str]) -> tuple[list[Prediction], list[dict]]:
    """The gradable predictions of a JSONL file, and a problem row per line that is not one."""
    preds, problems, seen = [], [], set()
    for n, line in enumerate(Path(path).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            problems.append({"line": n, "instance_id": None, "reason": MALFORMED, "detail": str(err)[:200]})
            continue
        bad = _malformed(row)
        if bad:
            iid = row.get("instance_id") if isinstance(row, dict) else None
            problems.append({"line": n, "instance_id": iid if isinstance(iid, str) else None,
                             "reason": MALFORMED, "detail": bad})
            continue
        iid = row["instance_id"]
        if iid not in known:
            problems.append({"line": n, "instance_id": iid, "reason": UNKNOWN,
                             "detail": "no task of the manifest has this instance_id"})
        elif iid in seen:
            problems.append({"line": n, "instance_id": iid, "reason": DUPLICATE,
                             "detail": "an earlier line predicts this instance; it is the one graded"})
        else:
            seen.add(iid)
            preds.append(Prediction(n, iid, row["model_name_or_path"], row["model_patch"]))
    return preds, problems


def _malformed(row: object) -> str:
    if not isinstance(row, dict):
        return f"expected a JSON object, found {type(row).__name__}"
    missing = [k for k in KEYS if k not in row]
    if missing:
        return f"missing {', '.join(missing)}"
    if not isinstance(row["instance_id"], str) or not isinstance(row["model_name_or_path"], str):
        return "instance_id and model_name_or_path must be strings"
    if row["model_patch"] is not None and not isinstance(row["model_patch"], str):
        return "model_patch must be a string or null"
    return ""


def instance_dir(out: Path, pred: Prediction) -> Path:
    """``OUT/<model>/<instance_id>`` (``/`` in names as ``__``, as the harness spells them)."""
    return Path(out) / _safe(pred.model) / _safe(pred.instance_id)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name.replace("/", "__")) or "_"


def is_empty(pred: Prediction) -> bool:
    return pred.patch is None or not pred.patch.strip()


def grade_one(entry: TaskEntry, pred: Prediction, cfg: SessionConfig, out: str) -> dict:
    """Grade one prediction in a fresh session; write its report.json (last) and log."""
    limits = entry.spec.get("limits")
    if limits:
        cfg = cfg.model_copy(update={"test_limits": sb.Limits(**limits)})
    report = evaluate_patch(entry, pred.patch or "", cfg)
    where = instance_dir(Path(out), pred)
    keep = ("patch_is_None", "patch_exists", "patch_successfully_applied", "resolved",
            "tests_status", "reason", "reward")
    harness = {pred.instance_id: {k: report[k] for k in keep}}
    log = (f"instance: {pred.instance_id}\nmodel: {pred.model}\nreason: {report['reason']}\n"
           f"test runs: {report['test_runs']}\n"
           + "".join(f"{t}: {s}\n" for t, s in report["statuses"].items())
           + f"--- patch ---\n{pred.patch or ''}")
    atomic_write_bytes(where / LOG, log.encode())
    atomic_write_bytes(where / REPORT, (json.dumps(harness, indent=2, sort_keys=True) + "\n").encode())
    return {"instance_id": pred.instance_id, "resolved": report["resolved"], "reason": report["reason"]}


def done(out: Path, pred: Prediction) -> bool:
    """Whether a prediction has its report (a resumed run skips it)."""
    return (instance_dir(out, pred) / REPORT).is_file()


def summary(out: Path, instances: set[str], preds: list[Prediction], problems: list[dict]) -> dict:
    """The run report, read from the per-instance reports on disk (so a resumed run counts
    what every earlier run wrote)."""
    resolved, unresolved, errors, empty, reasons = [], [], [], [], {}
    for pred in preds:
        if is_empty(pred):
            empty.append(pred.instance_id)
            continue
        path = instance_dir(out, pred) / REPORT
        try:
            report = json.loads(path.read_text())[pred.instance_id]
        except (OSError, ValueError, KeyError):
            errors.append(pred.instance_id)
            continue
        (resolved if report["resolved"] else unresolved).append(pred.instance_id)
        if report.get("reason"):
            reasons[pred.instance_id] = report["reason"]
    completed = sorted(resolved + unresolved)
    submitted = sorted({p.instance_id for p in preds})
    return {"total_instances": len(instances), "submitted_instances": len(submitted),
            "completed_instances": len(completed), "resolved_instances": len(resolved),
            "unresolved_instances": len(unresolved), "empty_patch_instances": len(empty),
            "error_instances": len(errors), "completed_ids": completed,
            "incomplete_ids": sorted(instances - set(submitted)), "empty_patch_ids": sorted(empty), "submitted_ids": submitted,
            "resolved_ids": sorted(resolved), "unresolved_ids": sorted(unresolved),
            "error_ids": sorted(errors), "failure_reasons": dict(sorted(reasons.items())),
            "problems": problems, "schema_version": 2}


def write_summary(out: Path, report: dict) -> Path:
    path = Path(out) / SUMMARY
    atomic_write_bytes(path, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode())
    return path


Mapper = Callable[[str, Callable[..., Any], Sequence[tuple]], Iterator[tuple[int, Any, "str | None"]]]
"""Runs calls in parallel, yielding (index, result, error) as each finishes (the runtime's
``parallel.map_calls``, given by the command: this module never imports Ray)."""


def evaluate_predictions(manifest: Path, predictions: Path, out: Path, cfg: SessionConfig,
                         mapper: Mapper, progress: Callable[[str], None] = print) -> dict:
    """Grade every gradable prediction not graded yet (``done``) in parallel; write and
    return the summary. A call that failed in its worker is an error id, never the run's end."""
    entries = tasks_of(manifest)
    preds, problems = read_predictions(predictions, set(entries))
    todo = [p for p in preds if not is_empty(p) and not done(out, p)]
    skipped = sum(1 for p in preds if not is_empty(p)) - len(todo)
    progress(f"{len(preds)} predictions, {len(problems)} not gradable, {skipped} done before, "
             f"{len(todo)} to grade")
    calls = [(entries[p.instance_id], p, cfg, str(out)) for p in todo]
    for i, result, error in mapper("evaluate", grade_one, calls):
        if error:
            progress(f"{todo[i].instance_id}: error: {error}")
        else:
            progress(f"{todo[i].instance_id}: {'resolved' if result['resolved'] else 'unresolved'}"
                     + (f" ({result['reason']})" if result["reason"] else ""))
    report = summary(out, set(entries), preds, problems)
    write_summary(out, report)
    return report

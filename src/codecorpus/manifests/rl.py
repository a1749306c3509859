"""The RL manifest of an environments run: the verified environments and tasks, with hashes.

``manifest.json`` of kind ``codecorpus.rl`` lists every environment spec (``envs/*.json``:
path, ``spec_sha256``, repository, revision, cache key) and the verified task set
(``verified/tasks.jsonl``: path, sha256, count, and per task its instance id, environment
and the sha256 of its JSON line). Sorted keys, relative paths, no timestamps: the same run
gives the same bytes. A spec's ``spec_sha256`` is its identity hash (``envs.spec.
identity_hash``: everything but the measured durations and test counts), so the same inputs
give the same manifest although the measurements in the spec files differ run to run.
``verify`` trusts none of it: it re-hashes every spec and task file, re-reads every task
line, checks each spec against the shipped schema and each task's FAIL_TO_PASS.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema

from codecorpus.envs import spec as envspec
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import atomic_write_bytes, sha256_file

RL_MANIFEST_KIND = "codecorpus.rl"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"


def _line_hash(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()


def _task_entries(path: Path) -> list[dict[str, Any]]:
    entries = []
    for line in path.read_text().splitlines():
        task = json.loads(line)
        entries.append({"instance_id": task["instance_id"], "repo": task["repo"],
                        "environment": task["environment"], "sha256": _line_hash(line)})
    return entries


def build_manifest(root: Path, envs_dir: str, tasks_file: str) -> dict[str, Any]:
    """The RL manifest of the run at ``root`` from the files on disk."""
    envs = []
    for path in store.list_files(root / envs_dir, "*.json", fetch=True):
        doc = json.loads(path.read_text())
        envs.append({"path": f"{envs_dir}/{path.name}", "spec_sha256": envspec.identity_hash(doc), "repo": doc["repo"],
                     "revision": doc["revision"], "cache_key": doc["cache_key"],
                     "toolchain": doc["toolchain"]["name"]})
    tasks_path = store.ensure_local(root / tasks_file)
    entries = _task_entries(tasks_path)
    return {"format_version": FORMAT_VERSION, "kind": RL_MANIFEST_KIND, "environments": envs,
            "tasks": {"path": tasks_file, "sha256": sha256_file(tasks_path), "count": len(entries),
                      "instances": entries}}


def write_manifest(root: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` atomically (last: its files are complete)."""
    atomic_write_bytes(root / MANIFEST_NAME, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())


def _env_problems(root: Path, m: dict[str, Any]) -> list[str]:
    problems = []
    for e in m.get("environments", []):
        path = store.ensure_local(root / e["path"])  # an S3 run: fetched, as the manifest names it
        if not path.is_file():
            problems.append(f"environments: {e['path']} is missing")
            continue
        try:
            doc = json.loads(path.read_text())
            jsonschema.validate(doc, envspec.schema())
        except (ValueError, jsonschema.ValidationError) as err:
            problems.append(f"{e['path']}: not a valid environment spec: {str(err).splitlines()[0]}")
            continue
        if (digest := envspec.identity_hash(doc)) != e["spec_sha256"]:
            problems.append(f"{e['path']}: spec_sha256: expected {e['spec_sha256']} (manifest), found {digest}")
    return problems


def _task_problems(root: Path, m: dict[str, Any]) -> list[str]:
    t = m.get("tasks") or {}
    path = store.ensure_local(root / t.get("path", ""))
    if not path.is_file():
        return [f"tasks: {t.get('path')} is missing"]
    problems = []
    if (digest := sha256_file(path)) != t.get("sha256"):
        problems.append(f"{t['path']}: sha256: expected {t.get('sha256')} (manifest), found {digest}")
    envs = {e["path"] for e in m.get("environments", [])}
    lines = path.read_text().splitlines()
    if len(lines) != t.get("count"):
        problems.append(f"{t['path']}: count: expected {t.get('count')} (manifest), found {len(lines)}")
    listed = t.get("instances", [])
    for i, line in enumerate(lines):
        task = json.loads(line)
        where = f"{t['path']}:{i + 1} ({task.get('instance_id')})"
        if i >= len(listed) or listed[i]["sha256"] != _line_hash(line):
            problems.append(f"{where}: sha256 differs from the manifest's instances[{i}]")
        if task.get("environment") not in envs:
            problems.append(f"{where}: environment {task.get('environment')} is not in the manifest")
        if not json.loads(task.get("FAIL_TO_PASS") or "[]"):
            problems.append(f"{where}: FAIL_TO_PASS is empty")
    return problems


def verify(path: Path) -> list[str]:
    """Every problem with an RL manifest (``path`` is the manifest file)."""
    try:
        m = json.loads(Path(path).read_text())
        if m.get("format_version") != FORMAT_VERSION:
            return [f"{path}: format_version: expected {FORMAT_VERSION}, found {m.get('format_version')}"]
        root = Path(path).parent
        return _env_problems(root, m) + _task_problems(root, m)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return [f"{path}: malformed RL manifest or task file: {type(err).__name__}: {err}"]


def show(m: dict[str, Any]) -> list[str]:
    """A readable summary of an RL manifest."""
    t = m.get("tasks") or {}
    lines = [f"rl manifest: {len(m.get('environments', []))} environments, {t.get('count', 0)} tasks ({t.get('path')})"]
    lines += [f"  {e['path']}  {e['toolchain']}  {e['repo']}@{e['revision'][:12]}" for e in m.get("environments", [])]
    return lines

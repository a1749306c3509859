"""The RL manifest of an environments run: the verified environments and tasks, with hashes.

``manifest.json`` of kind ``codecorpus.rl`` lists every environment spec (``envs/*.json``:
path, ``spec_sha256``, repository, revision, cache key) and the verified task set
(``verified/tasks.jsonl``: path, sha256, count, and per task its instance id, environment
and the sha256 of its JSON line). Sorted keys, relative paths, no timestamps: the same run
gives the same bytes. A spec's ``spec_sha256`` is its identity hash (``envs.env_spec.
identity_hash``: everything but the measured durations and test counts), so the same inputs
give the same manifest although the measurements in the spec files differ run to run.
``verify`` trusts none of it: it re-hashes every spec and task file, re-reads every task
line, checks each spec against the shipped schema and each task's FAIL_TO_PASS. A manifest
of another format version, or one lacking a field, is a problem line naming it, never a
``KeyError``.

Format versions: 1 listed each environment's ``sha256``; 2 names it ``spec_sha256`` (the
identity hash, not the file's bytes).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema

from codecorpus.envs import env_spec
from codecorpus.schema import RL_MANIFEST_KIND
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import atomic_write_bytes, sha256_file

FORMAT_VERSION = 2
MANIFEST_NAME = "manifest.json"
ENV_KEYS = ("path", "spec_sha256", "repo", "revision", "cache_key", "toolchain")
TASKS_KEYS = ("path", "sha256", "count", "instances")
INSTANCE_KEYS = ("instance_id", "repo", "environment", "sha256")


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
        envs.append({"path": f"{envs_dir}/{path.name}", "spec_sha256": env_spec.identity_hash(doc), "repo": doc["repo"],
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


def _missing(where: str, obj: Any, keys: tuple[str, ...]) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where}: expected an object, found {type(obj).__name__}"]
    return [f"{where}: field {k!r} is missing" for k in keys if k not in obj]


def _structure_problems(m: dict[str, Any]) -> list[str]:
    """The fields ``verify`` reads that a manifest lacks (checked before any is read)."""
    envs, tasks = m.get("environments"), m.get("tasks")
    if not isinstance(envs, list):
        problems = [f"environments: expected a list, found {type(envs).__name__}"]
    else:
        problems = [p for i, e in enumerate(envs) for p in _missing(f"environments[{i}]", e, ENV_KEYS)]
    problems += _missing("tasks", tasks, TASKS_KEYS)
    listed = tasks.get("instances") if isinstance(tasks, dict) else []
    if not isinstance(listed, list):
        return [*problems, f"tasks.instances: expected a list, found {type(listed).__name__}"]
    return problems + [p for i, x in enumerate(listed) for p in _missing(f"tasks.instances[{i}]", x, INSTANCE_KEYS)]


def _env_problems(root: Path, m: dict[str, Any]) -> list[str]:
    problems = []
    for e in m["environments"]:
        path = store.ensure_local(root / e["path"])  # an S3 run: fetched, as the manifest names it
        if not path.is_file():
            problems.append(f"environments: {e['path']} is missing")
            continue
        try:
            doc = json.loads(path.read_text())
            jsonschema.validate(doc, env_spec.schema())
        except (ValueError, jsonschema.ValidationError) as err:
            problems.append(f"{e['path']}: not a valid environment spec: {str(err).splitlines()[0]}")
            continue
        if (digest := env_spec.identity_hash(doc)) != e["spec_sha256"]:
            problems.append(f"{e['path']}: spec_sha256: expected {e['spec_sha256']} (manifest), found {digest}")
    return problems


def _task_problems(root: Path, m: dict[str, Any]) -> list[str]:
    t = m["tasks"]
    path = store.ensure_local(root / t["path"])
    if not path.is_file():
        return [f"tasks: {t['path']} is missing"]
    problems = []
    if (digest := sha256_file(path)) != t["sha256"]:
        problems.append(f"{t['path']}: sha256: expected {t['sha256']} (manifest), found {digest}")
    envs = {e["path"] for e in m["environments"]}
    lines = path.read_text().splitlines()
    if len(lines) != t["count"]:
        problems.append(f"{t['path']}: count: expected {t['count']} (manifest), found {len(lines)}")
    listed = t["instances"]
    for i, line in enumerate(lines):
        try:
            task = json.loads(line)
        except ValueError as err:
            problems.append(f"{t['path']}:{i + 1}: not a JSON line: {err}")
            continue
        if not isinstance(task, dict):
            problems.append(f"{t['path']}:{i + 1}: expected a JSON object, found {type(task).__name__}")
            continue
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
    except (OSError, ValueError) as err:
        return [f"{path}: not a readable JSON manifest: {err}"]
    if not isinstance(m, dict):
        return [f"{path}: expected a JSON object, found {type(m).__name__}"]
    if (version := m.get("format_version")) != FORMAT_VERSION:
        return [f"{path}: format_version: expected {FORMAT_VERSION}, found {version!r}: written by "
                "another codecorpus version; rerun its recipe with this one (task_validate writes "
                "the manifest anew)"]
    structure = _structure_problems(m)
    if structure:
        return [f"{path}: {p}" for p in structure]
    root = Path(path).parent
    try:
        return _env_problems(root, m) + _task_problems(root, m)
    except (OSError, ValueError, TypeError) as err:
        return [f"{path}: malformed RL manifest or task file: {type(err).__name__}: {err}"]


def show(m: dict[str, Any]) -> list[str]:
    """A readable summary of an RL manifest (a malformed one shows what it has)."""
    t = m.get("tasks") if isinstance(m.get("tasks"), dict) else {}
    listed = m.get("environments")
    envs = [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
    lines = [f"rl manifest: {len(envs)} environments, {t.get('count', 0)} tasks ({t.get('path')})"]
    lines += [f"  {e.get('path')}  {e.get('toolchain')}  {e.get('repo')}@{str(e.get('revision'))[:12]}"
              for e in envs]
    return lines

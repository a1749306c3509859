"""A planted task for the rollout tests: a tiny Python repository with a bug, its verified
environment (spec written as env_verify writes it) and its validated task."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from envs_helpers import LIB, PATCH, TEST_PATCH, UNITTESTS, git_repo

from codecorpus.envs import env_spec, verify
from codecorpus.envs import sandbox as sb
from codecorpus.envs.session import SessionConfig, TaskEntry
from codecorpus.manifests import rl

F2P = "test_calc.TestCalc.test_add"


def limits() -> sb.Limits:
    return sb.Limits(wall_seconds=120, processes=128, memory_bytes=1 << 30)


def planted_task(root: Path) -> tuple[TaskEntry, SessionConfig]:
    """The repository, its environment verified into ``root/env_cache`` (where a run keeps
    it) and its validated task."""
    repo = root / "repo"
    base = git_repo(repo, {"calc.py": LIB, "tests/test_calc.py": UNITTESTS})
    return verified_task(repo, base, root / "env_cache"), session_config(root)


def verified_task(repo: Path, base: str, cache: Path) -> TaskEntry:
    """The planted task on ``repo`` at ``base``: its environment verified into ``cache``,
    its FAIL_TO_PASS / PASS_TO_PASS found by validation."""
    vcfg = verify.VerifyConfig(cache_dir=str(cache), sandbox=sb.SandboxConfig(limits=limits()),
                               install_limits=limits(), runs=2)
    env = verify.verify_revision(repo, base, vcfg)
    assert env.verified, env.reason
    spec = env_spec.environment_spec(env, "example/calc", base, vcfg.sandbox)
    task = verify.validate_task(repo, base, PATCH, TEST_PATCH, env, vcfg)
    assert task.valid and task.fail_to_pass == [F2P], task.reason
    record = {"instance_id": "example__calc-1", "repo": "example/calc", "base_commit": base,
              "patch": PATCH, "test_patch": TEST_PATCH, "FAIL_TO_PASS": json.dumps(task.fail_to_pass),
              "PASS_TO_PASS": json.dumps(task.pass_to_pass), "environment": "envs/calc.json"}
    return TaskEntry(record, spec, repo)


def session_config(root: Path) -> SessionConfig:
    """Small limits: the hostile tests hit them quickly."""
    return SessionConfig(cache_dir=str(root / "env_cache"), work_root=str(root / "sessions"),
                         sandbox=sb.SandboxConfig(limits=limits()),
                         command_limits=limits().model_copy(update={
                             "output_bytes": 1 << 16, "file_size_bytes": 8 << 20, "processes": 64}),
                         test_limits=limits(), disk_bytes=32 << 20)


def planted_run(root: Path, copies: int = 3) -> tuple[Path, TaskEntry]:
    """An environments run directory holding the planted task ``copies`` times
    (``example__calc-1`` ...): its spec, env_verify row, verified tasks and RL manifest."""
    entry, _ = planted_task(root)
    spec_path = env_spec.write_spec(entry.spec, root / "envs")
    env_file = spec_path.name
    (root / "env_verify").mkdir()
    pq.write_table(pa.table({"env_file": [env_file], "git_dir": [str(entry.repo)]}),
                   root / "env_verify" / "part-00000.parquet")
    lines = [json.dumps({**entry.task, "instance_id": f"example__calc-{i}",
                         "environment": f"envs/{env_file}"}, sort_keys=True) for i in range(1, copies + 1)]
    (root / "verified").mkdir()
    (root / "verified" / "tasks.jsonl").write_text("".join(f"{line}\n" for line in lines))
    rl.write_manifest(root, rl.build_manifest(root, "envs", "verified/tasks.jsonl"))
    return root / rl.MANIFEST_NAME, entry

"""The job bodies of the environment stages (their specs: ``envs/spec.py``)::

    env_discover (source) -> env_verify (filter) -> task_validate (sink)

- ``discover_job``: one repository of the recipe's sources (``envs/repos.py``; a plain folder
  is first committed into a snapshot repository) -> its commits grouped by dependency-file
  hash (``discover.group_commits``); each group, newest first, is one row with the ranked
  candidates read from its newest commit, each with file and line.
- ``verify_table``: per row, the candidates run in the sandbox (``verify.verify_environment``
  in a fresh tree, reproduced in a second fresh checkout of the same commit); a verified
  version writes ``envs/<repo>@<hash>.json`` (checked against the shipped schema) and a
  Dockerfile beside it, a failed one is a drop with its reason and, in its detail, every
  attempt's commands and reason, the runner, the counts and the wall time (``verdict``).
  Its counters feed the report's honest-yield funnel: versions with per-test results, at
  least ``min_passed`` passing, at least ``min_pass_rate``, reproduced in a fresh tree.
  When the heuristics find nothing or all fail, the recipe's proposer is asked
  (``envs/propose.py``) and its exchange is saved under ``traces/env_verify/``.
- ``validate_task_job``: one repository's SWE-bench-format task candidates, validated with
  ``verify.validate_instances`` against the repository's verified environment, then
  validated by use (``session.validate_by_use``: graded as a trainer grades it, the gold
  patch must resolve the task and an empty patch must not; else a drop,
  ``gold_patch_unresolved`` / ``empty_patch_resolved``, whose detail names the tests that
  decided it); ``unmatched_job`` drops the candidates of no repository;
  ``write_task_outputs`` writes ``verified/tasks.jsonl`` (FAIL_TO_PASS / PASS_TO_PASS
  filled) and the RL manifest ``manifest.json`` (``manifests/rl.py``).

Every row in is a row out or a drop with a reason; the executor does the rest (hashes,
markers, resume, stats). Repository code runs only inside ``envs/sandbox.py``.
"""

from __future__ import annotations

import functools
import json
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa

from codecorpus import schema
from codecorpus.envs import discover as disc
from codecorpus.envs import env_spec, propose, repos, session, verify
from codecorpus.envs.config import (
    ENV_CACHE_DIR,
    ENV_TRACES_DIR,
    ENVS_DIR,
    VERIFIED_TASKS,
    EnvDiscoverConfig,
    EnvVerifyConfig,
    TaskValidateConfig,
)
from codecorpus.manifests.rl import build_manifest, write_manifest
from codecorpus.pipeline.bodies import JobContext, finish_shard, read_parquet, result_stats
from codecorpus.stage import MapResult
from codecorpus.storage import mirror as store
from codecorpus.storage.atomic import atomic_write_bytes

UNREADABLE_REPOSITORY = "unreadable_repository"
OVER_MAX_VERSIONS = "over_max_versions"
UNKNOWN_REPOSITORY = "unknown_repository"
BAD_TASK_RECORD = "bad_task_record"
BASE_COMMIT_MISSING = "base_commit_missing"
VERSION_SCHEMA = pa.schema([
    pa.field(schema.ID, pa.string()), pa.field(schema.SOURCE, pa.string()),
    pa.field(schema.REPO, pa.string()), pa.field(schema.PATH, pa.string()),
    pa.field(schema.LANG, pa.string()), pa.field(schema.BYTES, pa.int64()),
    pa.field("git_dir", pa.string()), pa.field("revision", pa.string()),
    pa.field("commits", pa.list_(pa.string())), pa.field("dependency_hash", pa.string()),
    pa.field("dependency_files", pa.list_(pa.string())), pa.field("candidates", pa.string()),
])
ENV_COLUMNS = [pa.field("env_file", pa.string()), pa.field("verification", pa.string()),
               pa.field("cpu_seconds", pa.float64())]
TASK_SCHEMA = pa.schema([
    pa.field(schema.ID, pa.string()), pa.field(schema.SOURCE, pa.string()),
    pa.field(schema.REPO, pa.string()), pa.field(schema.PATH, pa.string()),
    pa.field(schema.LANG, pa.string()), pa.field(schema.BYTES, pa.int64()),
    pa.field("env_file", pa.string()), pa.field("instance", pa.string()),
    pa.field("cpu_seconds", pa.float64()),
])


# ---------------------------------------------------------------- env_discover


def _safe(name: str) -> str:
    """A repository's name as a folder name: its spec files' spelling of it, without the hash."""
    return env_spec.spec_name(name, "0" * 12).rsplit("@", 1)[0]


def _candidates_json(found: disc.Discovery) -> str:
    return json.dumps({"toolchains": list(found.toolchains), "notes": list(found.notes),
                       "installs": [asdict(c) for c in found.installs],
                       "tests": [asdict(c) for c in found.tests]}, sort_keys=True)


def discovery_of(row: dict[str, Any]) -> disc.Discovery:
    """The Discovery a version row carries (its candidates, in rank order)."""
    data = json.loads(row["candidates"])

    def cands(key: str) -> tuple[disc.Candidate, ...]:
        return tuple(disc.Candidate(**{**c, "commands": tuple(c["commands"])}) for c in data[key])

    return disc.Discovery(tuple(data["toolchains"]), cands("installs"), cands("tests"),
                          tuple(row["dependency_files"]), row["dependency_hash"], tuple(data["notes"]))


def _tree_bytes(tree: Path) -> int:
    return sum(p.stat().st_size for p in tree.rglob("*") if p.is_file() and ".git" not in p.parts)


def _versions(ref: repos.RepoRef, gitdir: Path, cfg: EnvDiscoverConfig) -> tuple[list[dict], list[dict]]:
    """Version rows (newest dependency group first) and the groups past ``max_versions``."""
    listed = repos.git(gitdir, "rev-list", f"--max-count={cfg.max_commits}", ref.revision, "--")
    if listed.returncode != 0:
        raise ValueError(f"git rev-list {ref.revision}: {listed.stderr.decode()[:300]}")
    groups = disc.group_commits(gitdir, listed.stdout.decode().split())
    kept, over = [], []
    for i, (dep_hash, commits) in enumerate(groups.items()):
        row = {schema.ID: f"{ref.name}@{dep_hash[:12]}", schema.SOURCE: ref.source, schema.REPO: ref.name,
               schema.PATH: commits[0], schema.LANG: schema.UNKNOWN, schema.BYTES: 0,
               "git_dir": str(store.origin_path(gitdir)), "revision": commits[0], "commits": commits,
               "dependency_hash": dep_hash, "dependency_files": [], "candidates": ""}
        if i >= cfg.max_versions:
            over.append(row)
            continue
        with tempfile.TemporaryDirectory(prefix="discover-") as tmp:
            tree = Path(tmp) / "tree"
            verify.fresh_tree(gitdir, commits[0], tree)
            found = disc.discover(tree)
            row[schema.BYTES] = _tree_bytes(tree)
        row.update(dependency_files=list(found.dependency_files), candidates=_candidates_json(found))
        row[schema.LANG] = found.toolchains[0] if found.toolchains else schema.UNKNOWN
        kept.append(row)
    return kept, over


def discover_job(ctx: JobContext, shard: int, ref: repos.RepoRef, cfg: EnvDiscoverConfig) -> dict:
    """One repository -> one row per dependency version (its ranked candidates)."""
    t0 = time.perf_counter()
    problem_row = {schema.ID: ref.name, schema.SOURCE: ref.source, schema.REPO: ref.name,
                   schema.PATH: "", schema.LANG: schema.UNKNOWN, schema.BYTES: 0}
    kept, over, bad = [], [], []
    try:
        if ref.problem:
            raise ValueError(ref.problem)
        gitdir = Path(ref.location)
        if ref.kind == "folder":
            gitdir = repos.publish_snapshot(gitdir, ctx.run.snapshot(ctx.stage, _safe(ref.name)))
        kept, over = _versions(ref, gitdir, cfg)
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        bad = [(problem_row, str(err)[:500])]
    table = pa.Table.from_pylist(kept, schema=VERSION_SCHEMA)
    drops = [schema.drops_from_rows(pa.Table.from_pylist(over, schema=VERSION_SCHEMA), ctx.stage, OVER_MAX_VERSIONS)]
    if bad:
        rows = pa.Table.from_pylist([bad[0][0]], schema=VERSION_SCHEMA)
        drops.append(schema.drops_from_rows(rows, ctx.stage, UNREADABLE_REPOSITORY, detail=[bad[0][1]]))
    n_candidates = sum(len(found.installs) + len(found.tests) for found in map(discovery_of, kept))
    result = MapResult(table, pa.concat_tables(drops), Counter(
        {"repositories": 1, "candidates": n_candidates}))
    rows_in = len(kept) + len(over) + len(bad)
    bytes_in = sum(r[schema.BYTES] for r in kept)  # the versions' trees, as measured on export
    stats = result_stats(rows_in, bytes_in, 0, {}, result, time.perf_counter() - t0)
    return finish_shard(ctx, shard, result, stats)


# ---------------------------------------------------------------- env_verify


def verify_config(cfg: EnvVerifyConfig, run_root: Path) -> verify.VerifyConfig:
    """The sandbox settings of ``verify``: the cache defaults to RUN/env_cache, in this node's
    mirror of an S3 run (installed environments are a node's own, never published)."""
    cache_dir = cfg.cache_dir or str(store.node_path(run_root) / ENV_CACHE_DIR)
    return verify.VerifyConfig(
        sandbox=cfg.sandbox,
        install_limits=cfg.install_limits,
        cache_dir=cache_dir,
        runs=cfg.runs,
        max_installs=cfg.max_installs,
        max_tests=cfg.max_tests,
        min_passed=cfg.min_passed,
        min_pass_rate=cfg.min_pass_rate,
    )


def _failures(env: verify.Verification) -> list[dict[str, Any]]:
    return [{"phase": s.phase, "command": s.command, "exit_code": s.exit_code, "violation": s.violation,
             "output_tail": s.output_tail[-1000:]} for s in env.steps if s.exit_code != 0 or s.violation]


def _record(env: verify.Verification) -> str:
    """The verification without its steps and attempts: what ``task_validate`` needs to
    rebuild it."""
    data = asdict(env)
    data.pop("steps")
    data.pop("attempts")
    return json.dumps(data, sort_keys=True)


def verification_of(text: str) -> verify.Verification:
    data = json.loads(text)
    for key in ("install", "install_source", "test_source", "ready", "install_notes",
                "system_packages"):
        if key in data:
            data[key] = tuple(data[key])
    return verify.Verification(**data)


RULES = ("per_test_results", "min_passed", "min_pass_rate", "fresh_tree")
"""The honest-yield funnel's counters: versions that passed each rule, in order."""
_FAILS_AT = {verify.NO_PASSING_TESTS: 1, verify.FLAKY: 1, verify.TOO_FEW_PASSED: 1,
             verify.LOW_PASS_RATE: 2, verify.READY_FAILED: 3, verify.FRESH_TREE_MISMATCH: 3,
             verify.NOT_OWN_CODE: 3}


def rules_passed(env: verify.Verification) -> list[str]:
    """The rules a version's verification got through (all of them when verified)."""
    if env.verified:
        return list(RULES)
    return list(RULES[: _FAILS_AT.get(env.reason or "", 0)])


def verdict(env: verify.Verification) -> dict[str, Any]:
    """What the user sees per repository version: verified or the reason (and its detail),
    tests passed and failed, wall and CPU seconds, and every attempt's commands and reason."""
    c = verify.counts(env.tests)
    attempts = [{**{k: a.get(k) for k in ("install", "test", "reason", "runner")},
                 "detail": (a.get("detail") or "")[:400]} for a in env.attempts]
    out = {"verified": env.verified, "reason": env.reason, "detail": env.detail[:600],
           "runner": env.runner, "passed": c["passed"], "failed": c["failed"],
           "wall_seconds": env.wall_seconds, "cpu_seconds": env.cpu_seconds,
           "attempts": attempts}
    while len(json.dumps(out)) > 16000 and out["attempts"]:
        out["attempts"] = out["attempts"][:-1]  # the first attempts are the best ranked
        out["attempts_left_off"] = out.get("attempts_left_off", 0) + 1
    return out


def _write_outputs(root: Path, row: dict, env: verify.Verification, cfg: EnvVerifyConfig) -> str:
    """Write a verified version's spec (schema-checked) and Dockerfile; the spec's file name."""
    doc = env_spec.environment_spec(env, row[schema.REPO], row["revision"], cfg.sandbox,
                                   tuple(row["dependency_files"]), cfg.min_passed,
                                   cfg.min_pass_rate)
    jsonschema.validate(doc, env_spec.schema())
    path = env_spec.write_spec(doc, root / ENVS_DIR)
    if cfg.dockerfile:
        atomic_write_bytes(path.with_suffix(".Dockerfile"), env_spec.render_dockerfile(doc).encode())
    return path.name


def _ask_proposer(row: dict, env: verify.Verification, found: disc.Discovery, cfg: EnvVerifyConfig,
                  vcfg: verify.VerifyConfig, root: Path) -> verify.Verification:
    """The proposer's turn: its commands verified in a fresh tree; the exchange saved as a trace."""
    gitdir, revision = repos.repository_of(row), row["revision"]
    with tempfile.TemporaryDirectory(prefix="propose-") as tmp:
        tree = Path(tmp) / "tree"
        verify.fresh_tree(gitdir, revision, tree)
        req = propose.request_for(tree, row[schema.REPO], revision, _failures(env),
                                  [*found.installs, *found.tests])
        proposed, messages, problem = propose.propose(cfg.proposer, cfg.proposer_config, req,
                                                      row["dependency_hash"])
        outcome = env if proposed is None else verify.verify_environment(
            tree, vcfg, proposed, fresh=functools.partial(verify.fresh_tree, gitdir, revision))
    steps = [*env.steps, *(outcome.steps if outcome is not env else [])]
    if proposed is None:
        text = f"not run: {problem}"
    else:
        text = "verified" if outcome.verified else f"failed: {outcome.reason}"
    trace = propose.trace_record(messages, row[schema.REPO], revision, cfg.proposer, text, proposed)
    name = env_spec.spec_name(row[schema.REPO], row["dependency_hash"]).removesuffix(".json")
    atomic_write_bytes(root / ENV_TRACES_DIR / f"{name}.jsonl", (json.dumps(trace, sort_keys=True) + "\n").encode())
    return replace(outcome, steps=steps, attempts=[*env.attempts, *(
        outcome.attempts if outcome is not env else [])])


def verify_version(row: dict, cfg: EnvVerifyConfig, vcfg: verify.VerifyConfig, root: Path,
                   ) -> tuple[verify.Verification, bool]:
    """Verify one version row (heuristics first, then the proposer); whether the proposer ran."""
    found = discovery_of(row)
    gitdir = repos.repository_of(row)
    with tempfile.TemporaryDirectory(prefix="env-") as tmp:
        tree = Path(tmp) / "tree"
        verify.fresh_tree(gitdir, row["revision"], tree)
        env = verify.verify_environment(
            tree, vcfg, found, fresh=functools.partial(verify.fresh_tree, gitdir, row["revision"]))
    if env.verified or cfg.proposer is None:
        return env, False
    return _ask_proposer(row, env, found, cfg, vcfg, root), True


def verify_table(table: pa.Table, cfg: EnvVerifyConfig, root: str) -> MapResult:
    """Version rows -> verified environments (specs written) or drops with their reasons."""
    vcfg = verify_config(cfg, Path(root))
    kept, dropped, reasons, details = [], [], [], []
    counters: Counter[str] = Counter()
    for row in table.to_pylist():
        env, asked = verify_version(row, cfg, vcfg, Path(root))
        tests_ran = [s for s in env.steps if s.phase == "test"]
        cpu = round(sum(s.cpu_seconds for s in env.steps), 3)
        counters.update(versions=1, installed=int(bool(tests_ran)), test_runs=len(tests_ran),
                        proposer_calls=int(asked), cpu_ms=round(cpu * 1000),
                        wall_ms=round(env.wall_seconds * 1000))
        counters.update(rules_passed(env))
        if env.verified:
            lang = env.toolchain or row[schema.LANG]
            env_file = _write_outputs(Path(root), row, env, cfg)
            kept.append({**row, schema.LANG: lang, "env_file": env_file, "verification": _record(env),
                         "cpu_seconds": cpu})
        else:
            dropped.append(row)
            reasons.append(env.reason or verify.NO_TESTS_FOUND)
            details.append(json.dumps(verdict(env), sort_keys=True))
    out_schema = VERSION_SCHEMA
    for f in ENV_COLUMNS:
        out_schema = out_schema.append(f)
    drops = schema.drops_from_rows(pa.Table.from_pylist(dropped, schema=VERSION_SCHEMA), "env_verify",
                                   reasons, detail=details)
    return MapResult(pa.Table.from_pylist(kept, schema=out_schema), drops, counters)


# ---------------------------------------------------------------- task_validate


def _read_tasks(path: str | None) -> tuple[list[dict], int]:
    """The task candidates of a JSONL file, and the count of lines that are not instances."""
    if not path:
        return [], 0
    rows, bad = [], 0
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            bad += 1
            continue
        keys = ("instance_id", "repo", "base_commit", "patch", "test_patch")
        if isinstance(row, dict) and all(isinstance(row.get(k), str) for k in keys):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


def owner_of(task_repo: str, names: list[str]) -> str | None:
    """The repository a task's ``repo`` names: the same name, else the one name sharing its
    last part (``owner/calc`` is ``calc``); None when there is none or several.

    >>> owner_of("psf/requests", ["requests", "flask"]), owner_of("x/y", ["a/y", "b/y"])
    ('requests', None)
    """
    if task_repo in names:
        return task_repo
    last = [n for n in names if n.rsplit("/", 1)[-1] == task_repo.rsplit("/", 1)[-1]]
    return last[0] if len(last) == 1 else None


def _task_row(task: dict, name: str, source: str, lang: str, env_file: str = "", cpu: float = 0.0) -> dict:
    return {schema.ID: task.get("instance_id", ""), schema.SOURCE: source, schema.REPO: name,
            schema.PATH: task.get("base_commit", ""), schema.LANG: lang,
            schema.BYTES: len(task.get("patch", "")), "env_file": env_file,
            "instance": json.dumps(task, sort_keys=True), "cpu_seconds": cpu}


def _env_for(task: dict, envs: list[dict], gitdir: Path) -> dict:
    """The environment of a task: the version holding its base commit, the same dependency
    hash, or else the newest verified version."""
    for env in envs:
        if task["base_commit"] in env["commits"]:
            return env
    try:
        dep_hash = disc.dependency_hash_at(gitdir, task["base_commit"])[1]
    except ValueError:
        dep_hash = ""
    return next((e for e in envs if e["dependency_hash"] == dep_hash), envs[0])


Drop = tuple[dict, str, str | None]
"""A dropped task row, its reason, and its detail: what decided it, when a check says."""
ByUse = Callable[[dict, str, Path], tuple[str | None, str]]
"""A validated task, its environment's spec file and its repository -> (drop reason or None,
what decided it)."""


def validate_repository(ref: repos.RepoRef, own: list[dict], envs: list[dict], cfg: TaskValidateConfig,
                        vcfg: verify.VerifyConfig, by_use: ByUse) -> tuple[list[dict], list[Drop]]:
    """Validated task rows, and drops, of one repository's candidates (``own``) against its
    verified versions (``envs``, its ``env_verify`` rows); ``by_use`` grades each task that
    validated (``use_check``)."""
    lang = envs[0][schema.LANG] if envs else schema.UNKNOWN
    if not envs:
        return [], [(_task_row(t, ref.name, ref.source, lang), verify.NO_ENVIRONMENT, None) for t in own]
    gitdir = repos.repository_of(envs[0])
    ordered = sorted(own, key=lambda r: (r.get("created_at") or "", r["instance_id"]), reverse=True)
    drops: list[Drop] = [(_task_row(t, ref.name, ref.source, lang), verify.OVER_MAX_PER_REPO, None)
                         for t in ordered[cfg.max_per_repo:]]
    kept = []
    for task in ordered[: cfg.max_per_repo]:
        if repos.git(gitdir, "cat-file", "-e", f"{task['base_commit']}^{{commit}}").returncode != 0:
            drops.append((_task_row(task, ref.name, ref.source, lang), BASE_COMMIT_MISSING, None))
            continue
        env_row = _env_for(task, envs, gitdir)
        env = verification_of(env_row["verification"])
        cpu: dict[str, float] = {}
        valid, failed = verify.validate_instances(gitdir, [task], env, vcfg, max_per_repo=1, cpu_seconds=cpu)
        row = _task_row(task, ref.name, ref.source, env_row[schema.LANG], env_row["env_file"],
                        cpu.get(task["instance_id"], 0.0))
        reason, detail = (failed[0][1], None) if failed else by_use(valid[0], env_row["env_file"], gitdir)
        if reason:
            drops.append((row, reason, detail))
        else:
            kept.append({**row, "instance": json.dumps(valid[0], sort_keys=True)})
    return kept, drops


def use_check(root: Path, vcfg: verify.VerifyConfig) -> ByUse:
    """Validation by use: a validated task graded as a trainer grades it (``session.
    validate_by_use``: the gold patch resolves it, an empty patch does not); a drop's detail
    names the tests that decided it."""
    cfg = session.SessionConfig(cache_dir=vcfg.cache_dir, sandbox=vcfg.sandbox,
                                test_limits=vcfg.sandbox.limits, install_limits=vcfg.install_limits)

    def check(task: dict, env_file: str, gitdir: Path) -> tuple[str | None, str]:
        spec = json.loads(store.ensure_local(root / ENVS_DIR / env_file).read_text())
        return session.validate_by_use(session.TaskEntry(task, spec, gitdir), cfg)

    return check


def validate_task_job(ctx: JobContext, shard: int, in_stage: str, ref: repos.RepoRef, names: list[str],
                      cfg: TaskValidateConfig, verify_cfg: EnvVerifyConfig) -> dict:
    """One repository's task candidates -> validated tasks and drops."""
    t0 = time.perf_counter()
    vcfg = verify_config(verify_cfg, ctx.run.root)
    envs = read_parquet(ctx.run.part(in_stage, shard)).to_pylist()
    candidates, _ = _read_tasks(cfg.tasks)
    own = [t for t in candidates if owner_of(t["repo"], names) == ref.name]
    kept, drops = validate_repository(ref, own, envs, cfg, vcfg, use_check(ctx.run.root, vcfg))
    reasons = Counter(reason for _, reason, _ in drops)
    checked = len(kept) + reasons[session.GOLD_UNRESOLVED] + reasons[session.EMPTY_RESOLVED]
    used = Counter(by_use_checked=checked, gold_resolved=checked - reasons[session.GOLD_UNRESOLVED],
                   empty_unresolved=len(kept))
    return _finish_tasks(ctx, shard, len(own), kept, drops, t0, used)


def task_drops(stage: str, drops: list[Drop]) -> pa.Table:
    """The drop-log rows of ``drops``, each with its reason and detail."""
    rows = pa.Table.from_pylist([r for r, _, _ in drops], schema=TASK_SCHEMA)
    return schema.drops_from_rows(rows, stage, [reason for _, reason, _ in drops],
                                  detail=[detail for _, _, detail in drops])


def _finish_tasks(ctx: JobContext, shard: int, rows_in: int, kept: list[dict],
                  drops: list[Drop], t0: float, extra: Counter | None = None) -> dict:
    cpu = sum(r["cpu_seconds"] for r in [*kept, *(r for r, _, _ in drops)])
    result = MapResult(pa.Table.from_pylist(kept, schema=TASK_SCHEMA), task_drops(ctx.stage, drops),
                       Counter({"task_candidates": rows_in, "cpu_ms": round(1000 * cpu)}) + (extra or Counter()))
    bytes_in = sum(r[schema.BYTES] for r in [*kept, *(r for r, _, _ in drops)])  # the candidates' patches
    stats = result_stats(rows_in, bytes_in, 0, {}, result, time.perf_counter() - t0)
    return finish_shard(ctx, shard, result, stats)


def unmatched_job(ctx: JobContext, shard: int, names: list[str], cfg: TaskValidateConfig) -> dict:
    """The candidates of no repository in the sources, and the lines that are not instances."""
    t0 = time.perf_counter()
    candidates, bad = _read_tasks(cfg.tasks)
    drops: list[Drop] = [(_task_row(t, t["repo"], "", schema.UNKNOWN), UNKNOWN_REPOSITORY, None)
                         for t in candidates if owner_of(t["repo"], names) is None]
    drops += [(_task_row({"instance_id": f"line-{i}"}, "", "", schema.UNKNOWN), BAD_TASK_RECORD, None)
              for i in range(bad)]
    return _finish_tasks(ctx, shard, len(drops), [], drops, t0)


def write_task_outputs(ctx: JobContext, n_shards: int, root: str) -> dict:
    """``verified/tasks.jsonl`` (SWE-bench instances, by instance_id) and the RL manifest."""
    rows = []
    for i in range(n_shards):
        rows += read_parquet(ctx.run.part(ctx.stage, i)).to_pylist()
    rows.sort(key=lambda r: r[schema.ID])
    lines = [json.dumps({**json.loads(r["instance"]), "environment": f"{ENVS_DIR}/{r['env_file']}"},
                        sort_keys=True) for r in rows]
    atomic_write_bytes(Path(root) / VERIFIED_TASKS, "".join(f"{line}\n" for line in lines).encode())
    manifest = build_manifest(Path(root), ENVS_DIR, VERIFIED_TASKS)
    write_manifest(Path(root), manifest)
    return {"tasks": len(lines), "environments": len(manifest["environments"])}

"""The RL manifest of an environments run: a built one verifies; a manifest of an older format
version gets the version message, and one lacking a field a problem line naming it, never a
KeyError."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codecorpus.envs import env_spec
from codecorpus.envs import sandbox as sb
from codecorpus.envs.verify import Verification
from codecorpus.manifests import rl
from codecorpus.manifests.manifest import show
from codecorpus.manifests.manifest import verify as verify_manifest


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run directory with one environment spec, one verified task and their RL manifest."""
    env = Verification(
        True,
        None,
        toolchain="python",
        toolchain_version="CPython 3.12.0",
        install=('python -m venv "$ENV_DIR/venv"',),
        install_source=("pyproject.toml", 1),
        test="python -m unittest -v",
        parser="unittest",
        cache_key="0" * 32,
        dependency_hash="1" * 64,
        tests={"test_calc.CalcTest.test_add": "passed"},
        proof={"method": "import resolution in the fresh tree", "own": True,
               "packages": {"calc": {"origin": "/workspace/calc.py", "where": "work tree"}}},
    )
    doc = env_spec.environment_spec(env, "example/calc", "abc123", sb.SandboxConfig(kind="none"))
    path = env_spec.write_spec(doc, tmp_path / "envs")
    task = {
        "instance_id": "example__calc-1",
        "repo": "example/calc",
        "environment": f"envs/{path.name}",
        "FAIL_TO_PASS": '["test_calc.CalcTest.test_clamp"]',
    }
    (tmp_path / "verified").mkdir()
    (tmp_path / "verified" / "tasks.jsonl").write_text(json.dumps(task, sort_keys=True) + "\n")
    rl.write_manifest(tmp_path, rl.build_manifest(tmp_path, "envs", "verified/tasks.jsonl"))
    return tmp_path


def _rewrite(run: Path, edit) -> Path:
    path = run / rl.MANIFEST_NAME
    m = json.loads(path.read_text())
    edit(m)
    path.write_text(json.dumps(m))
    return path


def test_a_built_manifest_verifies(run):
    m = json.loads((run / rl.MANIFEST_NAME).read_text())
    assert m["format_version"] == rl.FORMAT_VERSION == 2
    assert rl.verify(run / rl.MANIFEST_NAME) == [] and verify_manifest(run) == []


def test_a_version_1_manifest_gets_the_version_message(run):
    """Version 1 named each environment's hash ``sha256``; verify names the version."""

    def to_version_1(m: dict) -> None:
        m["format_version"] = 1
        for e in m["environments"]:
            e["sha256"] = e.pop("spec_sha256")

    path = _rewrite(run, to_version_1)
    (problem,) = verify_manifest(run)
    assert problem.startswith(f"{path}: format_version: expected 2, found 1: ")
    assert "rerun its recipe" in problem and "KeyError" not in problem
    assert show(run).startswith("rl manifest: 1 environments, 1 tasks")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda m: m["environments"][0].pop("spec_sha256"),
            "environments[0]: field 'spec_sha256' is missing",
        ),
        (lambda m: m["environments"][0].pop("path"), "environments[0]: field 'path' is missing"),
        (lambda m: m.pop("environments"), "environments: expected a list, found NoneType"),
        (lambda m: m["tasks"].pop("count"), "tasks: field 'count' is missing"),
        (lambda m: m.update(tasks=[]), "tasks: expected an object, found list"),
        (
            lambda m: m["tasks"]["instances"][0].pop("sha256"),
            "tasks.instances[0]: field 'sha256' is missing",
        ),
        (lambda m: m["tasks"].update(instances={}), "tasks.instances: expected a list, found dict"),
        (lambda m: m.pop("format_version"), "format_version: expected 2, found None"),
    ],
)
def test_a_missing_field_is_a_problem_line(run, edit, expected):
    path = _rewrite(run, edit)
    problems = verify_manifest(run)
    assert any(p.startswith(f"{path}: {expected}") for p in problems), problems
    assert not any("KeyError" in p for p in problems)
    show(run)  # and the summary shows what there is


def test_a_task_line_that_is_not_an_object_is_a_problem_line(run):
    tasks = run / "verified" / "tasks.jsonl"
    original = tasks.read_text()
    tasks.write_text(original + "[1, 2]\n")
    _rewrite(run, lambda m: m["tasks"].update(count=2))
    problems = rl.verify(run / rl.MANIFEST_NAME)
    assert "verified/tasks.jsonl:2: expected a JSON object, found list" in problems
    assert not any("KeyError" in p or "AttributeError" in p for p in problems)

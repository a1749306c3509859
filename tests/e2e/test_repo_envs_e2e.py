"""The environments pipeline end to end, through the CLI on a real local Ray.

A folder of small git repositories built here, each with at least 5 tests (``min_passed``):
Python stdlib unittest (with a bug fixed in a later commit: the task), pytest (installed
from the package index as the package's test extra: the sandbox hides the host's), Node
``node --test``, one whose tests only a proposer finds, and a hostile one whose test sleeps
forever after trying to write outside its tree. The run writes verified specs (reproduced
in a fresh checkout), a validated task with FAIL_TO_PASS, counted drops with reasons, the
report with its honest-yield funnel, the per-repository verdicts on the console, and an RL
manifest that ``manifest verify`` accepts; the second run skips every task.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from codecorpus.envs import env_spec
from codecorpus.envs import sandbox as sb
from codecorpus.manifests.manifest import verify as verify_manifest
from codecorpus.pipeline.pipelines import REPO_ENVS

_WHY_NOT = sb.available()
pytestmark = pytest.mark.skipif(_WHY_NOT is not None, reason=f"no sandbox: {_WHY_NOT}")
REPO = Path(__file__).resolve().parents[2]
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}

CALC_BUGGY = "def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n    return max(lo, x)\n"
CALC_FIXED = CALC_BUGGY.replace("max(lo, x)", "max(lo, min(x, hi))")
KEEPS = ("test_add", "test_add_zero", "test_add_negative", "test_clamp_low", "test_clamp_inside")
CALC_TEST = ("import unittest\n\nfrom calc import add{extra}\n\n\nclass CalcTest(unittest.TestCase):\n"
             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
             "    def test_add_zero(self):\n        self.assertEqual(add(0, 0), 0)\n"
             "    def test_add_negative(self):\n        self.assertEqual(add(-1, -1), -2)\n"
             "    def test_clamp_low(self):\n        from calc import clamp\n"
             "        self.assertEqual(clamp(-1, 0, 3), 0)\n"
             "    def test_clamp_inside(self):\n        from calc import clamp\n"
             "        self.assertEqual(clamp(2, 0, 3), 2)\n{more}")
CLAMP_TEST = "\n    def test_clamp(self):\n        self.assertEqual(clamp(5, 0, 3), 3)\n"

PROPOSER = '''
def propose(request, pattern="verify_*.py"):
    """Finds the checks/ folder the heuristics do not look in."""
    if "checks/verify_lib.py" not in request.listing:
        return []
    return [{"install": [], "toolchain": "python",
             "test": f"python -m unittest discover -v -s checks -t . -p '{pattern}'"}]
'''


def git(root: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=root, env={**ENV, "HOME": str(root)}, check=True,
                         capture_output=True, text=True)
    return out.stdout


def commit(root: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if not (root / ".git").exists():
        git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def build_repos(root: Path, outside: Path) -> dict[str, str]:
    """The repositories; returns the task's base commit and its patches."""
    calc = root / "calc"
    base = commit(calc, {"calc.py": CALC_BUGGY, "test_calc.py": CALC_TEST.format(extra="", more="")}, "base")
    commit(calc, {"calc.py": CALC_FIXED,
                  "test_calc.py": CALC_TEST.format(extra=", clamp", more=CLAMP_TEST)}, "fix clamp")
    patch = git(calc, "diff", base, "HEAD", "--", "calc.py")
    test_patch = git(calc, "diff", base, "HEAD", "--", "test_calc.py")
    commit(root / "pyt", {"lib.py": "def double(x):\n    return 2 * x\n",
                          "pyproject.toml": ('[build-system]\nrequires = ["setuptools>=61"]\n'
                                             'build-backend = "setuptools.build_meta"\n\n'
                                             '[project]\nname = "lib"\nversion = "0.1"\n\n'
                                             '[project.optional-dependencies]\ntest = ["pytest"]\n'),
                          "tests/test_lib.py": ("import pytest\n\nfrom lib import double\n\n\n"
                                                "def test_double():\n    assert double(2) == 4\n\n\n"
                                                "@pytest.mark.parametrize('x', [0, 1, 2, 3])\n"
                                                "def test_many(x):\n    assert double(x) == x + x\n")},
           "pytest project")
    commit(root / "greet", {"package.json": json.dumps({"name": "greet", "version": "1.0.0",
                                                        "scripts": {"test": "node --test"}}),
                            "index.js": "module.exports = { greet: (n) => `Hello, ${n}!` };\n",
                            "test/greet.test.js": ("const test = require('node:test');\n"
                                                   "const assert = require('node:assert');\n"
                                                   "const { greet } = require('../index.js');\n"
                                                   "for (const n of ['A', 'B', 'C', 'D', 'E'])\n"
                                                   "  test(`greets ${n}`, () => assert.strictEqual(greet(n), `Hello, ${n}!`));\n")},
           "node project")
    commit(root / "odd", {"lib.py": "def one():\n    return 1\n", "checks/__init__.py": "",
                          "checks/verify_lib.py": ("import unittest\n\nfrom lib import one\n\n\n"
                                                   "class V(unittest.TestCase):\n"
                                                   + "".join(f"    def test_one_{i}(self):\n"
                                                             "        self.assertEqual(one(), 1)\n" for i in range(5)))},
           "odd layout")
    commit(root / "sleeper", {"test_sleep.py": (
        "import time\nimport unittest\n\n\nclass S(unittest.TestCase):\n    def test_forever(self):\n"
        f"        try:\n            open({str(outside / 'escaped.txt')!r}, 'w').write('out')\n"
        "        except OSError:\n            pass\n        time.sleep(10 ** 6)\n")}, "hostile")
    return {"base": base, "patch": patch, "test_patch": test_patch}


def write_tasks(path: Path, t: dict[str, str]) -> None:
    rows = [
        {"instance_id": "calc-1", "repo": "owner/calc", "base_commit": t["base"], "patch": t["patch"],
         "test_patch": t["test_patch"], "created_at": "2026-01-02T00:00:00Z", "problem_statement": "clamp"},
        {"instance_id": "calc-2", "repo": "owner/calc", "base_commit": t["base"],
         "patch": "--- a/nothere.py\n+++ b/nothere.py\n@@ -1 +1 @@\n-x\n+y\n", "test_patch": t["test_patch"],
         "created_at": "2026-01-01T00:00:00Z", "problem_statement": "bad patch"},
        {"instance_id": "else-1", "repo": "nobody/else", "base_commit": t["base"], "patch": "",
         "test_patch": "", "created_at": "2026-01-01T00:00:00Z"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")


def cli(*args: str, modules: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(modules)])}
    return subprocess.run([sys.executable, "-c", "from codecorpus.cli import app; app()", *args], env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def env_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("envs")
    outside = root / "outside"
    outside.mkdir()
    patches = build_repos(root / "repos", outside)
    write_tasks(root / "tasks.jsonl", patches)
    modules = root / "modules"
    modules.mkdir()
    (modules / "my_proposer.py").write_text(PROPOSER)
    recipe = {
        "name": "envs-e2e", "out": str(root / "run"), "workers": 2,
        "sources": [{"type": "git", "name": "repos", "path": str(root / "repos")}],
        "stages": {
            "env_discover": {},
            "env_verify": {"runs": 2, "proposer": "my_proposer:propose",
                           "sandbox": {"limits": {"wall_seconds": 6, "cpu_seconds": 30}},
                           "install_limits": {"wall_seconds": 120}},
            "task_validate": {"tasks": str(root / "tasks.jsonl"), "max_per_repo": 20},
        },
    }
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    first = cli("run", str(root / "recipe.yaml"), "--quiet", modules=modules)
    assert first.returncode == 0, first.stdout + first.stderr
    snapshot = {p: p.read_bytes() for p in (root / "run").glob("envs/*")} | {
        root / "run" / "manifest.json": (root / "run" / "manifest.json").read_bytes()}
    second = cli("run", str(root / "recipe.yaml"), modules=modules)
    assert second.returncode == 0, second.stdout + second.stderr
    return {"root": root, "run": root / "run", "outside": outside, "second": second.stdout + second.stderr,
            "snapshot": snapshot, "first": first.stdout + first.stderr}


def stats(run: Path, stage: str) -> dict:
    return json.loads((run / stage / "_stats.json").read_text())


def dropped(run: Path, stage: str) -> dict[str, str]:
    import pyarrow.parquet as pq

    rows = []
    for p in sorted((run / stage / "_dropped").glob("*.parquet")):
        rows += pq.read_table(p).to_pylist()
    return {r["id"]: r["reason"] for r in rows}


def test_verified_specs_for_each_ecosystem(env_run):
    run = env_run["run"]
    specs = {json.loads(p.read_text())["repo"]: json.loads(p.read_text()) for p in run.glob("envs/*.json")}
    want = {"calc", "pyt", "odd"} | ({"greet"} if shutil.which("node") else set())
    assert set(specs) == want
    for doc in specs.values():
        jsonschema.validate(doc, env_spec.schema())
        assert doc["sandbox"] == "bwrap" and doc["tests"]["passed"] >= 5
        assert doc["tests"]["fresh_tree"] == {k: doc["tests"][k] for k in ("passed", "failed", "skipped")}
        assert doc["proof"]["own"] and doc["tests"]["min_passed"] == 5
        assert (run / "envs" / f"{env_spec.spec_name(doc['repo'], doc['dependency_hash'])[:-5]}.Dockerfile").is_file()
    assert specs["calc"]["test"]["parser"] == "unittest"
    assert specs["pyt"]["test"]["parser"] in ("junit", "pytest") and specs["pyt"]["tests"]["passed"] == 5
    assert specs["pyt"]["proof"]["packages"]["lib"]["where"] == "work tree"
    assert specs["pyt"]["ready"] == ["python -m pip install --no-deps --no-build-isolation -e '.[test]'"]
    assert specs["odd"]["provenance"]["test"]["file"] == "proposer:my_proposer:propose"
    if "greet" in specs:
        assert specs["greet"]["test"]["parser"] == "tap"


def test_hostile_repository_is_a_counted_drop(env_run):
    run = env_run["run"]
    s = stats(run, "env_verify")
    drops = dropped(run, "env_verify")
    assert [k for k in drops if k.startswith("sleeper@")] and drops[next(k for k in drops if k.startswith("sleeper@"))] == "timeout"
    assert s["rows_in"] == s["rows_out"] + sum(s["dropped"].values())
    assert not (env_run["outside"] / "escaped.txt").exists()  # nothing outside the sandbox changed
    assert s["counters"]["proposer_calls"] == 2  # odd (verified by its proposal) and sleeper (none)
    import pyarrow.parquet as pq

    rows = [r for p in sorted((run / "env_verify" / "_dropped").glob("*.parquet"))
            for r in pq.read_table(p).to_pylist()]
    verdict = json.loads(next(r for r in rows if r["id"].startswith("sleeper@"))["detail"])
    assert verdict["attempts"] and all(a["test"] and a["reason"] for a in verdict["attempts"])
    assert verdict["attempts"][0]["reason"] == "timeout" and verdict["wall_seconds"] > 0


def test_validated_task_has_fail_to_pass(env_run):
    run = env_run["run"]
    lines = (run / "verified" / "tasks.jsonl").read_text().splitlines()
    tasks = [json.loads(line) for line in lines]
    assert [t["instance_id"] for t in tasks] == ["calc-1"]
    assert json.loads(tasks[0]["FAIL_TO_PASS"]) == ["test_calc.CalcTest.test_clamp"]
    assert json.loads(tasks[0]["PASS_TO_PASS"]) == sorted(f"test_calc.CalcTest.{t}" for t in KEEPS)
    assert tasks[0]["environment"].startswith("envs/calc@")
    s = stats(run, "task_validate")
    assert s["rows_in"] == 4 and s["rows_out"] == 1
    assert s["dropped"] == {"patch_does_not_apply": 1, "unknown_repository": 1, "bad_task_record": 1}
    # Validation by use: the kept task was graded as a trainer grades it.
    assert {k: s["counters"].get(k) for k in ("by_use_checked", "gold_resolved", "empty_unresolved")} \
        == {"by_use_checked": 1, "gold_resolved": 1, "empty_unresolved": 1}


def test_proposer_transcripts_are_chat_traces(env_run):
    traces = sorted((env_run["run"] / "traces" / "env_verify").glob("*.jsonl"))
    assert [p.name.split("@")[0] for p in traces] == ["odd", "sleeper"]
    odd = json.loads(traces[0].read_text())
    assert [m["role"] for m in odd["messages"]] == ["system", "user", "assistant", "user"]
    assert "checks/verify_lib.py" in odd["messages"][1]["content"]
    assert odd["metadata"]["outcome"] == "verified"
    assert json.loads(traces[1].read_text())["metadata"]["outcome"].startswith("not run")


def test_report_funnel_and_costs(env_run):
    import pyarrow.parquet as pq

    report = env_run["run"] / "report"
    funnel = {r["step"]: r["count"] for r in pq.read_table(report / "env_yield.parquet").to_pylist()}
    assert funnel["repositories"] == 5 and funnel["validated tasks"] == 1
    verified = 4 if shutil.which("node") else 3
    assert funnel["verified environments"] == verified
    for step in ("per-test results", "at least min_passed passing", "at least min_pass_rate",
                 "reproduced in a fresh tree"):
        assert funnel[step] == verified, step  # sleeper timed out before any per-test result
    costs = {r["per"]: r for r in pq.read_table(report / "env_costs.parquet").to_pylist()}
    assert costs["validated task"]["cpu_seconds_each"] > 0
    failures = pq.read_table(report / "env_failures.parquet").to_pylist()
    assert {"stage": "env_verify", "reason": "timeout", "ecosystem": "python", "count": 1} in failures
    assert "Environments and verified tasks" in (report / "index.html").read_text()
    stages = [r["stage"] for r in pq.read_table(report / "funnel.parquet").to_pylist() if r["set"] is None]
    assert stages == [spec.name for spec in REPO_ENVS]  # the order the run ran them


def test_cli_prints_each_repository_verdict(env_run):
    lines = [ln for ln in env_run["first"].splitlines() if re.match(r"^\w+@[0-9a-f]{12}: ", ln)]
    by_repo = {ln.split("@")[0]: ln for ln in lines}
    assert set(by_repo) == {"calc", "pyt", "odd", "sleeper"} | ({"greet"} if shutil.which("node") else set())
    assert re.search(r": verified \(6 passed, 0 failed, [\d.]+ s\)$", by_repo["calc"])  # HEAD: test_clamp
    assert re.search(r": timeout: .*\(0 passed, 0 failed, [\d.]+ s\)$", by_repo["sleeper"])


def test_manifest_verifies_and_catches_a_changed_spec(env_run, tmp_path):
    run = env_run["run"]
    assert verify_manifest(run) == []
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("env_cache", "env_discover"))
    spec = next(copy.glob("envs/*.json"))
    spec.write_text(spec.read_text().replace('"bwrap"', '"none"'))
    problems = verify_manifest(copy)
    assert any(spec.name in p and "sha256" in p for p in problems)


def test_resume_skips_everything(env_run):
    assert "resumed: " in env_run["second"]
    total = env_run["second"].split("resumed: ", 1)[1].split(" shards")[0]
    done, _, of = total.partition(" of ")
    assert done == of
    for path, data in env_run["snapshot"].items():
        assert path.read_bytes() == data

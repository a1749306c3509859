"""Environment specs: one JSON file per verified repository version (``envs/*.json``).

The schema ships beside this module (``env_spec.schema.json``, JSON Schema 2020-12); a spec
says how to install the repository, how to run its tests and parse them, under which
sandbox policy, what it cost, and where each command was read.

Two fields are measurements (``MEASURED``), different on every run of the same inputs:
``durations`` (install and test seconds, CPU seconds) and ``tests`` (the counts of passed,
failed and skipped tests, the flaky ids the runs observed, the known failures, and the
counts of the fresh checkout's run, equal to the install tree's in a verified spec).

``steps`` is the one list of what builds the environment: the system packages an image
needs (``system``: git for a VCS-versioned build, a C compiler for extensions; the
sandbox's host toolchains have them), the ``install`` commands, and the ``ready`` commands
that ready every fresh checkout (the tree's re-install: generated version files, compiled
extensions). ``render_dockerfile`` writes its ``RUN`` lines from this list alone, so the
spec and its Dockerfile name the same steps. ``proof`` records where the repository's own
packages resolved when its tests ran in the fresh tree. Everything else is the
environment's identity, a function of the repository version, the host toolchains (their
versions are in ``toolchain`` and in ``cache_key``) and the recipe: ``identity_hash`` is
the sha256 over it, which the RL manifest records, so re-running a recipe gives the same
manifest and ``manifest verify`` checks what the environment is, not how long it took.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from codecorpus.envs import sandbox as sb
from codecorpus.envs.verify import Verification
from codecorpus.model import config_hash
from codecorpus.storage.atomic import atomic_write_bytes

SCHEMA_PATH = Path(__file__).with_name("env_spec.schema.json")
MEASURED = ("durations", "tests")
"""The spec fields that are measurements of a run, left out of ``identity_hash``."""
FORMAT_VERSION = 2
"""2: ready steps, the one step list, the own-code proof, known failures and the fresh tree's counts."""
# The command for chosen tests, per parser; {tests} is the shell-quoted test ids.
SELECTORS = {
    "pytest": "python -m pytest -rA -p no:cacheprovider {tests}",
    "junit": "{command} {tests}",
    "json": "{command} {tests}",
    "unittest": "python -m unittest -v {tests}",
    "cargo": "cargo test --offline -- --exact {tests}",
    "go-json": "go test -json -run {tests} ./...",
    "tap": "node --test --test-reporter=tap --test-name-pattern={tests}",
    "ctest": "ctest --test-dir build --output-on-failure -R {tests}",
    "exit-code": "{command}",
}


def schema() -> dict:
    """The environment spec's JSON schema."""
    return json.loads(SCHEMA_PATH.read_text())


def build_steps(env: Verification) -> list[dict[str, str]]:
    """The environment's steps in order: system packages (for an image), install, ready."""
    steps = []
    if env.system_packages:
        steps.append({"phase": "system", "command": (
            "apt-get update && apt-get install -y --no-install-recommends "
            + " ".join(sorted(env.system_packages)) + " && rm -rf /var/lib/apt/lists/*")})
    steps += [{"phase": "install", "command": c} for c in env.install]
    steps += [{"phase": "ready", "command": c} for c in env.ready]
    return steps


def environment_spec(env: Verification, repo: str, revision: str, box: sb.SandboxConfig,
                     dependency_files: tuple[str, ...] = (), min_passed: int | None = None,
                     min_pass_rate: float | None = None) -> dict:
    """The spec of a verified environment (raises ValueError for an unverified one)."""
    if not env.verified:
        raise ValueError(f"{repo}@{revision}: not verified ({env.reason}); specs are written "
                         "for verified environments only")
    statuses = list(env.tests.values())
    fresh = list(env.fresh_tests.values())
    selector = SELECTORS.get(env.parser, "{command}")
    if env.parser == "junit" and "pytest" in env.test:
        selector = SELECTORS["pytest"]
    thresholds = {k: v for k, v in (("min_passed", min_passed), ("min_pass_rate", min_pass_rate))
                  if v is not None}
    return {
        "format_version": FORMAT_VERSION,
        "repo": repo,
        "revision": revision,
        "dependency_hash": env.dependency_hash,
        "dependency_files": list(dependency_files),
        "cache_key": env.cache_key,
        "toolchain": {"name": env.toolchain, "version": env.toolchain_version},
        "install": list(env.install),
        "install_notes": list(env.install_notes),
        "ready": list(env.ready),
        "system_packages": sorted(env.system_packages),
        "steps": build_steps(env),
        "test": {"command": env.test, "parser": env.parser, "reports": env.reports,
                 "runner": env.runner,
                 "selector_template": selector.replace("{command}", env.test)},
        "proof": env.proof,
        "sandbox": box.kind,
        "network": {"install": "package-indexes", "test": "none"},
        "limits": box.limits.model_dump(),
        "environment": {"TZ": "UTC", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0",
                        "CODECORPUS_RESULTS": sb.RESULTS,
                        "SOURCE_DATE_EPOCH": str(box.source_date_epoch)},
        "durations": {"install_seconds": env.install_seconds,
                      "test_seconds": round(env.test_seconds, 3),
                      "cpu_seconds": env.cpu_seconds},
        "provenance": {"install": {"file": env.install_source[0], "line": env.install_source[1]},
                       "test": {"file": env.test_source[0], "line": env.test_source[1]}},
        "tests": {"passed": statuses.count("passed"), "failed": statuses.count("failed"),
                  "skipped": statuses.count("skipped"), "flaky": sorted(env.flaky),
                  "known_failures": env.known_failures,
                  "fresh_tree": {s: fresh.count(s) for s in ("passed", "failed", "skipped")},
                  **thresholds},
    }


def identity_hash(spec: dict) -> str:
    """sha256 of a spec without its measurements (``MEASURED``), as ``config_hash`` hashes configs.

    >>> a = {"repo": "x", "durations": {"test_seconds": 1.0}, "tests": {"passed": 3}}
    >>> identity_hash(a) == identity_hash({**a, "durations": {"test_seconds": 2.5}})
    True
    """
    return config_hash({k: v for k, v in spec.items() if k not in MEASURED})


def spec_name(repo: str, dependency_hash: str) -> str:
    """``owner__name@<hash12>.json``: one file per repository and dependency version.

    >>> spec_name("psf/requests", "ab" * 32)
    'psf__requests@abababababab.json'
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "__", repo).strip("_") or hashlib.sha256(
        repo.encode()).hexdigest()[:12]
    return f"{safe}@{dependency_hash[:12]}.json"


def write_spec(spec: dict, out_dir: Path) -> Path:
    """Write a spec atomically under ``out_dir`` (``atomic_write_bytes``: in an S3 run, into
    this node's mirror and published to the bucket, where the RL manifest lists it)."""
    path = Path(out_dir) / spec_name(spec["repo"], spec["dependency_hash"])
    atomic_write_bytes(path, json.dumps(spec, indent=2, sort_keys=True).encode() + b"\n")
    return path


_BASE_IMAGES = {"python": "python:{major_minor}-slim", "node": "node:{major}-bookworm-slim",
                "rust": "rust:1-slim-bookworm", "go": "golang:1-bookworm",
                "java-maven": "maven:3-eclipse-temurin-21", "java-gradle": "gradle:jdk21",
                "cmake": "debian:bookworm", "make": "debian:bookworm"}


def render_dockerfile(spec: dict) -> str:
    """A Dockerfile that rebuilds a spec's environment, for users who have Docker: the same
    paths (/workspace, /env), fixed variables, the spec's ``steps`` (system packages,
    install, ready: one ``RUN`` each, in order) and its test command. A fresh checkout
    mounted at /workspace is readied by running the ``ready`` steps again."""
    chain, version = spec["toolchain"]["name"], spec["toolchain"]["version"]
    numbers = re.findall(r"\d+", version)
    image = _BASE_IMAGES[chain].format(
        major_minor=".".join(numbers[:2]) or "3", major=(numbers[:1] or ["20"])[0])
    env = {**spec["environment"], "ENV_DIR": sb.ENV, "WORK_DIR": sb.WORK,
           "PATH": f"{sb.ENV}/venv/bin:{sb.ENV}/bin:$PATH"}
    lines = [f"# {spec['repo']}@{spec['revision']} (cache key {spec['cache_key']})",
             f"FROM {image}",
             *(f'ENV {k}="{v}"' for k, v in env.items()),
             f"WORKDIR {sb.RESULTS}",  # makes the reports directory the test command may write to
             f"WORKDIR {sb.WORK}", f"COPY . {sb.WORK}",
             *(f"RUN {step['command']}" for step in spec["steps"]),
             f"CMD {json.dumps(['/bin/sh', '-c', spec['test']['command']])}"]
    return "\n".join(lines) + "\n"

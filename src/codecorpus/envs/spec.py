"""Environment specs: one JSON file per verified repository version (``envs/*.json``).

The schema ships beside this module (``env_spec.schema.json``, JSON Schema 2020-12); a spec
says how to install the repository, how to run its tests and parse them, under which
sandbox policy, what it cost, and where each command was read.

Two fields are measurements (``MEASURED``), different on every run of the same inputs:
``durations`` (install and test seconds, CPU seconds) and ``tests`` (the counts of passed,
failed and skipped tests and the flaky ids the runs observed). Everything else is the
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
FORMAT_VERSION = 1
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


def environment_spec(env: Verification, repo: str, revision: str, box: sb.SandboxConfig,
                     dependency_files: tuple[str, ...] = ()) -> dict:
    """The spec of a verified environment (raises ValueError for an unverified one)."""
    if not env.verified:
        raise ValueError(f"{repo}@{revision}: not verified ({env.reason}); specs are written "
                         "for verified environments only")
    statuses = list(env.tests.values())
    selector = SELECTORS[env.parser]
    if env.parser == "junit" and "pytest" in env.test:
        selector = SELECTORS["pytest"]
    return {
        "format_version": FORMAT_VERSION,
        "repo": repo,
        "revision": revision,
        "dependency_hash": env.dependency_hash,
        "dependency_files": list(dependency_files),
        "cache_key": env.cache_key,
        "toolchain": {"name": env.toolchain, "version": env.toolchain_version},
        "install": list(env.install),
        "test": {"command": env.test, "parser": env.parser, "reports": env.reports,
                 "selector_template": selector.replace("{command}", env.test)},
        "sandbox": box.kind,
        "network": {"install": "package-indexes", "test": "none"},
        "limits": box.limits.model_dump(),
        "environment": {"TZ": "UTC", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0",
                        "SOURCE_DATE_EPOCH": str(box.source_date_epoch)},
        "durations": {"install_seconds": env.install_seconds,
                      "test_seconds": round(env.test_seconds, 3),
                      "cpu_seconds": env.cpu_seconds},
        "provenance": {"install": {"file": env.install_source[0], "line": env.install_source[1]},
                       "test": {"file": env.test_source[0], "line": env.test_source[1]}},
        "tests": {"passed": statuses.count("passed"), "failed": statuses.count("failed"),
                  "skipped": statuses.count("skipped"), "flaky": sorted(env.flaky)},
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
    paths (/workspace, /env), fixed variables, install commands and test command."""
    chain, version = spec["toolchain"]["name"], spec["toolchain"]["version"]
    numbers = re.findall(r"\d+", version)
    image = _BASE_IMAGES[chain].format(
        major_minor=".".join(numbers[:2]) or "3", major=(numbers[:1] or ["20"])[0])
    env = {**spec["environment"], "ENV_DIR": sb.ENV, "WORK_DIR": sb.WORK,
           "PATH": f"{sb.ENV}/venv/bin:{sb.ENV}/bin:$PATH"}
    lines = [f"# {spec['repo']}@{spec['revision']} (cache key {spec['cache_key']})",
             f"FROM {image}",
             *(f'ENV {k}="{v}"' for k, v in env.items()),
             f"WORKDIR {sb.WORK}", f"COPY . {sb.WORK}",
             *(f"RUN {cmd}" for cmd in spec["install"]),
             f"CMD {json.dumps(['/bin/sh', '-c', spec['test']['command']])}"]
    return "\n".join(lines) + "\n"

"""Config of the environment stages in a recipe: ``env_discover``, ``env_verify``, ``task_validate``.

    stages:
      env_discover: {max_commits: 200, max_versions: 3}
      env_verify: {runs: 3, proposer: "mypkg.propose:commands"}
      task_validate: {tasks: runs/repo-tasks/tasks/tasks.jsonl, max_per_repo: 20}

``env_verify.sandbox.kind`` is ``bwrap`` unless the recipe says ``none`` explicitly; nothing
else in codecorpus runs repository code.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from codecorpus.envs import sandbox as sb
from codecorpus.model import Model

# The run directory of an environments run: formats of this part alone, beside its configs
# because the stage specs name them (``output_dirs``) and a spec imports configs, not bodies.
ENVS_DIR = "envs"
"""``RUN/envs/``: one verified environment spec (JSON) per repository."""
ENV_TRACES_DIR = "traces/env_verify"
"""``RUN/traces/env_verify/``: the proposer's transcripts, as chat traces."""
VERIFIED_DIR = "verified"
"""``RUN/verified/``: the validated tasks and the RL manifest."""
VERIFIED_TASKS = f"{VERIFIED_DIR}/tasks.jsonl"
ENV_CACHE_DIR = "env_cache"
"""``RUN/env_cache/``: this node's installed environments by content key (the default cache)."""


class EnvDiscoverConfig(Model):
    """Group each repository's commits by dependency-file hash; derive candidates per group."""

    max_commits: int = Field(200, ge=1, description="newest commits of the revision's history grouped")
    max_versions: int = Field(
        3, ge=1, description="dependency versions kept per repository, newest first (others: over_max_versions)"
    )


class EnvVerifyConfig(Model):
    """Run the candidates in the sandbox; write ``envs/*.json`` for each verified version."""

    sandbox: sb.SandboxConfig = sb.SandboxConfig()
    install_limits: sb.Limits = sb.Limits(wall_seconds=1200)
    runs: int = Field(3, ge=1, description="test runs; a status that changes is flaky")
    max_installs: int = Field(3, ge=1, description="install candidates tried per toolchain")
    max_tests: int = Field(3, ge=1, description="test candidates tried per install")
    min_passed: int = Field(5, ge=1, description="passing tests a verified environment needs")
    min_pass_rate: float = Field(
        0.8, ge=0, le=1, description="passed / (passed + failed) a verified environment needs (SWE-smith's 0.8)")
    cache_dir: str | None = Field(
        None, description="installed environments by content key (default: RUN/env_cache)"
    )
    proposer: str | None = Field(
        None, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="module:function asked for commands when the heuristics find none or all fail",
    )
    proposer_config: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the proposer")
    dockerfile: bool = Field(True, description="also write envs/<spec>.Dockerfile")


class TaskValidateConfig(Model):
    """Validate SWE-bench-format task candidates against the verified environments."""

    tasks: str | None = Field(
        None, description="SWE-bench-format JSONL of task candidates (e.g. a repo-tasks run's tasks/tasks.jsonl)"
    )
    max_per_repo: int = Field(20, ge=1, description="validations per repository, newest candidates first")

"""The host toolchains a sandbox sees, and where each keeps its downloaded dependencies.

A toolchain is trusted host software (an interpreter, a compiler, a package manager); its
prefix is bound read-only into the sandbox at the same path. Each toolchain's dependency
store points into the environment directory (``$ENV_DIR``), so one install is cached and
shared by every commit whose dependency files hash alike.

Python is the interpreter alone: its programs are linked into the sandbox's
``/toolchain/bin`` (``python``, ``python3``, ``python3.X``) instead of putting its ``bin``
(with the host's ``pytest`` and ``pip``) on PATH, and every host ``site-packages`` and
``dist-packages`` directory (``host_package_dirs``) is hidden, whatever the toolchain. The
repository's test runner and dependencies must come from the environment's install.
"""

from __future__ import annotations

import functools
import glob
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from codecorpus.envs.sandbox import SandboxConfig

CACHEABLE = frozenset({"python", "node", "rust", "go", "java-maven", "java-gradle"})
"""Toolchains whose install result lives in ``$ENV_DIR`` (cmake/make builds are per commit)."""


@dataclass(frozen=True)
class Toolchain:
    """What a sandbox needs for one toolchain."""

    name: str
    version: str
    paths: tuple[str, ...] = ()
    path_dirs: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    test_env: dict[str, str] = field(default_factory=dict)
    links: tuple[tuple[str, str], ...] = ()
    """(name, host program) linked into the sandbox's /toolchain/bin."""


@functools.cache
def _version(argv: tuple[str, ...]) -> str:
    """First output line of a host tool's version command ("" when it is missing)."""
    if not shutil.which(argv[0]):
        return ""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if proc.returncode != 0:
        return ""
    first = (proc.stdout or proc.stderr).strip().splitlines()[:1]
    return re.sub(r"\x1b\[[0-9;]*m", "", first[0]) if first else ""  # no terminal colours


def _rust(env_dir: str) -> Toolchain:
    cargo = shutil.which("cargo") or ""
    real = os.path.realpath(cargo) if cargo else ""
    paths, env = [], {"CARGO_HOME": f"{env_dir}/cargo", "CARGO_TARGET_DIR": "target",
                      "RUSTUP_AUTO_INSTALL": "0", "CARGO_TERM_COLOR": "never"}
    if cargo and not cargo.startswith("/usr/"):
        paths.append(str(Path(cargo).parent))
        rustup_home = os.environ.get("RUSTUP_HOME", str(Path.home() / ".rustup"))
        if Path(rustup_home).is_dir():
            paths.append(rustup_home)
            env["RUSTUP_HOME"] = rustup_home
        if real != cargo and not real.startswith(tuple(paths)):
            paths.append(str(Path(real).parent))
    return Toolchain("rust", _version(("cargo", "--version")), tuple(paths),
                     tuple(str(Path(p)) for p in paths[:1]), env)


def toolchain(name: str, env_dir: str) -> Toolchain:
    """The host's ``name`` toolchain, its dependency stores under ``env_dir`` (the path the
    sandboxed command sees)."""
    if name == "python":
        prefix = os.path.realpath(sys.base_prefix)
        return Toolchain("python", f"CPython {platform.python_version()}", (prefix,), (),
                         {"PIP_NO_INPUT": "1", "PIP_PROGRESS_BAR": "off",
                          "PIP_DISABLE_PIP_VERSION_CHECK": "1"}, links=python_links(prefix))
    if name == "node":
        return Toolchain("node", _version(("node", "--version")),
                         env={"npm_config_update_notifier": "false", "npm_config_fund": "false",
                              "npm_config_audit": "false"})
    if name == "rust":
        return _rust(env_dir)
    if name == "go":
        return Toolchain("go", _version(("go", "version")), env={
            "GOPATH": f"{env_dir}/go", "GOMODCACHE": f"{env_dir}/go/pkg/mod",
            "GOCACHE": "/tmp/go-build", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"},
            test_env={"GOPROXY": "off"})
    if name == "java-maven":
        return Toolchain(name, _version(("mvn", "--version")),
                         env={"MAVEN_OPTS": f"-Dmaven.repo.local={env_dir}/m2"})
    if name == "java-gradle":
        return Toolchain(name, _version(("gradle", "--version")),
                         env={"GRADLE_USER_HOME": f"{env_dir}/gradle"})
    if name == "cmake":
        return Toolchain("cmake", _version(("cmake", "--version")))
    if name == "make":
        return Toolchain("make", _version(("make", "--version")))
    raise ValueError(f"unknown toolchain {name!r}")


def python_links(prefix: str) -> tuple[tuple[str, str], ...]:
    """The interpreter's names, each linked to the interpreter binary under ``prefix``."""
    major, minor = sys.version_info[:2]
    binary = f"{prefix}/bin/python{major}.{minor}"
    if not os.path.exists(binary):
        binary = os.path.realpath(sys.executable)
    return tuple((n, binary) for n in ("python", f"python{major}", f"python{major}.{minor}"))


@functools.cache
def host_package_dirs() -> tuple[str, ...]:
    """Every host interpreter's package directories: the toolchain interpreter's
    ``site-packages`` and the system's ``dist-packages``, hidden in every sandbox."""
    prefix = os.path.realpath(sys.base_prefix)
    patterns = (f"{prefix}/lib/python3*/site-packages", "/usr/lib/python3/dist-packages",
                "/usr/lib/python3*/site-packages", "/usr/local/lib/python3*/dist-packages",
                "/usr/local/lib/python3*/site-packages")
    return tuple(sorted({p for pat in patterns for p in glob.glob(pat) if os.path.isdir(p)}))


NAMES = ("python", "node", "rust", "go", "java-maven", "java-gradle", "cmake", "make")


def host_versions() -> dict[str, str]:
    """The version of every toolchain on this host ("" for a missing one): what an
    environment verified here depends on besides the repository and the recipe."""
    return {name: toolchain(name, "/env").version for name in NAMES}


def with_toolchain(config: SandboxConfig, chain: Toolchain) -> SandboxConfig:
    """``config`` with the toolchain's prefixes bound, its programs linked, its variables set,
    and the host's package directories hidden."""
    paths = tuple(dict.fromkeys((*config.toolchain_paths, *chain.paths)))
    dirs = tuple(dict.fromkeys((*chain.path_dirs, *config.path_dirs)))
    env = tuple(sorted({**dict(config.toolchain_env), **chain.env}.items()))
    links = tuple(dict((*config.tool_links, *chain.links)).items())
    hidden = tuple(dict.fromkeys((*config.hidden_paths, *host_package_dirs())))
    return config.model_copy(update={"toolchain_paths": paths, "path_dirs": dirs,
                                     "toolchain_env": env, "tool_links": links,
                                     "hidden_paths": hidden})

"""What a work tree says about itself, read from its files (nothing here runs its code).

- ``runner_of``: the test runner a command ends up calling, through ``package.json``
  scripts (``npm test`` -> ``nyc mocha``) and Makefile targets (``make check`` ->
  ``python -m unittest``), so a drop can name the runner that could not be read;
- ``ready_steps``: the commands that ready a fresh checkout for an installed environment
  (the tree's own re-install, lifecycle scripts, per-commit builds);
- ``system_packages``: what an image needs besides its toolchain (git for a VCS-versioned
  build, a C compiler for extensions);
- ``own_packages`` and ``package_name``: the repository's own importable packages, whose
  resolution ``verify.prove_own_code`` records.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import sys
from pathlib import Path

import tomllib

from codecorpus.envs import toolchains

_RUNNERS = (("pytest", r"\bpy\.?test\b"), ("unittest", r"\bunittest\b"),
            ("node --test", r"\bnode\s+(?:\S+\s+)*--test\b"), ("vitest", r"\bvitest\b"),
            ("jest", r"\bjest\b"), ("mocha", r"\bmocha\b"), ("ava", r"\bava\b"),
            ("tap", r"\btap\b"), ("tape", r"\btape\b"), ("jasmine", r"\bjasmine\b"),
            ("karma", r"\bkarma\b"), ("uvu", r"\buvu\b"), ("go test", r"\bgo test\b"),
            ("cargo test", r"\bcargo (?:test|nextest)\b"), ("maven", r"\bmvnw?\b"),
            ("gradle", r"\bgradlew?\b"), ("ctest", r"\bctest\b"), ("tox", r"\btox\b"),
            ("nox", r"\bnox\b"), ("make", r"\bmake\b"))
_SCRIPT_CALL = re.compile(r"\b(?:npm|pnpm|yarn)(?:\s+run(?:-script)?)?\s+([\w:.-]+)")
_MAKE_CALL = re.compile(r"\bmake\s+(?:-\S+\s+)*([\w.-]+)")


def runner_of(command: str, tree: Path | None = None, depth: int = 0) -> str:
    """The test runner a command ends up calling, following ``npm test``/``npm run x``
    through ``package.json`` scripts (wrappers such as nyc, c8 and cross-env are skipped
    by looking for the runner itself).

    >>> runner_of("npx nyc --reporter=lcov mocha test/")
    'mocha'
    """
    text = command
    if tree is not None and depth < 5:
        scripts = _scripts(tree)
        for name in _SCRIPT_CALL.findall(command):
            script = scripts.get("test" if name in ("test", "t") else name)
            if isinstance(script, str):
                text = runner_of(script, tree, depth + 1) + " " + script + " " + text
        for target in _MAKE_CALL.findall(command):
            recipe = _make_recipe(tree, target)
            if recipe:
                text = runner_of(recipe, tree, depth + 1) + " " + recipe + " " + text
    for name, pattern in _RUNNERS:
        if re.search(pattern, text):
            return name
    return command.split()[0] if command.split() else "?"


def _make_recipe(tree: Path, target: str) -> str:
    """The recipe lines of a Makefile target, joined (empty when there is none)."""
    text = _read(tree / "Makefile") or _read(tree / "makefile")
    m = re.search(rf"^{re.escape(target)}\s*:[^\n=]*\n((?:\t[^\n]*\n?)+)", text, re.M)
    return " ; ".join(ln.strip() for ln in m.group(1).splitlines()) if m else ""


def _scripts(tree: Path) -> dict:
    try:
        pkg = json.loads((tree / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    scripts = pkg.get("scripts") if isinstance(pkg, dict) else None
    return scripts if isinstance(scripts, dict) else {}






_PIP_INSTALL = re.compile(r"^(?:python3? -m )?pip3? install\b")
_LOCAL_TARGET = re.compile(r"""^(?:-e|--editable)?\s*['"]?\.(?:/)?(?:\[[^\]]*\])?['"]?$""")


def ready_steps(install: tuple[str, ...], chain: str, tree: Path) -> tuple[str, ...]:
    """The commands that ready a fresh checkout for an environment installed by ``install``:
    the install's own re-install of the work tree (without dependencies: they are in the
    environment), which regenerates version files (setuptools-scm, hatch-vcs) and compiles
    extensions in place; ``setup.py`` build commands; the root package's npm lifecycle
    scripts (``npm ci`` runs them in the install tree); for per-commit builds (cmake,
    make) the whole build.

    >>> ready_steps(('python -m venv "$ENV_DIR/venv"', "python -m pip install -e '.[test]'",
    ...              "python -m pip install pytest"), "python", Path("/nonexistent"))
    ("python -m pip install --no-deps --no-build-isolation -e '.[test]'",)
    """
    if chain not in toolchains.CACHEABLE:
        return install
    out: list[str] = []
    for command in install:
        if chain == "python" and _PIP_INSTALL.match(command):
            words = shlex.split(command)[(3 if command.startswith("python") else 2):]
            local = _local_targets(words)
            if local:
                out.append(f"python -m pip install --no-deps --no-build-isolation {' '.join(local)}")
        elif chain == "python" and re.search(r"\bsetup\.py\b.*\b(develop|build_ext|build)\b", command):
            out.append(command)
    if chain == "node":
        scripts = _scripts(tree)
        out += [f"npm run {name}" for name in ("preinstall", "install", "postinstall", "prepare")
                if isinstance(scripts.get(name), str)]
    return tuple(out)


def build_requirements(tree: Path) -> list[str]:
    """What the tree's build backend needs (``[build-system] requires`` of its
    ``pyproject.toml``; setuptools and wheel for a ``setup.py`` without one): installed into
    the environment at install time, so that the ready steps rebuild the tree without build
    isolation, with no network (a rollout's session and a grading have none).

    >>> build_requirements(Path("/nonexistent"))
    []
    """
    try:
        data = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if data is None:
        return ["setuptools>=40.8.0", "wheel"] if (tree / "setup.py").is_file() else []
    system = data.get("build-system")
    requires = system.get("requires") if isinstance(system, dict) else None
    if not isinstance(requires, list):
        return ["setuptools>=40.8.0", "wheel"]
    return [r for r in requires if isinstance(r, str) and r.strip()]


BACKEND_REQUIRES = (
    "import importlib, subprocess, sys, tomllib\n"
    "try:\n"
    "    system = tomllib.load(open('pyproject.toml', 'rb')).get('build-system', {})\n"
    "except OSError:\n"
    "    system = {}\n"
    "sys.path[:0] = system.get('backend-path', [])\n"
    "name, _, attr = system.get('build-backend', 'setuptools.build_meta:__legacy__').partition(':')\n"
    "backend = importlib.import_module(name)\n"
    "for part in filter(None, attr.split('.')):\n"
    "    backend = getattr(backend, part)\n"
    "extra = []\n"
    "for hook in ('get_requires_for_build_editable', 'get_requires_for_build_wheel'):\n"
    "    extra += getattr(backend, hook, lambda config_settings=None: [])()\n"
    "if extra:\n"
    "    subprocess.check_call([sys.executable, '-m', 'pip', 'install', *sorted(set(extra))])\n"
)
"""A script run in the tree after its build requirements are installed: the build backend's
own answer (PEP 517/660 hooks) to what an editable or wheel build needs besides them
(hatchling's ``editables``, setuptools' ``wheel``), installed too."""


def _local_targets(words: list[str]) -> list[str]:
    """The work-tree targets of pip install's arguments (``.``, ``-e .``, ``'.[test]'``),
    quoted for the shell."""
    out, editable = [], False
    for word in words:
        if word in ("-e", "--editable"):
            editable = True
            continue
        if _LOCAL_TARGET.match(word):
            out.append(("-e " if editable else "") + shlex.quote(word))
        editable = False
    return out


_VCS_VERSIONING = re.compile(r"setuptools[_-]scm|hatch-vcs|hatch_vcs|versioningit|dunamai|"
                             r"poetry-dynamic-versioning|\bpbr\b|setuptools-git-versioning")


def system_packages(tree: Path, chain: str) -> tuple[str, ...]:
    """Debian packages an image needs besides its toolchain: git for a VCS-versioned build
    (the version is read from the checkout's history) and a C compiler for compiled
    extensions (a slim image has neither)."""
    out = []
    text = "".join(_read(tree / name) for name in ("pyproject.toml", "setup.cfg", "setup.py"))
    if _VCS_VERSIONING.search(text) or (chain == "node" and "git+" in _read(tree / "package.json")):
        out.append("git")
    if chain == "python" and (re.search(r"\bExtension\(|ext_modules|cythonize", text)
                              or _has_c_sources(tree)):
        out.append("build-essential")
    return tuple(out)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:200_000]
    except OSError:
        return ""


def _has_c_sources(tree: Path) -> bool:
    for pattern in ("*.c", "*.pyx", "src/**/*.c", "src/**/*.pyx", "*/*.c", "*/*.pyx"):
        if next(iter(tree.glob(pattern)), None) is not None:
            return True
    return False


_NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks",
                 "bench", "scripts", "tools", "build", "dist", "node_modules", "ci", "site"}
_NOT_MODULES = {"setup", "conftest", "noxfile", "tasks", "fabfile", "manage", "conf"}


def own_packages(tree: Path) -> list[str]:
    """The repository's own top-level Python packages and modules (root or ``src/``)."""
    names: set[str] = set()
    for base in (tree, tree / "src"):
        if not base.is_dir():
            continue
        for child in base.iterdir():
            name = child.name
            if (name.startswith((".", "_")) or name.lower() in _NOT_PACKAGES
                    or child.stem in sys.stdlib_module_names):
                continue
            if child.is_dir() and (child / "__init__.py").is_file() and name.isidentifier():
                names.add(name)
            elif (child.suffix == ".py" and child.stem.isidentifier() and child.stem not in
                  _NOT_MODULES and not child.stem.startswith("test") and
                  not child.stem.endswith("_test")):
                names.add(child.stem)
    return sorted(names)[:20]


def package_name(tree: Path) -> str:
    try:
        pkg = json.loads((tree / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    name = pkg.get("name") if isinstance(pkg, dict) else None
    return name if isinstance(name, str) and re.fullmatch(r"[@\w./-]+", name) else ""


def same_as_tree_file(installed: Path, tree: Path) -> bool:
    """Whether an installed module file is a copy of one of the tree's files (by the path
    under ``site-packages``)."""
    parts = installed.parts
    if "site-packages" not in parts:
        return False
    rel = Path(*parts[parts.index("site-packages") + 1:])
    try:
        data = installed.read_bytes()
    except OSError:
        return False
    for base in (tree, tree / "src"):
        with contextlib.suppress(OSError):
            if (base / rel).read_bytes() == data:
                return True
    return False

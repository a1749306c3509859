"""Every module that src/ imports at run time is a declared runtime dependency.

CI also runs the quickstart and every shipped recipe after the plain install; this
test catches the same mistake in a second, inside the dev environment, where the
dev extra would otherwise hide it (jinja2 once came only with torch).
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]


def _normalize(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _optional_nodes(tree: ast.AST) -> set[int]:
    """Imports inside ``try: ... except ImportError`` are optional by design, and so are the
    fallbacks in such a handler (``tomli`` where ``tomllib`` is missing: declared with a marker)."""
    optional: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = [h.type for h in node.handlers if h.type is not None]
        names = {n.id for t in caught for n in ast.walk(t) if isinstance(n, ast.Name)}
        if names & {"ImportError", "ModuleNotFoundError"}:
            guarded = [*node.body, *(stmt for h in node.handlers for stmt in h.body)]
            optional.update(id(n) for stmt in guarded for n in ast.walk(stmt))
    return optional


def _imported_top_modules(path: Path) -> dict[str, int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    optional = _optional_nodes(tree)
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            found.setdefault(name.split(".")[0], node.lineno)
    return found


def test_every_runtime_import_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_normalize(d) for d in project["dependencies"]}
    providers = packages_distributions()
    skip = set(sys.stdlib_module_names) | {"codecorpus", "__future__"}
    undeclared = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for top, line in _imported_top_modules(path).items():
            if top in skip:
                continue
            dists = {_normalize(d) for d in providers.get(top, [])}
            if not dists & declared:
                undeclared.append(f"{path.relative_to(ROOT)}:{line} imports {top} (from {sorted(dists) or 'nothing installed'})")
    assert not undeclared, "declare these in [project].dependencies or guard them:\n" + "\n".join(undeclared)


def test_optional_imports_are_recognised(tmp_path):
    """The guard this test relies on: a try/except ImportError import is optional, a bare one is not."""
    module = tmp_path / "m.py"
    module.write_text("import yaml\ntry:\n    import torch\nexcept ImportError:\n    torch = None\n")
    assert set(_imported_top_modules(module)) == {"yaml"}


def _runtime_closure() -> set[str]:
    """Distributions that `pip install -e .` brings: codecorpus's requirements, recursively,
    without extras and without requirements whose environment marker is false here."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = ["codecorpus"]
    while todo:
        name = todo.pop()
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:
            continue
        for text in reqs:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            dist = _normalize(req.name)
            if dist not in seen:
                seen.add(dist)
                todo.append(dist)
    return seen


def test_shipped_recipes_name_only_what_the_plain_install_brings():
    import yaml

    closure = _runtime_closure()
    assert "jinja2" in closure and "ray" in closure
    wrong = []
    for recipe in sorted((ROOT / "pipelines").glob("*.yaml")):
        data = yaml.safe_load(recipe.read_text())
        for i, src in enumerate(data.get("sources") or []):
            if src.get("type") != "python-env":
                continue
            for dist in src.get("distributions") or []:
                if _normalize(dist) not in closure:
                    wrong.append(f"{recipe.name}: sources.{i}.distributions names {dist}")
    assert not wrong, "a fresh `pip install -e .` does not bring these:\n" + "\n".join(wrong)

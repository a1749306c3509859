"""The package's import graph: no circles, ray only in runtime/, a storage floor below the parts.

Every import counts, including those inside functions: a lazy import that closes a
circle still is one (it only moves the failure from import time to run time). A
graph over the source (not over what happens to be imported) sees all of them, and
a fresh interpreter per top-level part imports it on its own.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "codecorpus"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Nodes under ``if TYPE_CHECKING:``: annotations only, never executed."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(path: Path) -> set[str]:
    """Every codecorpus module ``path`` imports when it runs, in functions too.

    ``from a import b`` counts ``a.b`` when that is a module, else ``a``; a parent
    package runs first anyway, so it is no edge of its own.
    """
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & set(MODULES)
            found.update(subs)
            if len(subs) < len(node.names):
                found.add(node.module)
    return found


GRAPH = {m: {d for d in imports_of(p) if d in MODULES and d != m} for m, p in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert cycles(GRAPH) == []


def test_the_check_sees_a_circle_hidden_in_a_function(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    import a\n")
    graph = {"a": imports_of(tmp_path / "a.py"), "b": imports_of(tmp_path / "b.py")}
    assert cycles(graph) == [["a", "b"]]


def test_only_runtime_imports_ray():
    users = sorted(m for m, p in MODULES.items() if any(i == "ray" or i.startswith("ray.") for i in imports_of(p)))
    assert users and all(m.startswith("codecorpus.runtime") for m in users), users


def test_storage_and_the_parts_never_reach_into_the_runtime():
    for module, deps in GRAPH.items():
        if module.startswith(("codecorpus.runtime", "codecorpus.cli")):
            continue
        assert not {d for d in deps if d.startswith("codecorpus.runtime")}, module
    storage = {d for m, deps in GRAPH.items() if m.startswith("codecorpus.storage") for d in deps}
    assert storage <= {m for m in MODULES if m.startswith("codecorpus.storage")} | {"codecorpus.schema", "codecorpus"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if (m.count(".") == 1 or m.endswith(".spec")) and not m.endswith("__main__")))
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]

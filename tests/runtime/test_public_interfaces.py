"""Ray, pyarrow and the interpreter through their documented interfaces only, and the runtime's
modules through each other's public names: read from the source, every module of the package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "codecorpus"
LIBRARIES = ("ray", "pyarrow", "sys", "os")
"""The packages whose private names no module may touch."""
PROCESS_WIDE = {("sys", "setswitchinterval")}
"""Public, but the process's own to set: a library changing it changes its caller's threads."""


def _library_aliases(tree: ast.AST) -> dict[str, str]:
    """The names under which a module imports one of ``LIBRARIES`` (``pa`` -> ``pyarrow``)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.partition(".")[0]
                if root in LIBRARIES:
                    aliases[(alias.asname or root)] = root
    return aliases


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def library_private_uses(source: str) -> list[str]:
    """Every private name of ``LIBRARIES`` a module's source imports, reads or passes.

    >>> library_private_uses("import ray\\nray._private.worker._global_node")
    ['ray._private']
    >>> library_private_uses("import pyarrow as pa\\nfrom ray import _raylet\\npa.lib._pandas_api.pd")
    ['from ray import _raylet', 'pyarrow.lib._pandas_api']
    >>> library_private_uses("import ray\\nray.init(_node_ip_address='127.0.0.1')\\nray.get([])")
    ['ray.init(_node_ip_address=...)']
    """
    tree = ast.parse(source)
    aliases = _library_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.partition(".")[0] in LIBRARIES:
            names = [node.module, *(a.name for a in node.names)]
            if any(_private(part) for name in names for part in name.split(".")):
                found.append(f"from {node.module} import {', '.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names
                         if a.name.partition(".")[0] in LIBRARIES and any(map(_private, a.name.split("."))))
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted and dotted[0] in aliases:
                path = [aliases[dotted[0]], *dotted[1:]]
                if any(map(_private, path[1:])):
                    cut = next(i for i, part in enumerate(path) if i and _private(part))
                    found.append(".".join(path[: cut + 1]))
                elif tuple(path[:2]) in PROCESS_WIDE:
                    found.append(".".join(path[:2]))
        if isinstance(node, ast.Call):
            dotted = _dotted(node.func)
            if dotted and dotted[0] in aliases:
                found.extend(f"{'.'.join([aliases[dotted[0]], *dotted[1:]])}({k.arg}=...)"
                             for k in node.keywords if k.arg and _private(k.arg))
    return sorted(set(found))


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_touches_a_private_name_of_ray_pyarrow_or_the_interpreter(path: Path):
    assert library_private_uses(path.read_text()) == []


def test_the_check_finds_what_the_runtime_used_to_touch():
    old = (
        "import sys\nimport ray\nimport pyarrow as pa\nfrom ray._private import node as ray_node\n"
        "node = ray._private.worker._global_node\nsys.setswitchinterval(0.001)\npa.lib._pandas_api.pd\n"
    )
    assert library_private_uses(old) == [
        "from ray._private import node", "pyarrow.lib._pandas_api", "ray._private", "sys.setswitchinterval",
    ]


def private_reads(source: str) -> list[str]:
    """Every private attribute a module reads of an object other than its own (``self._x`` and
    ``cls._x`` are its own).

    >>> private_reads("import x\\nclass A:\\n    def f(self):\\n        return self._a, x._b")
    ['x._b (line 4)']
    """
    return [f"{ast.unparse(node)} (line {node.lineno})" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and _private(node.attr)
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_reads_a_private_attribute_of_another_object(path: Path):
    """A module reads its own private state only (``self._x``): the stage run reads the executor's
    public ``hashes`` and ``shards``, not its internals; a part calls another module's public
    functions (environment discovery's ``skipped_path``, not ``_skipped``)."""
    assert private_reads(path.read_text()) == []

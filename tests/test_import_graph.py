"""The package's import graph: layers, no circles, ray only in runtime/.

The layers, from the bottom (``LAYERS``): storage (atomic writes, Parquet, the S3 mirror);
the floor (formats in ``schema.py``, config base, the stage contract: ``StageSpec``, ``Job``,
the job bodies every kind shares, a user's stage); the parts (one folder per part: its
stages, configs and job bodies); the assembly (the pipeline lists, the recipe composed from
them, preflight, the report); the runtime (Ray); the CLI. A module imports from its own
layer or the ones below, never from one above.

Every import counts, including those inside functions: a lazy import that closes a
circle still is one (it only moves the failure from import time to run time). A
graph over the source (not over what happens to be imported) sees all of them, and
a fresh interpreter per top-level part imports it on its own.
"""

from __future__ import annotations

import ast
import re
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
    return _imported(ast.walk(tree), _type_checking_nodes(tree))


def _imported(nodes, skip: set[int]) -> set[str]:
    """The modules the import statements among ``nodes`` name (see ``imports_of``)."""
    found: set[str] = set()
    for node in nodes:
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


LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("storage", ("codecorpus.storage",)),
    ("floor", ("codecorpus", "codecorpus.schema", "codecorpus.model", "codecorpus.recipe_file", "codecorpus.stage",
               "codecorpus.pipeline", "codecorpus.pipeline.spec", "codecorpus.pipeline.bodies",
               "codecorpus.pipeline.config", "codecorpus.pipeline.user", "codecorpus.pipeline.datatrove")),
    ("parts", tuple(f"codecorpus.{part}" for part in (
        "ingest", "langid", "filters", "dedup", "mixing", "tokenize", "packing", "sft", "tasks", "envs", "manifests"))),
    ("assembly", ("codecorpus.pipeline.pipelines", "codecorpus.config", "codecorpus.preflight", "codecorpus.reports")),
    ("runtime", ("codecorpus.runtime",)),
    ("cli", ("codecorpus.cli", "codecorpus.__main__")),
)


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the longest prefix that names ``module`` or a package of it."""
    best, best_len = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a lower layer to a higher one, as ``a (layer) -> b (layer)``."""
    return sorted(
        f"{m} ({LAYERS[layer_of(m)][0]}) -> {d} ({LAYERS[layer_of(d)][0]})"
        for m, deps in graph.items() for d in deps if layer_of(d) > layer_of(m)
    )


def test_every_module_has_a_layer():
    assert [m for m in MODULES if layer_of(m) < 0] == []


def test_no_import_goes_up_a_layer():
    assert upward_imports(GRAPH) == []


def test_the_layer_check_sees_a_part_importing_the_recipe():
    graph = {"codecorpus.dedup.near": {"codecorpus.config", "codecorpus.schema"}, "codecorpus.config": set()}
    assert upward_imports(graph) == ["codecorpus.dedup.near (parts) -> codecorpus.config (assembly)"]
    assert layer_of("codecorpus.configuration") == layer_of("codecorpus")  # a prefix is a whole name


SPEC_MODULES = sorted(m for m, p in MODULES.items() if re.search(r"^[A-Z_]+ = StageSpec\(", p.read_text(), re.M))
"""The modules that declare a part's stages (``dedup/spec.py``, ``envs/spec.py`` ...)."""


def top_level_imports(path: Path) -> set[str]:
    """The codecorpus modules ``path`` imports when it is imported (not inside functions)."""
    tree = ast.parse(path.read_text())
    return {m for m in _imported(tree.body, _type_checking_nodes(tree)) if m in MODULES}


def test_spec_modules_import_job_bodies_inside_functions():
    """A recipe's load imports every spec module (the stage registry is the pipeline lists): at
    the top level a spec imports the floor, configs and other specs, never a stage's job body."""
    floor = {m for m in MODULES if layer_of(m) <= layer_of("codecorpus.pipeline.spec")}
    bodies = {
        spec: sorted(d for d in top_level_imports(MODULES[spec])
                     if d not in floor and not d.endswith((".config", ".spec")) and d not in SPEC_MODULES)
        for spec in SPEC_MODULES
    }
    assert {spec: found for spec, found in bodies.items() if found} == {}


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
    assert storage <= {m for m in MODULES if m.startswith("codecorpus.storage")} | {"codecorpus"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if (m.count(".") == 1 or m.endswith(".spec")) and not m.endswith("__main__")))
def test_each_module_imports_first_in_a_fresh_interpreter(module):
    proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]

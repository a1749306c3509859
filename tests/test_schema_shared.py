"""``schema.py`` holds the formats parts share, and no part's own (issue 39, item 4).

For every public name of ``codecorpus/schema.py`` the check finds the parts whose source uses
it (``schema.NAME`` or ``from codecorpus.schema import NAME``); a top-level package or module
under ``src/codecorpus`` is one part. A name stays in ``schema.py`` when two parts or more use
it, when the floor does (``pipeline/``, ``runtime/``, ``storage/``, ``stage.py``, ``model.py``),
or when another definition in ``schema.py`` needs it (``RunPaths.task_file`` needs
``TASKS_DIR``). Naming a column in ``STAGE_COLUMNS`` is no use of it: that table holds the types
of the shared columns, and a part's own columns have the part's own table
(``filters/columns.py``, ``sft/columns.py``, ``tasks/columns.py``). A name one part alone uses
belongs in that part.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "codecorpus"

FLOOR = frozenset({"schema", "pipeline", "runtime", "storage", "stage", "model"})
"""Parts below every other: a name they use is everyone's."""

REGISTRY = "STAGE_COLUMNS"

OUTPUT_CONTRACT = frozenset({
    # the token shard files: what Megatron-Core, the trainer's loader and ``manifest verify``
    # read; only manifests/ spells them today, but they are the run's contract with its readers
    "SHARD_FILE_SUFFIXES", "MEGATRON_SEQUENCES_FILE", "LOSS_MASK_DTYPE", "MEGATRON_INDEX_HEADER",
    "MEGATRON_INDEX_VERSION", "MEGATRON_DTYPE_CODES", "MEGATRON_UINT16_VOCAB_LIMIT",
    # the manifest kinds a launcher dispatches on
    "SET_MANIFEST_KIND", "RUN_MANIFEST_KIND", "RL_MANIFEST_KIND",
    # the values of the document row's ``kind`` (langid assigns them; the row is everyone's)
    "KINDS",
})
"""Names kept in ``schema.py`` though one part uses them: the formats a run hands to programs
outside codecorpus, and the document row."""


def public_names(tree: ast.Module) -> list[str]:
    """The names a module defines at its top level (assignments, functions, classes), not the
    ones it imports, without a leading underscore."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
    return [n for n in names if not n.startswith("_")]


def _defines(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return {node.name}
    return set()


def _schema_names_used(tree: ast.AST) -> set[str]:
    """The schema names a module uses: ``schema.NAME`` and ``from codecorpus.schema import NAME``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "schema":
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "codecorpus.schema":
            found.update(a.name for a in node.names)
    return found


def users(package: Path) -> dict[str, set[str]]:
    """{public name of ``package/schema.py``: the parts that use it}; ``schema`` itself is a
    user of a name another of its definitions (``STAGE_COLUMNS`` aside) needs."""
    schema_path = package / "schema.py"
    tree = ast.parse(schema_path.read_text())
    found: dict[str, set[str]] = {name: set() for name in public_names(tree)}
    for node in tree.body:
        defined = _defines(node)
        if REGISTRY in defined:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id in found and sub.id not in defined:
                found[sub.id].add("schema")
    for path in sorted(package.rglob("*.py")):
        if path == schema_path:
            continue
        rel = path.relative_to(package).parts
        part = rel[0] if len(rel) > 1 else path.stem
        for name in _schema_names_used(ast.parse(path.read_text())) & found.keys():
            found[name].add(part)
    return found


def one_part_names(package: Path) -> dict[str, str]:
    """{name: its one part} for the names of ``schema.py`` one part alone uses."""
    return {name: next(iter(parts)) for name, parts in users(package).items()
            if len(parts) == 1 and not parts & FLOOR}


def test_schema_holds_no_format_of_one_part_alone():
    found = one_part_names(PACKAGE)
    assert {n: p for n, p in found.items() if n not in OUTPUT_CONTRACT} == {}


def test_every_exception_is_still_needed():
    """An exception that no longer applies (the name moved, or a second part uses it) goes."""
    found = one_part_names(PACKAGE)
    assert sorted(OUTPUT_CONTRACT - found.keys()) == []


def test_the_check_sees_a_one_part_name(tmp_path):
    (tmp_path / "schema.py").write_text(
        'ID = "id"\nOWN = "own"\nDIR = "d"\nNEEDED = DIR + "/x"\nCOL = "c"\nSTAGE_COLUMNS = {COL: int, OWN: int}\n'
    )
    (tmp_path / "filters").mkdir()
    (tmp_path / "filters" / "stage.py").write_text(
        "from codecorpus import schema\nx = (schema.ID, schema.OWN, schema.NEEDED, schema.COL)\n"
    )
    (tmp_path / "dedup").mkdir()
    (tmp_path / "dedup" / "near.py").write_text("from codecorpus.schema import ID\n")
    (tmp_path / "stage.py").write_text("from codecorpus import schema\nT = schema.STAGE_COLUMNS\n")
    assert one_part_names(tmp_path) == {"OWN": "filters", "NEEDED": "filters", "COL": "filters"}

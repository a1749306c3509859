"""A user's own stage from the recipe, as a stage spec under the built-in stages' contract.

The contract is Arrow-native:

- an annotator is ``fn(table: pyarrow.Table, **config) -> dict[str, pyarrow.Array]``: new
  columns, one value per row (it cannot drop rows, nor replace a column);
- a filter is ``fn(table: pyarrow.Table, **config) -> pyarrow.Array`` of drop reasons:
  a string drops the row with that reason, null keeps it.

``use: "datatrove.pipeline.filters:GopherRepetitionFilter"`` (any datatrove ``BaseFilter``)
is a filter too: the class is built with ``config`` as keyword arguments and runs on the
rows (``pipeline/datatrove.py``).

The function runs inside ordinary map tasks, so conservation, drop logs, markers,
resume and the report work as for any stage. Its hash holds ``use``, ``kind``,
``config`` and the source of the module that defines the function, so changed code
redoes the stage. ``check_user_stage`` fails before any work on a ``use:`` that cannot
import, a wrong signature, or (on a small probe table) an annotator that drops rows or
a filter that returns no reasons.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from codecorpus import schema
from codecorpus.model import RecipeError
from codecorpus.pipeline.config import UserStageConfig
from codecorpus.pipeline.spec import StageRun, StageSpec
from codecorpus.stage import MapResult, apply_reasons


class UserStageError(RuntimeError):
    """A user stage broke its contract on real data (a bug in the stage, named in the message)."""


def resolve(name: str, cfg: UserStageConfig) -> Any:
    """The object ``use:`` names; a RecipeError saying what to fix when it cannot be imported."""
    module_name, _, attr = cfg.use.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        hint = " (pip install 'codecorpus[datatrove]')" if module_name.startswith("datatrove") else ""
        raise RecipeError(
            f"stages.{name}.use: cannot import module {module_name!r}: {err}{hint}. Install it, or put its "
            "folder on PYTHONPATH for the driver and every Ray worker"
        ) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise RecipeError(f"stages.{name}.use: module {module_name} has no {attr!r}: name a function in it") from None


def _is_datatrove_filter(obj: Any) -> bool:
    if not inspect.isclass(obj):
        return False
    try:
        from datatrove.pipeline.filters.base_filter import BaseFilter
    except ImportError:
        return False
    return issubclass(obj, BaseFilter)


def source_digest(obj: Any) -> str:
    """sha256 of the source file that defines ``obj`` (and so of the code the stage runs)."""
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        path = None
    if path is None:
        return "no-source"
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _probe_table() -> pa.Table:
    """Two small document rows with the document columns, for the contract check."""
    texts = ['def add(a, b):\n    """Add two numbers."""\n    return a + b\n', "# Demo\n\nA tiny readme.\n"]
    paths = ["src/add.py", "README.md"]
    rows = {
        schema.ID: [schema.document_id("probe", "probe/repo", p, "HEAD") for p in paths],
        schema.SOURCE: ["probe"] * 2, schema.REPO: ["probe/repo"] * 2, schema.PATH: paths,
        schema.REVISION: ["HEAD"] * 2, schema.LICENSE: ["MIT"] * 2, schema.LANG: ["Python", "Markdown"],
        schema.KIND: ["code", "docs"], schema.TEXT: texts, schema.BYTES: [len(t.encode()) for t in texts],
        schema.CONTENT_HASH: [schema.content_hash(t.encode()) for t in texts], schema.ENCODING: ["utf-8"] * 2,
    }
    return pa.table({f.name: pa.array(rows[f.name], f.type) for f in schema.DOC_SCHEMA})


def check_user_stage(name: str, cfg: UserStageConfig) -> None:
    """Fail before any work when ``use:`` cannot run as this ``kind``: import, signature, probe."""
    obj = resolve(name, cfg)
    if _is_datatrove_filter(obj):
        if cfg.kind != "filter":
            raise RecipeError(f"stages.{name}: {cfg.use} is a datatrove filter: set kind: filter")
        from codecorpus.pipeline import datatrove

        try:  # datatrove imports its optional dependencies (word tokenizers ...) on first use
            datatrove.run_filter(_probe_table(), name, obj, cfg.config)
        except ImportError as err:
            raise RecipeError(f"stages.{name}: {cfg.use} cannot run here: {err}") from None
        return
    if not callable(obj):
        raise RecipeError(f"stages.{name}.use: {cfg.use} is not a function: name fn(table, **config)")
    try:
        inspect.signature(obj).bind(_probe_table(), **cfg.config)
    except TypeError as err:
        raise RecipeError(
            f"stages.{name}: {cfg.use} cannot be called as fn(table, **config) with config keys "
            f"{sorted(cfg.config)}: {err}. Its signature: {cfg.use}{inspect.signature(obj)}"
        ) from None
    except ValueError:  # a builtin without a signature: the probe below still checks it
        pass
    probe = _probe_table()
    try:
        out = obj(probe, **cfg.config)
    except Exception:
        return
    try:
        _check_output(name, cfg, probe, out)
    except UserStageError as err:
        raise RecipeError(f"{err} (on a two-row probe table, before any work)") from None


def _check_output(name: str, cfg: UserStageConfig, table: pa.Table, out: Any) -> None:
    n = table.num_rows
    if cfg.kind == "annotator":
        if not isinstance(out, dict) or not all(isinstance(v, pa.Array | pa.ChunkedArray) for v in out.values()):
            raise UserStageError(
                f"stages.{name}: annotator {cfg.use} must return dict[str, pyarrow.Array] (new columns), "
                f"got {type(out).__name__}"
            )
        for col, arr in out.items():
            if len(arr) != n:
                raise UserStageError(
                    f"stages.{name}: annotator {cfg.use} returned {len(arr)} values for column {col!r} of a "
                    f"{n}-row table: an annotator keeps every row (make it a kind: filter to drop rows)"
                )
            if col in table.column_names:
                raise UserStageError(f"stages.{name}: annotator {cfg.use} returned column {col!r}, which exists")
        return
    if not isinstance(out, pa.Array | pa.ChunkedArray) or not (
        pa.types.is_string(out.type) or pa.types.is_large_string(out.type) or pa.types.is_null(out.type)
    ):
        got = f"an array of {out.type}" if isinstance(out, pa.Array | pa.ChunkedArray) else type(out).__name__
        raise UserStageError(
            f"stages.{name}: filter {cfg.use} must return a pyarrow string array of drop reasons "
            f"(null keeps the row), got {got}: a filter gives every dropped row a reason"
        )
    if len(out) != n:
        raise UserStageError(f"stages.{name}: filter {cfg.use} returned {len(out)} reasons for {n} rows")
    if n and pc.any(pc.equal(out.cast(pa.string()), "")).as_py():
        raise UserStageError(
            f"stages.{name}: filter {cfg.use} returned an empty reason: give every dropped row a reason "
            "string (null keeps the row)"
        )


def run_user_stage(table: pa.Table, *, name: str, cfg: UserStageConfig) -> MapResult:
    """One shard through a user function, checked against the contract; the map job body."""
    obj = resolve(name, cfg)
    if _is_datatrove_filter(obj):
        from codecorpus.pipeline import datatrove

        return datatrove.run_filter(table, name, obj, cfg.config)
    out = obj(table, **cfg.config)
    _check_output(name, cfg, table, out)
    if cfg.kind == "annotator":
        for col, arr in out.items():
            table = table.append_column(col, arr)
        return MapResult(table)
    return apply_reasons(table, out, name)


def user_spec(name: str, cfg: UserStageConfig) -> StageSpec:
    """The stage spec of ``stages.<name>: {use: ...}``."""

    def map_fn(run: StageRun) -> Callable[[pa.Table], MapResult]:
        return functools.partial(run_user_stage, name=name, cfg=cfg)

    def hash_parts(recipe: Any) -> list[Any]:
        obj = resolve(name, cfg)
        named = importlib.import_module(cfg.use.partition(":")[0])
        return [source_digest(named), source_digest(obj)]

    def config(recipe: Any, stage: str) -> UserStageConfig:
        return cfg

    return StageSpec(
        name, cfg.kind, UserStageConfig, map_fn=map_fn, hash_parts=hash_parts, config=config,
        check=lambda recipe: check_user_stage(name, cfg),
    )

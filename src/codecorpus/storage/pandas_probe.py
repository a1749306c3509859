"""pyarrow's conversions without its implicit import of pandas.

Where pandas is installed, pyarrow imports it at a process's first conversion of Python
or numpy data (``pa.array``, ``pa.Table.from_pylist``, ``pa.table`` of a dict): its
pandas shim and its C++ sequence converter each look for pandas, to recognise pandas
objects among the values. That import costs 0.37 s of CPU here, in every worker's first
task and in the driver's report, and codecorpus converts no pandas object.

:func:`answer_pandas_probe` makes that first conversion with pandas hidden, so both of
pyarrow's probes record pandas as absent, and neither looks again (pyarrow 26 keeps the
answer for the life of the process). Whoever imports pandas after that (a user's stage, a
datatrove filter) re-arms pyarrow's pandas support as soon as the import completes, so
``pa.array(series)`` and ``pa.table(df)`` then convert exactly as pyarrow's own would. A
process that has already imported pandas is left as it is.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import sys
import threading
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import pyarrow as pa

PANDAS = "pandas"

_lock = threading.Lock()
_answered = False


def answer_pandas_probe() -> None:
    """Settle pyarrow's pandas probe in this process without importing pandas (once; cheap after)."""
    global _answered
    if _answered:
        return
    with _lock:
        if _answered or PANDAS in sys.modules:
            _answered = True
            return
        hide = _HidePandas()
        sys.meta_path.insert(0, hide)
        try:
            pa.array([0])  # the first conversion: the shim's probe and the C++ converter's
        finally:
            sys.meta_path.remove(hide)
        sys.meta_path.insert(0, _RearmOnImport())
        _answered = True


class _HidePandas(importlib.abc.MetaPathFinder):
    """Answers ``import pandas`` (and its submodules) with ModuleNotFoundError, while installed."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name == PANDAS or name.startswith(PANDAS + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class _RearmOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it finds pandas through the other finders and has its loader, once
    pandas has executed, tell pyarrow that pandas is there (then leaves ``sys.meta_path``)."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name != PANDAS:
            return None
        spec = next((found for finder in list(sys.meta_path) if finder is not self
                     and (found := _find(finder, name, path, target)) is not None), None)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_rearm(module: ModuleType) -> None:
            exec_module(module)
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
            _rearm_pyarrow()

        spec.loader.exec_module = exec_then_rearm  # type: ignore[method-assign]  # this spec's loader only
        return spec


def _find(finder: object, name: str, path: Sequence[str] | None,
          target: ModuleType | None) -> ModuleSpec | None:
    find_spec = getattr(finder, "find_spec", None)
    return find_spec(name, path, target) if find_spec is not None else None


def _rearm_pyarrow() -> None:
    """pyarrow's shim imports pandas again when asked for it (``_check_import(raise_=True)``):
    after that its pandas support is on, as if its first probe had found pandas."""
    with contextlib.suppress(ImportError):
        pa.lib._pandas_api.pd  # noqa: B018  # the property's access is the re-arm

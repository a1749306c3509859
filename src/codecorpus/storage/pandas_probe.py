"""pyarrow's conversions without its implicit import of pandas, in processes that own their pandas use.

Where pandas is installed, pyarrow imports it at a process's first conversion of Python
or numpy data (``pa.array``, ``pa.Table.from_pylist``, ``pa.table`` of a dict): its
pandas shim and its C++ sequence converter each look for pandas, to recognise pandas
objects among the values. That import costs 0.37 s of CPU here, in every worker's first
task and in the driver's report, and codecorpus converts no pandas object.

:func:`answer_pandas_probe` makes that first conversion with pandas hidden from the
calling thread, so both probes record pandas as absent and do not look again (pyarrow 26).
The C++ converter's answer is final: after it, pandas scalars inside Python or object data
(``pd.NA``, ``NaT``, nanosecond ``Timestamp``) are not recognised even once pandas is
imported. So only a process that runs no one else's code may answer: the ``codecorpus``
command, for a recipe of codecorpus's own stages alone (``runtime/launch.py``), and for its
report. If something imports pandas after all, the shim's answer is turned back on as that
import completes, so a Series or DataFrame still converts through pyarrow's pandas path.
A process that has already imported pandas is left as it is.
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
import threading
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

import pyarrow as pa

PANDAS = "pandas"

_log = logging.getLogger(__name__)
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
        hide = _HidePandas(threading.get_ident())
        sys.meta_path.insert(0, hide)
        try:
            pa.array([0])  # the first conversion: the shim's probe and the C++ converter's
        finally:
            sys.meta_path.remove(hide)
        sys.meta_path.insert(0, _RearmOnImport())
        _answered = True


class _HidePandas(importlib.abc.MetaPathFinder):
    """Answers ``import pandas`` (and its submodules) with ModuleNotFoundError in one thread;
    another thread importing pandas meanwhile finds it as usual."""

    def __init__(self, thread: int):
        self.thread = thread

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if threading.get_ident() == self.thread and (name == PANDAS or name.startswith(PANDAS + ".")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


class _RearmOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it finds pandas through the other finders and hands out its spec
    with a loader that, once pandas has executed, turns pyarrow's pandas shim back on."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name != PANDAS:
            return None
        spec = next((found for finder in list(sys.meta_path) if finder is not self
                     and (found := _find(finder, name, path, target)) is not None), None)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Rearming(spec.loader, self)  # this spec's own: a shared loader is not touched
        return spec


class _Rearming(importlib.abc.Loader):
    """pandas's own loader, and after it has executed pandas, the re-arm of pyarrow's shim."""

    def __init__(self, loader: Any, finder: _RearmOnImport):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        if self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        _rearm_pyarrow()

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package ...: pandas's loader's
        return getattr(self.loader, name)


def _find(finder: object, name: str, path: Sequence[str] | None,
          target: ModuleType | None) -> ModuleSpec | None:
    find_spec = getattr(finder, "find_spec", None)
    return find_spec(name, path, target) if find_spec is not None else None


def _rearm_pyarrow() -> None:
    """pyarrow's shim imports pandas again when asked for it (``_check_import(raise_=True)``):
    after that its pandas support is on, as if its first probe had found pandas."""
    try:
        pa.lib._pandas_api.pd  # noqa: B018  # the property's access is the re-arm
    except Exception as err:  # pandas imported; pyarrow's compatibility layer did not: say so, go on
        _log.warning("pyarrow's pandas support stays off in this process: %s: %s", type(err).__name__, err)

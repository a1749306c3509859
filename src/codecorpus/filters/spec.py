"""The filters stage: heuristics, decontamination and redaction, a map filter."""

from __future__ import annotations

import functools
from typing import Any

from codecorpus.filters.config import FiltersConfig
from codecorpus.pipeline.spec import StageRun, StageSpec

TASK_MODULES = ("codecorpus.filters.stage", "codecorpus.filters.decontam")
"""Imported when the stage runs, not when it is declared (``StageSpec.modules``)."""


def with_driver_index(run_fn: Any) -> Any:
    """A map function factory for a stage that decontaminates: the benchmark n-gram index is
    built once, on the driver, and shipped to every task inside the stage function."""

    def make(run: StageRun) -> functools.partial:
        from codecorpus.filters import decontam

        return functools.partial(run_fn, cfg=run.cfg, index=decontam.driver_index(run.cfg.decontam))

    return make


def prefetch_index(stage: str) -> Any:
    """The ``prefetch`` of a stage that decontaminates: the benchmark index ``with_driver_index``
    ships, built into the driver's cache."""

    def prefetch(recipe: Any) -> None:
        from codecorpus.filters import decontam

        decontam.driver_index(getattr(recipe.stages, stage).decontam)

    return prefetch


def benchmark_parts(recipe: Any) -> list[Any]:
    """The benchmark files' bytes: a changed benchmark redoes decontamination."""
    cfg = recipe.stages.filters.decontam
    if cfg is None:
        return []
    from codecorpus.filters import decontam

    return [decontam.benchmark_fingerprint(cfg)]


def filters_fn(run: StageRun) -> functools.partial:
    from codecorpus.filters import stage

    return with_driver_index(stage.run)(run)


FILTERS = StageSpec("filters", "filter", FiltersConfig, map_fn=filters_fn, hash_parts=benchmark_parts,
                    config_paths=("decontam.files.*.path",),
                    prefetch=prefetch_index("filters"), modules=TASK_MODULES)

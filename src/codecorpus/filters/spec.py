"""The filters stage: heuristics, decontamination and redaction, a map filter."""

from __future__ import annotations

import functools
from typing import Any

from codecorpus.filters.config import FiltersConfig
from codecorpus.pipeline.spec import StageRun, StageSpec


def with_driver_index(run_fn: Any) -> Any:
    """A map function factory for a stage that decontaminates: the benchmark n-gram index is
    built once, on the driver, and shipped to every job inside the stage function."""

    def make(run: StageRun) -> functools.partial:
        from codecorpus.filters import decontam

        return functools.partial(run_fn, cfg=run.cfg, index=decontam.driver_index(run.cfg.decontam))

    return make


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
                    config_paths=("decontam.files.*.path",))

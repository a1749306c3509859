"""The langid stage: a map annotator (``lang``, ``kind``, ``lang_method``, ``parse_error_frac``)."""

from __future__ import annotations

import functools

from codecorpus.langid import stage
from codecorpus.langid.config import LangidConfig
from codecorpus.pipeline.spec import StageRun, StageSpec


def langid_fn(run: StageRun) -> functools.partial:
    return functools.partial(stage.run, cfg=run.cfg)


LANGID = StageSpec("langid", "annotator", LangidConfig, map_fn=langid_fn)

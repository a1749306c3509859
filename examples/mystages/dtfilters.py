"""A datatrove filter of a user's own: any ``BaseFilter`` subclass runs as a codecorpus stage.

    stages:
      repeats: {use: "mystages.dtfilters:MaxLineRepeatFilter", kind: filter, after: filters,
                config: {max_repeats: 20}}

codecorpus builds it with ``config`` as keyword arguments and maps rows to datatrove
``Document``s; a ``(False, "repeated_line")`` verdict becomes the drop reason
``MaxLineRepeatFilter:repeated_line``.
"""

from __future__ import annotations

from collections import Counter

from datatrove.data import Document
from datatrove.pipeline.filters.base_filter import BaseFilter


class MaxLineRepeatFilter(BaseFilter):
    """Drop documents in which one non-blank line occurs more than ``max_repeats`` times
    (generated tables, pasted logs)."""

    name = "max line repeats"

    def __init__(self, max_repeats: int = 20, exclusion_writer=None):
        super().__init__(exclusion_writer)
        self.max_repeats = max_repeats

    def filter(self, doc: Document) -> bool | tuple[bool, str]:
        counts = Counter(line.strip() for line in doc.text.splitlines() if line.strip())
        if counts and max(counts.values()) > self.max_repeats:
            return False, "repeated_line"
        return True

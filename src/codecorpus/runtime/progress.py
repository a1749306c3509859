"""What a run shows while it runs: one progress bar per phase, with its throughput.

The scheduler advances a bar as each task finishes; nothing here touches Ray or a run's files.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def phase_bars(console: Console, quiet: bool) -> Progress:
    """The bars of one phase: its label, done/total, throughput, elapsed and remaining time."""
    return Progress(
        TextColumn("[bold]{task.description:<18}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
        console=console, disable=quiet, transient=False,
    )


class Rate:
    """Throughput of one phase's finished tasks (input MB/s and documents/s) since it started."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.bytes = self.docs = 0

    def add(self, stats: dict[str, Any]) -> None:
        self.bytes += int(stats.get("bytes_in", 0) or 0)
        self.docs += int(stats.get("rows_in", stats.get("rows", 0)) or 0)

    def text(self) -> str:
        seconds = max(time.perf_counter() - self.t0, 1e-6)
        parts = [f"{self.bytes / 1e6 / seconds:7.1f} MB/s"] if self.bytes else []
        if self.docs:
            parts.append(f"{self.docs / seconds:8,.0f} docs/s")
        return "  ".join(parts)

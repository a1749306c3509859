"""Peak resident memory of one task, measured inside the worker that runs it.

Ray reuses worker processes, so a process's lifetime peak says nothing about
the task it runs now. Linux lets a process reset its own high-water mark
(``echo 5 > /proc/self/clear_refs``): a task resets it when it starts and reads
``VmHWM`` when it ends, which is that task's peak RSS (at least the worker's
resident size when the task began). Where ``/proc`` is missing or read-only the
figures are absent, never wrong.

The figures go to the stage's ``_stats.json`` (``memory``), next to the
timings: they describe a run, never its outputs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path
from typing import Any

import pyarrow as pa

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(*keys: str) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        text = _STATUS.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in keys:
            out[key] = int(value.split()[0]) * 1024
    return out


def start_job() -> int | None:
    """Reset this process's peak RSS; returns its RSS now (None where it cannot be measured)."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return None
    return _status_bytes("VmRSS").get("VmRSS")


def end_job(rss_before: int | None) -> dict[str, int] | None:
    """``{"rss_before", "peak_rss"}`` of the task since ``start_job`` (None if unmeasured)."""
    if rss_before is None:
        return None
    peak = _status_bytes("VmHWM").get("VmHWM")
    return None if peak is None else {"rss_before": rss_before, "peak_rss": peak}


def _libc_trim():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None


_MALLOC_TRIM = _libc_trim()


def release() -> None:
    """Hand memory a finished task freed back to the OS, so a reused worker does not carry
    the largest task's heap into every later one: glibc's free pages (``malloc_trim``) and
    Arrow's pool. No ``gc.collect()``: a full collection walks every object of every stage's
    modules the worker has loaded, after every task, and a task's data are freed by reference
    counting anyway."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
    pa.default_memory_pool().release_unused()


class StageMemory:
    """The driver's record of one stage: for each step (a phase or the stage's own tasks), the
    task with the largest peak RSS."""

    def __init__(self) -> None:
        self.steps: dict[str, dict[str, Any]] = {}

    def add(self, step: str, task: str, memory: dict[str, int] | None) -> None:
        if memory is None:
            return
        best = self.steps.get(step)
        if best is None or memory["peak_rss"] > best["peak_rss"]:
            self.steps[step] = {**memory, "task": task}

    def summary(self) -> dict[str, Any]:
        """``{"peak_task_rss": bytes, "steps": {step: {...}}}``; empty if nothing was measured
        (every task resumed from its marker)."""
        if not self.steps:
            return {}
        return {
            "peak_task_rss": max(s["peak_rss"] for s in self.steps.values()),
            "steps": dict(sorted(self.steps.items())),
        }

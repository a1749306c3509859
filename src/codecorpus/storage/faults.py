"""Fault injection for the fault-tolerance tests: named checkpoints the runtime passes.

``CODECORPUS_FAULT`` holds comma-separated ``ACTION@POINT`` items; the process
that reaches POINT performs ACTION. Points are passed by the driver
(``after:<stage>:<job>``, once a job's result is in), by workers
(``job:<stage>:<job>``, when a job starts) and by the atomic writer
(``write:<file name>``, after the temporary file is complete and before the
rename). Actions:

- ``kill``: SIGKILL this process (a crash at exactly that point);
- ``raise``: raise ``InjectedFault`` (a deterministic poison shard);
- ``crash-once``: SIGKILL this process the first time only, remembered by a file in
  ``CODECORPUS_FAULT_DIR`` (a worker that dies and then succeeds on retry).

With the variable unset (every real run) a checkpoint is one dict lookup.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

FAULT_ENV = "CODECORPUS_FAULT"
FAULT_DIR_ENV = "CODECORPUS_FAULT_DIR"


class InjectedFault(RuntimeError):
    """Raised at a checkpoint by ``raise@POINT`` (tests only)."""


def checkpoint(point: str) -> None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    for item in spec.split(","):
        action, _, target = item.strip().partition("@")
        if target == point:
            _act(action, point)


def _act(action: str, point: str) -> None:
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "raise":
        raise InjectedFault(f"injected fault at {point}")
    elif action == "crash-once":
        flag = Path(os.environ.get(FAULT_DIR_ENV, ".")) / f"crashed-{point.replace(':', '_')}"
        if not flag.exists():
            flag.write_text("1")
            os.kill(os.getpid(), signal.SIGKILL)

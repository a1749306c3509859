"""The only package that imports ray: the run's start (``launch``), its executor, resume, stats, progress."""

from __future__ import annotations

import os
import sys


def name_local_ray_auth() -> None:
    """Name token authentication for the private local Ray a run starts; call it before Ray is imported.

    Ray 2.59 and later give a new local instance token authentication by default (Ray's docs), with a WARNING
    at every start that suggests opting out. Naming the same mode keeps it and drops the warning.
    Ray reads the variable when it is imported (this package's ``session`` and ``launch`` import
    it), so a process that has imported Ray already (a test calling the CLI) keeps Ray's own
    default. A user's own ``RAY_AUTH_MODE`` wins, and older Rays ignore it.
    """
    if "ray" not in sys.modules:
        os.environ.setdefault("RAY_AUTH_MODE", "token")

"""The codecorpus version a manifest or an export records (the installed distribution's)."""

from __future__ import annotations

import importlib.metadata


def codecorpus_version() -> str:
    try:
        return importlib.metadata.version("codecorpus")
    except importlib.metadata.PackageNotFoundError:
        import codecorpus

        return getattr(codecorpus, "__version__", "0+unknown")

"""The embedded default corpus: real code this Python environment already holds.

The standard library is one repository (``python-stdlib``, revision = the
interpreter version); each named installed distribution is one repository
whose files are those its RECORD lists (revision = its version, license from
its metadata). Nothing is downloaded, and the selection is deterministic: the
recipe names the distributions, or asks for all of them (the scale-up switch).
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import sysconfig
from pathlib import Path

from codecorpus.ingest.config import PythonEnvSource
from codecorpus.ingest.refs import Repository
from codecorpus.model import RecipeError

# Trove classifiers and free-text license fields -> SPDX ids (a later issue reads LICENSE files).
_CLASSIFIER_SPDX = {
    "MIT License": "MIT",
    "Apache Software License": "Apache-2.0",
    "BSD License": "BSD-3-Clause",
    "Python Software Foundation License": "PSF-2.0",
    "ISC License (ISCL)": "ISC",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0",
    "GNU General Public License v3 (GPLv3)": "GPL-3.0",
    "GNU General Public License v2 (GPLv2)": "GPL-2.0",
    "The Unlicense (Unlicense)": "Unlicense",
}


def repositories(src: PythonEnvSource) -> list[Repository]:
    repos = []
    if src.stdlib:
        root = Path(sysconfig.get_paths()["stdlib"])
        # installed packages live under the stdlib folder but are not the standard library
        exclude = ("site-packages", "dist-packages") + (() if src.stdlib_tests else ("test",))
        repos.append(
            Repository(src.name, "python-stdlib", root, platform.python_version(), "PSF-2.0", exclude=exclude)
        )
    for dist in _selected(src):
        name = dist.metadata["Name"]
        files = sorted({str(f) for f in dist.files or () if not str(f).startswith("..")})
        root = Path(str(dist.locate_file("")))
        repos.append(Repository(src.name, name, root, dist.version, distribution_license(dist), tuple(files)))
    return repos


def _selected(src: PythonEnvSource) -> list[md.Distribution]:
    """The distributions the source names (the first of each name on ``sys.path``, as
    ``importlib.metadata`` finds it), or every installed one."""
    if src.all_distributions:
        installed: dict[str, md.Distribution] = {}
        for dist in md.distributions():
            installed.setdefault(_norm(dist.metadata["Name"]), dist)
        return [installed[k] for k in sorted(installed)]
    found: dict[str, md.Distribution] = {}
    missing = []
    for name in src.distributions:  # looked up by name: no other distribution's metadata is read
        try:
            found.setdefault(_norm(name), md.distribution(name))
        except md.PackageNotFoundError:
            missing.append(name)
    if missing:
        raise RecipeError(
            f"sources[{src.name}].distributions: not installed here: {', '.join(missing)}; "
            "install them or remove them from the list"
        )
    return [found[_norm(n)] for n in sorted(src.distributions, key=_norm)]


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def distribution_license(dist: md.Distribution) -> str:
    meta = dist.metadata
    expr = meta.get("License-Expression")
    if expr:
        return expr.strip()
    for classifier in meta.get_all("Classifier") or []:
        if classifier.startswith("License ::"):
            spdx = _CLASSIFIER_SPDX.get(classifier.rsplit(" :: ", 1)[-1])
            if spdx:
                return spdx
    text = (meta.get("License") or "").strip()
    if text and len(text) < 40 and "\n" not in text:
        return text
    return "unknown"

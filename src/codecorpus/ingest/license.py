"""Repository license -> SPDX id, and how it was decided (``license_method``).

Order, first hit wins:

1. ``spdx_tag``: an ``SPDX-License-Identifier:`` line in a license file or README;
2. ``license_file``: the text of ``LICENSE`` / ``LICENCE`` / ``COPYING`` (any suffix)
   matched against the distinctive clauses of each license;
3. ``readme``: the ``License`` section of a README, by the same clauses or by the
   license's name (``MIT License``, ``Apache License 2.0`` ...);
4. ``unknown``.

Matching is by required phrases on whitespace-normalised, lowercased text, in an
order that tests the specific licenses before the ones they contain (AGPL and
LGPL before GPL, BSD-3 before BSD-2). That is what licensee does for its
"exact" matcher in spirit; its Dice-coefficient fuzzy match is the upgrade path
if reworded license files matter. A recipe (or package metadata) can name the
license instead, which wins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

LICENSE_FILE = re.compile(r"^(?:UN)?(?:LICEN[CS]E|COPYING|COPYRIGHT)(?:[-_.].*)?$", re.IGNORECASE)
README_FILE = re.compile(r"^README(?:\..*)?$", re.IGNORECASE)
_SPDX_TAG = re.compile(r"SPDX-License-Identifier:\s*([A-Za-z0-9.+-]+(?:\s+(?:OR|AND|WITH)\s+[A-Za-z0-9.+-]+)*)")
_README_SECTION = re.compile(r"^(?:#+\s*|)licen[cs](?:e|ing)\b.*$", re.IGNORECASE | re.MULTILINE)

# (spdx, phrases that must all occur in the normalised text), most specific first
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("AGPL-3.0", ("gnu affero general public license", "version 3")),
    ("LGPL-2.1", ("gnu lesser general public license", "version 2.1")),
    ("LGPL-2.1", ("gnu library general public license", "version 2")),
    ("LGPL-3.0", ("gnu lesser general public license", "version 3")),
    ("GPL-2.0", ("gnu general public license", "version 2")),
    ("GPL-3.0", ("gnu general public license", "version 3")),
    ("MPL-2.0", ("mozilla public license", "2.0")),
    ("Apache-2.0", ("apache license", "version 2.0")),
    ("Unlicense", ("this is free and unencumbered software released into the public domain",)),
    ("CC0-1.0", ("cc0 1.0 universal",)),
    ("ISC", ("permission to use, copy, modify, and", "distribute this software for any purpose",
             "with or without fee is hereby granted")),
    ("MIT", ("permission is hereby granted, free of charge", "the software is provided \"as is\"")),
    ("BSD-3-Clause", ("redistribution and use in source and binary forms",
                      "neither the name of")),
    ("BSD-3-Clause", ("redistribution and use in source and binary forms",
                      "the names of its contributors may not be used")),
    ("BSD-2-Clause", ("redistribution and use in source and binary forms",)),
)
# license names as READMEs write them
NAMES: tuple[tuple[str, str], ...] = (
    ("AGPL-3.0", r"\bagpl[- ]?v?3|affero general public license"),
    ("LGPL-2.1", r"\blgpl[- ]?v?2\.1"),
    ("LGPL-3.0", r"\blgpl[- ]?v?3"),
    ("GPL-2.0", r"\bgpl[- ]?v?2|gnu general public license,? (?:version |v)2"),
    ("GPL-3.0", r"\bgpl[- ]?v?3|gnu general public license,? (?:version |v)3"),
    ("MPL-2.0", r"\bmpl[- ]?2\.0|mozilla public license,? (?:version )?2\.0"),
    ("Apache-2.0", r"\bapache[- ](?:license,? )?(?:version |v)?2(?:\.0)?\b"),
    ("BSD-3-Clause", r"\bbsd[- ]3[- ]clause|\b3-clause bsd|new bsd license|modified bsd"),
    ("BSD-2-Clause", r"\bbsd[- ]2[- ]clause|\b2-clause bsd|simplified bsd|freebsd license"),
    ("ISC", r"\bisc license\b"),
    ("Unlicense", r"\bthe unlicense\b|\bunlicense\b"),
    ("CC0-1.0", r"\bcc0\b"),
    ("MIT", r"\bmit license\b|\blicensed under (?:the )?mit\b|\bmit licensed\b"),
)
_NAME_PATTERNS = tuple((spdx, re.compile(p)) for spdx, p in NAMES)


def normalise(text: str) -> str:
    """Lowercase, one space between words, straight quotes.

    >>> normalise("  THE SOFTWARE IS PROVIDED \\u201cAS IS\\u201d,\\n  WITHOUT")
    'the software is provided "as is", without'
    """
    text = text.replace("\u201c", '"').replace("\u201d", '"').replace("\u2019", "'")
    return " ".join(text.lower().split())


def match_text(text: str) -> str | None:
    """SPDX id of a full license text, or None.

    >>> match_text("Permission is hereby granted, free of charge, to any person ... "
    ...            'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY')
    'MIT'
    """
    norm = normalise(text)
    for spdx, phrases in RULES:
        if all(p in norm for p in phrases):
            return spdx
    return None


def match_name(text: str) -> str | None:
    """SPDX id named in prose (a README's license section), or None."""
    norm = normalise(text)
    for spdx, pattern in _NAME_PATTERNS:
        if pattern.search(norm):
            return spdx
    return None


def spdx_tag(text: str) -> str | None:
    m = _SPDX_TAG.search(text[:4096])
    return m.group(1).strip() if m else None


def readme_section(text: str) -> str | None:
    """The text under a README's License heading (up to the next heading)."""
    m = _README_SECTION.search(text)
    if not m:
        return None
    rest = text[m.end():]
    nxt = re.search(r"^#+\s|\n[^\n]+\n[=-]{3,}\n", rest, re.MULTILINE)
    return rest[: nxt.start()] if nxt else rest[:2000]


def detect(files: Mapping[str, str]) -> tuple[str, str]:
    """(spdx, method) from a repository's top-level files {name: text}.

    >>> detect({"README.md": "# x\\n\\n## License\\n\\nReleased under the MIT License.\\n"})
    ('MIT', 'readme')
    >>> detect({"main.py": "print(1)"})
    ('unknown', 'unknown')
    """
    licenses = sorted(n for n in files if LICENSE_FILE.match(n))
    readmes = sorted(n for n in files if README_FILE.match(n))
    for name in licenses + readmes:
        tag = spdx_tag(files[name])
        if tag:
            return tag, "spdx_tag"
    for name in licenses:
        spdx = match_text(files[name]) or match_name(files[name][:300])
        if spdx:
            return spdx, "license_file"
    for name in readmes:
        section = readme_section(files[name])
        if section:
            spdx = match_text(section) or match_name(section)
            if spdx:
                return spdx, "readme"
    return "unknown", "unknown"


def is_candidate(name: str) -> bool:
    """A top-level file name the detector reads."""
    return bool(LICENSE_FILE.match(name) or README_FILE.match(name))

"""A recipe's validation errors as the user reads them: one line per problem, ``key.path: what is
wrong (got value)``, under the ``--set`` override that caused it when one did."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import ValidationError

from codecorpus.config.recipe import Source


def format_validation_error(
    err: ValidationError, origin: str, data: Any = None, overrides: dict[tuple[str, ...], str] | None = None
) -> str:
    """One line per real problem: ``key.path: what is wrong (got value)``.

    Key paths index list items (``sources.0.path``) and leave out pydantic's
    internal steps (the discriminator tag of a source, validator names). An
    error that only follows from another one (an empty list once its items
    failed) is not repeated. An error under a ``--set`` override names the
    override, not the recipe file.
    """
    errors = err.errors()
    locs = [_clean_loc(e["loc"], data) for e in errors]
    lines: list[str] = []
    for e, loc in zip(errors, locs, strict=True):
        if e["type"] == "too_short" and any(o[: len(loc)] == loc and len(o) > len(loc) for o in locs):
            continue  # the list is empty only because its items failed: they are reported
        key, msg = _explain(e, loc)
        value = e.get("input")
        shown = "" if isinstance(value, (dict, list, tuple)) or value is None else f" (got {_short(value)})"
        line = f"{key or '<top>'}: {msg}{shown}"
        override = _override_for(loc, overrides or {})
        lines.append(f"--set {override}: {line}" if override else line)
    head = f"invalid recipe {origin}:"
    if overrides and all(line.startswith("--set ") for line in lines):
        head = "invalid --set override:"
    return "\n".join([head, *(f"  {line}" for line in dict.fromkeys(lines))])


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[str, ...]:
    """Drop the parts of a pydantic location that are not keys of the recipe."""
    out: list[str] = []
    node = data
    for part in loc:
        text = str(part)
        if text.startswith(("function-", "tagged-union[", "union[")):
            continue
        if isinstance(node, dict) and isinstance(part, str) and part not in node and node.get("type") == part:
            continue  # the discriminator tag of a source: not a key the user wrote
        out.append(text)
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, (list, tuple)) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            node = None
    return tuple(out)


def _explain(e: dict[str, Any], loc: tuple[str, ...]) -> tuple[str, str]:
    key, kind = ".".join(loc), e["type"]
    if kind == "extra_forbidden":
        return key, "unknown key: remove it or check its spelling against docs/recipes.md"
    if kind == "missing":
        return key, "required key is missing: add it"
    if kind == "union_tag_not_found":
        return f"{key}.type", f"required key is missing: set it to one of {_expected_tags(e)}"
    if kind == "union_tag_invalid":
        return f"{key}.type", f"unknown type {e['ctx'].get('tag')!r}: use one of {_expected_tags(e)}"
    msg = e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return key, msg


def _expected_tags(e: dict[str, Any]) -> str:
    tags = (e.get("ctx") or {}).get("expected_tags")
    return tags.replace("'", "") if tags else ", ".join(source_types())


def source_types() -> list[str]:
    """The ``type:`` values a source may have, in the order of the ``Source`` union."""
    members = typing.get_args(typing.get_args(Source)[0])
    return [tag for m in members for tag in typing.get_args(m.model_fields["type"].annotation)]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _override_for(loc: tuple[str, ...], overrides: dict[tuple[str, ...], str]) -> str | None:
    """The ``--set`` text whose key path is, or contains, ``loc``."""
    for path, text in overrides.items():
        n = min(len(path), len(loc))
        if path[:n] == loc[:n]:
            return text
    return None


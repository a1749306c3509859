"""The proposer interface: who suggests install and test commands when the heuristics cannot.

The built-in proposer is the heuristics (``discover.discover``). A recipe may name its own,
``env_verify.proposer: "pkg.mod:fn"``, asked when the heuristics find nothing or every
candidate fails. It is called as ``fn(request, **proposer_config)`` with a
``ProposerRequest`` (the repository's file listing, its docs, the failure logs so far) and
returns either a list of proposals or ``{"proposals": [...], "messages": [...]}`` (a
model-backed proposer's own chat transcript). A proposal is::

    {"install": ["pip install -e ."], "test": "python -m pytest -rA", "toolchain": "python",
     "parser": "auto"}

Proposals run in the same sandbox as every other candidate. Each exchange is saved as an
OpenAI-chat trace (``{"messages": [...], "metadata": {...}}``, one JSON line), so the SFT
pipeline can read successful ones as auto-install training data.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from codecorpus.envs import discover as disc
from codecorpus.envs import toolchains
from codecorpus.model import RecipeError

MAX_LISTING = 400
MAX_DOC_BYTES = 16_000
DOC_NAMES = ("README", "README.md", "README.rst", "README.txt", "CONTRIBUTING.md", "INSTALL", "INSTALL.md")
PROPOSER_RANK = 3
SYSTEM_PROMPT = (
    "You set up software repositories for testing. Given a repository's file listing, its docs "
    "and the logs of the commands that failed, answer with JSON: a list of "
    '{"install": [commands], "test": command, "toolchain": name, "parser": name}.'
)


@dataclass(frozen=True)
class ProposerRequest:
    """What a proposer sees of one repository version."""

    repo: str
    revision: str
    listing: tuple[str, ...]
    docs: dict[str, str]
    failures: tuple[dict[str, Any], ...]
    """The failed commands: phase, command, exit code, violation and the output's tail."""
    tried: tuple[dict[str, Any], ...]
    """The candidates already tried (commands, toolchain, source)."""


def resolve(use: str) -> Any:
    """The callable ``module:function`` names; a RecipeError saying what to fix otherwise."""
    module_name, _, attr = use.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise RecipeError(
            f"stages.env_verify.proposer: cannot import module {module_name!r}: {err}. Install it, or put "
            "its folder on PYTHONPATH for the driver and every Ray worker"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise RecipeError(f"stages.env_verify.proposer: {module_name} has no function {attr!r}")
    return fn


def request_for(tree: Path, repo: str, revision: str, failures: list[dict[str, Any]],
                tried: list[disc.Candidate]) -> ProposerRequest:
    """The request for the tree at ``tree`` (files are read, nothing is run)."""
    listing = sorted(str(p.relative_to(tree)) for p in tree.rglob("*")
                     if p.is_file() and not disc.skipped_path(p, tree))[:MAX_LISTING]
    docs = {}
    for name in DOC_NAMES:
        path = tree / name
        if path.is_file():
            docs[name] = path.read_bytes()[:MAX_DOC_BYTES].decode("utf-8", "replace")
    tried_rows = tuple({"commands": list(c.commands), "toolchain": c.toolchain, "source": c.source}
                       for c in tried)
    return ProposerRequest(repo, revision, tuple(listing), docs, tuple(failures), tried_rows)


def _user_message(req: ProposerRequest) -> str:
    return json.dumps({"repo": req.repo, "revision": req.revision, "listing": list(req.listing),
                       "docs": req.docs, "failures": list(req.failures), "tried": list(req.tried)},
                      indent=1, sort_keys=True)


def propose(use: str, config: dict[str, Any], req: ProposerRequest, dependency_hash: str,
            ) -> tuple[disc.Discovery | None, list[dict[str, Any]], str | None]:
    """Ask the proposer: its proposals as a Discovery (None when it proposes nothing usable),
    the chat transcript, and why proposals were rejected (None when all were usable)."""
    answer = resolve(use)(req, **config)
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": _user_message(req)}]
    if isinstance(answer, dict):
        proposals = answer.get("proposals") or []
        messages = list(answer.get("messages") or messages)
    else:
        proposals = list(answer or [])
    if not messages or messages[-1].get("role") != "assistant":
        messages.append({"role": "assistant", "content": json.dumps(proposals, sort_keys=True)})
    installs, tests, problems = [], [], []
    source = f"proposer:{use}"
    for i, p in enumerate(proposals):
        chain = p.get("toolchain") if isinstance(p, dict) else None
        test = p.get("test") if isinstance(p, dict) else None
        if chain not in toolchains.CACHEABLE | {"cmake", "make"} or not isinstance(test, str) or not test:
            problems.append(f"proposal {i}: needs a known toolchain and a test command")
            continue
        installs.append(disc.Candidate(tuple(p.get("install") or ()), chain, source, i + 1, PROPOSER_RANK))
        if p.get("parser"):  # the proposer names how to read its command: kept as it is
            tests.append(disc.Candidate((test,), chain, source, i + 1, PROPOSER_RANK,
                                        p["parser"], p.get("reports", "")))
            continue
        found = disc.with_reporter(test)  # its runner told to write a per-test report
        tests.append(disc.Candidate((found.command,), chain, source, i + 1, PROPOSER_RANK,
                                    found.parser, p.get("reports", found.reports)))
    if not tests:
        return None, messages, "; ".join(problems) or "no proposals"
    found = disc.Discovery(tuple(sorted({c.toolchain for c in tests})), tuple(installs), tuple(tests),
                           (), dependency_hash)
    return found, messages, "; ".join(problems) or None


def trace_record(messages: list[dict[str, Any]], repo: str, revision: str, use: str,
                 outcome: str, candidates: disc.Discovery | None) -> dict[str, Any]:
    """One OpenAI-chat trace line: the exchange plus what running its proposals gave."""
    tool = {"role": "user", "content": f"Result of running your commands in the sandbox: {outcome}"}
    return {
        "messages": [*messages, tool],
        "metadata": {"repo": repo, "revision": revision, "proposer": use, "outcome": outcome,
                     "kind": "auto-install",
                     "candidates": [asdict(c) for c in candidates.tests] if candidates else []},
    }

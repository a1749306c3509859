"""Test runners behind wrappers, rewritten to write a per-test report file.

A repository's test command is rarely the runner itself: ``npm test`` runs a script that
runs other scripts (``npm run build && npm run test:unit``), lints first (``xo && ava``),
measures coverage (``nyc mocha``, ``c8 ava``) or sets variables (``cross-env NODE_ENV=test
jest``). Read as a whole, such a command reports only an exit code. This module follows the
script chain (``npm``/``yarn``/``pnpm`` script calls with their ``pre`` scripts, ``run-s``
and ``npm-run-all``), keeps the steps that prepare the tests (builds, compiles), drops the
linters and the coverage wrappers (a lint failure is not a test failure, and a coverage
threshold is not a test), and calls each runner with its file reporter:

======================  ====================================================  =========
runner                  reporter                                              parser
======================  ====================================================  =========
pytest                  ``-rA --junitxml=$R/junit.xml``                       junit
mocha                   ``--reporter xunit --reporter-option output=$R/...``  junit
jest                    ``--json --outputFile=$R/jest.json``                  json
vitest                  ``run --reporter=default --reporter=junit
                        --outputFile=$R/vitest.xml``                          junit
ava                     ``--tap`` (ava writes no report file: TAP on stdout)  tap
node --test             ``--test-reporter=tap --test-reporter-destination=``  tap
                        ``$R/node.tap`` (and ``spec`` to stdout for the log)
tap (node-tap), tape    TAP on stdout (``--reporter=tap``)                    tap
======================  ====================================================  =========

``$R`` is ``"${CODECORPUS_RESULTS:-.codecorpus-reports}"``: the sandbox's empty results
folder of the run when it names one, else a folder in the work tree (``REPORTS_GLOB`` finds
its files there). Everything here reads text; nothing runs repository code.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

RESULTS_VAR = "CODECORPUS_RESULTS"
REPORTS_DIR = ".codecorpus-reports"
RESULTS = f'"${{{RESULTS_VAR}:-{REPORTS_DIR}}}"'
"""The results folder as shell text (one word once expanded)."""
REPORTS_GLOB = f"{REPORTS_DIR}/*"
"""The report files in the work tree when the sandbox names no results folder."""
NODE_BIN = 'export PATH="$PWD/node_modules/.bin:$PATH"'

JS_RUNNERS = ("mocha", "jest", "vitest", "ava", "tap", "tape", "uvu", "node")
LINTERS = frozenset({
    "xo", "eslint", "standard", "semistandard", "prettier", "tsd", "tslint", "biome", "oxlint",
    "dtslint", "attw", "publint", "size-limit", "depcheck", "knip", "markdownlint",
    "type-coverage", "check-dts", "lockfile-lint", "commitlint", "ls-engines", "license-checker",
    "stylelint", "jshint", "jscs", "flow", "dependency-check", "npm-check", "nsp", "oxfmt",
    "dprint", "sort-package-json", "are-the-types-wrong", "tsgo", "vue-tsc", "lint-staged",
})
COVERAGE = frozenset({"nyc", "c8", "istanbul"})
ENV_WRAPPERS = frozenset({"cross-env", "env", "dotenv", "npx", "pnpx", "bunx", "time", "npm",
                          "pnpm", "yarn", "exec"})
"""Words before the program that only set its environment or find its binary (``pnpm
exec vitest``, ``npx mocha``); a script call (``pnpm lint``) is expanded before this."""
_SCRIPT_CALL = re.compile(
    r"^(?:npm|pnpm|yarn)(?:\s+(?:run|run-script))?\s+([\w:.@/-]+)(?:\s+--)?(\s+.*)?$")
_SEPARATORS = re.compile(r"\s*(?:&&|\|\||;)\s*")


@dataclass(frozen=True)
class RunnerCommand:
    """A test command rewritten to report per test."""

    command: str
    parser: str
    runner: str
    reports: str = ""
    """A glob of the report files in the work tree (when no results folder is named)."""


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def script_chain(command: str, scripts: dict[str, str], depth: int = 0) -> list[str]:
    """The simple commands a package script line runs, script calls expanded (with their
    ``pre`` scripts, as npm runs them), in order.

    >>> script_chain("npm test", {"test": "xo && npm run unit", "pretest": "tsc",
    ...                           "unit": "c8 ava"})
    ['tsc', 'xo', 'c8 ava']
    """
    out: list[str] = []
    for segment in _SEPARATORS.split(command.strip()):
        segment = segment.strip().strip("()").strip()
        if not segment:
            continue
        names = _called_scripts(segment, scripts)
        if names is None or depth > 8:
            out.append(segment)
            continue
        for name, extra in names:
            for pre in (f"pre{name}", name):
                if pre in scripts and isinstance(scripts[pre], str):
                    body = scripts[pre] + (extra if pre == name else "")
                    out += script_chain(body, scripts, depth + 1)
    return out


def _called_scripts(segment: str, scripts: dict[str, str]) -> list[tuple[str, str]] | None:
    """The scripts a segment calls (with the arguments passed on), or None when it calls none.
    Wrappers before the call are looked past (``nyc --reporter=text npm test``)."""
    words = _words(segment)
    at = next((i for i, w in enumerate(words) if w in ("npm", "pnpm", "yarn", "run-s",
                                                        "npm-run-all")), 0)
    if at and _program([*words[:at], "mocha"])[0] == at:  # only wrappers before it
        words = words[at:]
        segment = " ".join(words)
    if words[:1] in (["run-s"], ["npm-run-all"]) and all(
            w in scripts or w.startswith("-") for w in words[1:]):
        names = [w for w in words[1:] if not w.startswith("-")]
        return [(n, "") for n in names] if "-p" not in words and "--parallel" not in words else None
    m = _SCRIPT_CALL.match(segment)
    if not m:
        return None
    name = m.group(1)
    if name in ("t", "tst"):
        name = "test"
    if name not in scripts:
        return None
    extra = m.group(2) or ""
    return [(name, extra)]


def _program(words: list[str]) -> tuple[int, str]:
    """The index and name of the program a command runs, past variable assignments and
    wrappers (``cross-env``, ``npx``, ``nyc``/``c8`` and their options); -1 when none.

    >>> _program("cross-env A=1 npx --no-install nyc --reporter lcov mocha -R spec".split())
    (7, 'mocha')
    """
    i, wrapped, coverage = 0, False, False
    while i < len(words):
        word = words[i]
        name = word.rsplit("/", 1)[-1]
        if re.fullmatch(r"[A-Za-z_]\w*=.*", word) or name in ENV_WRAPPERS or name in COVERAGE:
            wrapped, coverage = True, coverage or name in COVERAGE
        elif not ((wrapped and word.startswith("-"))
                  or (coverage and name not in JS_RUNNERS)):  # a coverage option's value
            return i, name
        i += 1
    return -1, ""


def runner_of(segment: str) -> str:
    """The test runner a simple command runs ("" when it runs none).

    >>> [runner_of(c) for c in ("cross-env NODE_ENV=test nyc --reporter=lcov mocha test",
    ...                         "node --test test/", "c8 ava", "xo", "node build.js")]
    ['mocha', 'node --test', 'ava', '', '']
    """
    words = _words(segment)
    i, name = _program(words)
    if name == "node":
        return "node --test" if "--test" in words[i:] else ""
    if name in ("jest", "mocha", "vitest", "ava", "tap", "tape", "uvu", "_mocha"):
        return "mocha" if name == "_mocha" else name
    return ""


def is_linter(segment: str) -> bool:
    """Whether a simple command only lints or type-checks (``xo``, ``eslint .``, ``tsc
    --noEmit``, ``tsd``): not part of running the tests."""
    words = _words(segment)
    _, name = _program(words)
    return name in LINTERS or "--noEmit" in words or name.endswith("lint")


def rewrite_js(segment: str) -> RunnerCommand | None:
    """One runner call with its per-test file reporter, its variables kept, coverage
    wrappers dropped; None when the segment calls no runner this module knows."""
    runner = runner_of(segment)
    if not runner:
        return None
    words = _words(segment)
    i, _ = _program(words)
    env = [w for w in words[:i] if re.fullmatch(r"[A-Za-z_]\w*=.*", w)]
    args = words[i + 1:]
    head = [*env, "node" if runner == "node --test" else runner]
    rewrite = _REWRITES[runner]
    cmd, parser, reports = rewrite(args)
    return RunnerCommand(" ".join([*map(_quote_arg, head), cmd]).strip(), parser, runner,
                         reports)


def _quote_arg(word: str) -> str:
    if "=" in word and re.fullmatch(r"[A-Za-z_]\w*=.*", word):
        key, _, value = word.partition("=")
        return f"{key}={_shell(value)}"
    return _shell(word)


def _without(args: list[str], flags: tuple[str, ...], valued: bool = True) -> list[str]:
    """``args`` without ``flags`` (``--flag value`` and ``--flag=value`` forms)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in flags:
            skip = valued and "=" not in a
            continue
        out.append(a)
    return out


_GLOB_SAFE = re.compile(r"[\w@%+=:,./*?\[\]{}!^-]+")


def _shell(word: str) -> str:
    """A word as the script wrote it when it is safe unquoted (globs stay globs, for the
    shell or the runner to expand), else quoted."""
    return word if _GLOB_SAFE.fullmatch(word) else shlex.quote(word)


def _join(args: list[str]) -> str:
    return " ".join(_shell(a) for a in args)


def _then(args: str, flags: str) -> str:
    return f"{args} {flags}" if args else flags


def _mocha(args: list[str]) -> tuple[str, str, str]:
    args = _without(args, ("--watch", "-w"), valued=False)
    args = _without(args, ("--reporter", "-R", "--reporter-option", "--reporter-options", "-O"))
    return (_then(_join(args), f"--reporter xunit --reporter-option output={RESULTS}/mocha.xml"),
            "junit", f"{REPORTS_DIR}/mocha.xml")


def _jest(args: list[str]) -> tuple[str, str, str]:
    args = _without(args, ("--outputFile",))
    args = _without(args, ("--json", "--watch", "--watchAll", "--coverage"), valued=False)
    return (_then(_join(args), f"--ci --json --outputFile={RESULTS}/jest.json"), "json",
            f"{REPORTS_DIR}/jest.json")


def _vitest(args: list[str]) -> tuple[str, str, str]:
    args = _without(args, ("--watch", "-w"), valued=False)
    args = _without(args, ("--reporter", "--outputFile"))
    args = [a for a in args if not a.startswith(("--outputFile.", "--coverage"))]
    # coverage costs time and needs its provider installed; it is not a test
    if not args or args[0] not in ("run", "bench"):
        args = ["run", *[a for a in args if a != "watch"]]
    return (_then(_join(args), "--reporter=default --reporter=junit "
                  f"--outputFile={RESULTS}/vitest.xml"),
            "junit", f"{REPORTS_DIR}/vitest.xml")


def _ava(args: list[str]) -> tuple[str, str, str]:
    args = [a for a in args if a not in ("--tap", "-t", "--verbose", "-v", "--watch", "-w")]
    return _then(_join(args), "--tap"), "tap", ""


def _node_test(args: list[str]) -> tuple[str, str, str]:
    args = _without(args, ("--test-reporter", "--test-reporter-destination"))
    at = args.index("--test") + 1 if "--test" in args else 0
    flags = ["--test-reporter=tap", f"--test-reporter-destination={RESULTS}/node.tap",
             "--test-reporter=spec", "--test-reporter-destination=stdout"]
    before, after = _join(args[:at]), _join(args[at:])
    return (f"{before} {' '.join(flags)} {after}".strip(), "tap", f"{REPORTS_DIR}/node.tap")


def _tap(args: list[str]) -> tuple[str, str, str]:
    args = _without(args, ("--reporter", "-R"))
    return _then(_join(args), "--reporter=tap"), "tap", ""


def _plain_tap(args: list[str]) -> tuple[str, str, str]:
    return _join(args), "tap", ""


def _uvu(args: list[str]) -> tuple[str, str, str]:
    return _join(args), "auto", ""  # uvu prints no per-test lines: the run says exit-code


_REWRITES = {"mocha": _mocha, "jest": _jest, "vitest": _vitest, "ava": _ava,
             "node --test": _node_test, "tap": _tap, "tape": _plain_tap, "uvu": _uvu}


def lint_only(line: str, scripts: dict[str, str]) -> bool:
    """Whether every command a script line runs lints or type-checks (no test runs).

    >>> lint_only("pnpm test:types", {"test:types": "tsc --noEmit"}), lint_only("xo && ava", {})
    (True, False)
    """
    chain = script_chain(line, scripts)
    return bool(chain) and all(is_linter(segment) for segment in chain)


def node_test_command(line: str, scripts: dict[str, str]) -> RunnerCommand | None:
    """A package's test line (``npm test``, ``yarn test:unit``, ``xo && c8 ava``) as the
    commands it runs with each runner reporting per test: builds kept in order, linters
    dropped, the runner rewritten (``rewrite_js``). None when no known runner is in the chain;
    a chain of more than one runner keeps the first that reports to a file. ``lint_only``
    tells a line that only lints (``pnpm test:types``) from one with no known runner.

    >>> c = node_test_command("npm test", {"test": "xo && nyc ava", "pretest": "tsc -p ."})
    >>> print(c.command, c.parser)
    export PATH="$PWD/node_modules/.bin:$PATH" && tsc -p . && ava --tap tap
    """
    chain = script_chain(line, scripts)
    steps: list[str] = []
    found: RunnerCommand | None = None
    for segment in chain:
        if is_linter(segment):
            continue
        rewritten = rewrite_js(segment)
        if rewritten is None:
            if found is None and not _SCRIPT_CALL.match(segment):
                steps.append(segment)
            continue
        if found is None or (found.parser == "auto" and rewritten.parser != "auto"):
            found = rewritten
    if found is None:
        return None
    prefix = [f"mkdir -p {RESULTS}"] if found.reports else []
    command = " && ".join([*prefix, NODE_BIN, *steps, found.command])
    return RunnerCommand(command, found.parser, found.runner, found.reports)


_PYTEST_CALL = re.compile(r"(?:(?<=\s)|^)((?:python3? -m )?(?:pytest|py\.test))(?=\s|$)")
_JUNIT_FLAG = re.compile(r"\s--junit-?xml(?:=|\s+)\S+")
PYTEST_JUNIT = f"{REPORTS_DIR}/junit.xml"


def has_pytest(command: str) -> bool:
    """Whether a command line calls pytest (``pytest``, ``python -m pytest``, ``py.test``)."""
    return bool(_PYTEST_CALL.search(command))


def pytest_with_report(command: str) -> str:
    """A ``pytest`` line with ``-rA`` and the JUnit report in the results folder (in place
    of any report the line names), so results are per test.

    >>> pytest_with_report("coverage run -m pytest --junit-xml=r.xml tests")
    'coverage run -m pytest -rA --junitxml="${CODECORPUS_RESULTS:-.codecorpus-reports}"/junit.xml tests'
    """
    if not _PYTEST_CALL.search(command):
        return command
    command = _JUNIT_FLAG.sub("", command)
    return _PYTEST_CALL.sub(lambda m: f"{m.group(1)} -rA --junitxml={RESULTS}/junit.xml",
                            command, count=1)

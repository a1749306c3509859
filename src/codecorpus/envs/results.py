"""Per-test results from what a test runner printed or wrote.

Structured reports first (JUnit XML from ``pytest --junitxml``, Maven surefire, jest-junit;
``go test -json``), then text parsers for runners that only print (``pytest -rA``,
``python -m unittest -v``, ``cargo test``, TAP from ``node --test``, ``ctest``), and last the
exit code alone, recorded as such (one pseudo-test named after the command).

Every parser maps a test id to one of ``passed``, ``failed``, ``skipped``; errors count as
failed. Ids are stable for a runner and a repository (no durations, build hashes or
addresses in them), so the same test run twice or before and after a patch has the same id.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
MAX_REPORT_BYTES = 64 << 20  # a junit file larger than this is not read (it is repository output)


@dataclass(frozen=True)
class TestReport:
    """The parser used and the status of every test it found."""

    __test__ = False  # not a pytest class
    parser: str
    tests: dict[str, str]

    @property
    def passed(self) -> list[str]:
        return sorted(t for t, s in self.tests.items() if s == PASSED)

    @property
    def failed(self) -> list[str]:
        return sorted(t for t, s in self.tests.items() if s == FAILED)


def parse_junit(documents: Iterable[bytes]) -> dict[str, str]:
    """JUnit XML (``<testsuites>``/``<testsuite>``/``<testcase>``): id ``classname::name``.

    Expat (Python >= 3.7.1 with expat >= 2.4.1) refuses entity-expansion bombs; oversized
    documents are skipped before parsing.

    >>> parse_junit([b'<testsuite><testcase classname="t" name="a"/>'
    ...              b'<testcase classname="t" name="b"><failure/></testcase></testsuite>'])
    {'t::a': 'passed', 't::b': 'failed'}
    """
    tests: dict[str, str] = {}
    for doc in documents:
        if len(doc) > MAX_REPORT_BYTES:
            continue
        try:
            root = ET.fromstring(doc)
        except ET.ParseError:
            continue
        for case in root.iter("testcase"):
            name = case.get("name", "")
            cls = case.get("classname") or case.get("class") or ""
            tid = f"{cls}::{name}" if cls else name
            tests[tid] = _merge(tests.get(tid), _junit_status(case))
    return tests


def _junit_status(case: ET.Element) -> str:
    tags = {child.tag for child in case}
    if tags & {"failure", "error"}:
        return FAILED
    if "skipped" in tags:
        return SKIPPED
    return PASSED


def parse_go_json(text: str) -> dict[str, str]:
    """``go test -json`` events: id ``package::Test/Subtest``.

    >>> parse_go_json('{"Action":"pass","Package":"m/p","Test":"TestA"}\\n'
    ...               '{"Action":"fail","Package":"m/p"}')
    {'m/p::TestA': 'passed'}
    """
    status = {"pass": PASSED, "fail": FAILED, "skip": SKIPPED}
    tests: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("Test") and event.get("Action") in status:
            tests[f"{event.get('Package', '')}::{event['Test']}"] = status[event["Action"]]
    return tests


_PYTEST_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (\S+::\S+)")
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\b")
_PYTEST_STATUS = {"PASSED": PASSED, "XPASS": PASSED, "FAILED": FAILED, "ERROR": FAILED,
                  "XFAIL": SKIPPED, "SKIPPED": SKIPPED}


def parse_pytest(text: str) -> dict[str, str]:
    """``pytest -rA`` short summary lines (and ``-v`` lines): id is pytest's node id.

    >>> parse_pytest("PASSED t.py::test_a\\nFAILED t.py::test_b - assert 0\\n")
    {'t.py::test_a': 'passed', 't.py::test_b': 'failed'}
    """
    tests: dict[str, str] = {}
    for line in text.splitlines():
        m = _PYTEST_SUMMARY.match(line)
        if m:
            tests[m.group(2)] = _merge(tests.get(m.group(2)), _PYTEST_STATUS[m.group(1)])
            continue
        m = _PYTEST_VERBOSE.match(line)
        if m:
            tests[m.group(1)] = _merge(tests.get(m.group(1)), _PYTEST_STATUS[m.group(2)])
    return tests


_UNITTEST_HEAD = re.compile(r"^(\w+) \(([\w.]+)\)(.*)$")
_UNITTEST_TAIL = re.compile(
    r"(?:^|\.\.\. ?)(ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$")


def parse_unittest(text: str) -> dict[str, str]:
    """``python -m unittest -v`` lines ``test_a (pkg.mod.Case.test_a) ... ok``: id
    ``pkg.mod.Case.test_a`` (Python 3.11 prints the full name; 3.10 the class only). A test
    with a docstring has it on the next line (``First line ... ok``); what a test prints
    (warnings, its own output) may come between the ``...`` and the status.

    >>> parse_unittest("test_a (m.T.test_a) ... ok\\ntest_b (m.T) ... FAIL\\n"
    ...                "test_c (m.T.test_c) ... noise\\nmore noise\\nok\\n"
    ...                "test_d (m.T.test_d)\\nChecks ... a thing. ... skipped 'why'\\n")
    {'m.T.test_a': 'passed', 'm.T.test_b': 'failed', 'm.T.test_c': 'passed', 'm.T.test_d': 'skipped'}
    """
    tests: dict[str, str] = {}
    pending: str | None = None
    for line in text.splitlines():
        m = _UNITTEST_HEAD.match(line)
        if m:
            method, where, line = m.groups()
            pending = where if where.endswith("." + method) else f"{where}.{method}"
        if pending is None:
            continue
        word = _UNITTEST_TAIL.search(line.strip())
        if word:
            tests[pending] = _merge(tests.get(pending), _unittest_status(word.group(1)))
            pending = None
    return tests


def _unittest_status(word: str) -> str:
    if word.startswith("skipped") or word == "expected failure":
        return SKIPPED
    return PASSED if word in ("ok", "unexpected success") else FAILED


_CARGO_RUNNING = re.compile(r"^\s*Running (?:unittests )?(\S+)")
_CARGO_DOC = re.compile(r"^\s*Doc-tests (\S+)")
_CARGO_TEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)\b")


def parse_cargo(text: str) -> dict[str, str]:
    """``cargo test`` lines ``test mod::name ... ok``: id ``source::mod::name`` where source
    is the test target's source file (from ``Running``) or ``doc`` for doc-tests.

    >>> parse_cargo("     Running unittests src/lib.rs (target/debug/deps/a-1f)\\n"
    ...             "test tests::ok_one ... ok\\ntest tests::bad ... FAILED\\n")
    {'src/lib.rs::tests::ok_one': 'passed', 'src/lib.rs::tests::bad': 'failed'}
    """
    status = {"ok": PASSED, "FAILED": FAILED, "ignored": SKIPPED}
    tests: dict[str, str] = {}
    target = ""
    for line in text.splitlines():
        m = _CARGO_RUNNING.match(line) or _CARGO_DOC.match(line)
        if m:
            target = "doc" if "Doc-tests" in line else m.group(1)
            continue
        m = _CARGO_TEST.match(line)
        if m:
            tid = f"{target}::{m.group(1)}"
            tests[tid] = _merge(tests.get(tid), status[m.group(2)])
    return tests


_TAP_SUBTEST = re.compile(r"^(\s*)# Subtest: (.*)$")
_TAP_RESULT = re.compile(r"^(\s*)(not ok|ok) \d+(?: - (.*?))?(?: # (SKIP|TODO)\b.*)?$", re.I)


def parse_tap(text: str) -> dict[str, str]:
    """TAP (``node --test``, tape, node-tap): leaf tests only, nested names joined by
    `` > `` (a suite's own line is its children's summary, not a test).

    >>> parse_tap("TAP version 13\\n# Subtest: s\\n    # Subtest: a\\n    ok 1 - a\\n"
    ...           "    1..1\\nok 1 - s\\nnot ok 2 - b\\nok 3 - c # SKIP\\n")
    {'s > a': 'passed', 'b': 'failed', 'c': 'skipped'}
    """
    tests: dict[str, str] = {}
    path: dict[int, str] = {}
    last_depth = -1
    for line in text.splitlines():
        m = _TAP_SUBTEST.match(line)
        if m:
            path[len(m.group(1)) // 4] = m.group(2).strip()
            continue
        m = _TAP_RESULT.match(line)
        if not m:
            continue
        depth = len(m.group(1)) // 4
        is_parent = last_depth == depth + 1
        last_depth = depth
        if is_parent:
            continue
        name = (m.group(3) or "").strip() or path.get(depth, "")
        tid = " > ".join([*(path.get(d, "") for d in range(depth)), name])
        status = PASSED if m.group(2).lower() == "ok" else FAILED
        if m.group(4):
            status = SKIPPED
        tests[tid] = _merge(tests.get(tid), status)
    return tests


_CTEST = re.compile(r"Test\s+#\d+: (\S+) \.*\s*(?:\*\*\*)?(Passed|Failed|Not Run|Skipped|Timeout"
                    r"|Exception|Disabled|\w+)")


def parse_ctest(text: str) -> dict[str, str]:
    """``ctest --output-on-failure`` lines ``1/2 Test #1: name ....   Passed``.

    >>> parse_ctest("1/2 Test #1: add ....   Passed    0.01 sec\\n"
    ...             "2/2 Test #2: sub ....***Failed    0.01 sec\\n")
    {'add': 'passed', 'sub': 'failed'}
    """
    tests: dict[str, str] = {}
    for m in _CTEST.finditer(text):
        word = m.group(2)
        status = PASSED if word == "Passed" else FAILED
        if word in ("Not Run", "Skipped", "Disabled"):
            status = SKIPPED
        tests[m.group(1)] = _merge(tests.get(m.group(1)), status)
    return tests


def _merge(old: str | None, new: str) -> str:
    """One id seen twice (a rerun, a parametrized duplicate): failed wins, then passed."""
    if old is None or old == new:
        return new
    if FAILED in (old, new):
        return FAILED
    return PASSED


TEXT_PARSERS: dict[str, Callable[[str], dict[str, str]]] = {
    "go-json": parse_go_json,
    "pytest": parse_pytest,
    "unittest": parse_unittest,
    "cargo": parse_cargo,
    "tap": parse_tap,
    "ctest": parse_ctest,
}
PARSERS = ("junit", *TEXT_PARSERS, "exit-code")


def parse(parser: str, stdout: str, stderr: str, exit_code: int | None,
          junit: Iterable[bytes] = (), command: str = "") -> TestReport:
    """Per-test statuses with ``parser``; ``auto`` tries JUnit, then each text parser, then
    the exit code. ``junit`` without a readable report tries the text parsers (the runner
    may have been stopped before writing it, or a repository's option moved it; ``pytest
    -rA`` still printed every test). A named parser that finds nothing falls back to the
    exit code too, so a report always says what it rests on."""
    junit = list(junit)
    text = stdout + "\n" + stderr
    if parser in ("junit", "auto") and junit:
        tests = parse_junit(junit)
        if tests:
            return TestReport("junit", tests)
    candidates = TEXT_PARSERS if parser in ("auto", "junit") else {
        k: v for k, v in TEXT_PARSERS.items() if k == parser}
    for name, fn in candidates.items():
        tests = fn(text)
        if tests:
            return TestReport(name, tests)
    if parser not in PARSERS and parser != "auto":
        raise ValueError(f"unknown test parser {parser!r}: use one of {', '.join(PARSERS)}")
    return TestReport("exit-code", {command or "<command>": PASSED if exit_code == 0 else FAILED})

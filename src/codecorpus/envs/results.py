"""Per-test results from what a test runner printed or wrote.

Report files first: JUnit XML (``pytest --junitxml``, Maven surefire, jest-junit, ``vitest
--reporter=junit``, ``mocha --reporter xunit``, ``node --test --test-reporter=junit``), the
JSON reports of jest and vitest (``--json``/``--reporter=json``) and of mocha (``--reporter
json``), and TAP files (``node --test --test-reporter=tap``); then what the runner printed:
``go test -json``, ``pytest -rA``, ``python -m unittest -v``, ``cargo test``, TAP (``node
--test``, ``ava --tap``, tape, node-tap), ``ctest``. Report files are told apart by their
content, so a test command may write any of them into its results folder. Last comes the exit
code alone, recorded as parser ``exit-code`` (one pseudo-test named after the command): the
explicit mark of a run that gave no per-test result.

Every parser maps a test id to one of ``passed``, ``failed``, ``skipped``; errors count as
failed. Ids are stable for a runner and a repository (no durations, build hashes, addresses
or the work tree's absolute path in them), so the same test run twice, in another checkout,
or before and after a patch has the same id.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from codecorpus.envs.sandbox import WORK

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
    Suites nested in a suite (``node --test``'s ``describe`` blocks, whose cases all carry
    classname ``test``) put their names before the case's, joined by `` > `` as node's TAP
    does, so two ``describe`` blocks with a case of the same name stay two tests.

    Expat (Python >= 3.7.1 with expat >= 2.4.1) refuses entity-expansion bombs; oversized
    documents are skipped before parsing.

    >>> parse_junit([b'<testsuite><testcase classname="t" name="a"/>'
    ...              b'<testcase classname="t" name="b"><failure/></testcase></testsuite>'])
    {'t::a': 'passed', 't::b': 'failed'}
    >>> parse_junit([b'<testsuites><testsuite name="math"><testsuite name="deep">'
    ...              b'<testcase classname="test" name="ok"/></testsuite></testsuite>'
    ...              b'<testcase classname="test" name="top"/></testsuites>'])
    {'test::math > deep > ok': 'passed', 'test::top': 'passed'}
    """
    tests: dict[str, str] = {}
    for doc in documents:
        if len(doc) > MAX_REPORT_BYTES:
            continue
        try:
            root = ET.fromstring(doc)
        except ET.ParseError:
            continue
        top = [root.get("name", "")] if root.tag == "testsuite" else []
        for suites, case in _junit_cases(root, top):
            name = case.get("name", "")
            cls = case.get("classname") or case.get("class") or ""
            nested = suites[1:] if cls != "test" else suites  # node names every case "test"
            name = " > ".join([*nested, name])
            tid = f"{cls}::{name}" if cls else name
            tests[tid] = _merge(tests.get(tid), _junit_status(case))
    return tests


def _junit_cases(node: ET.Element, suites: list[str]):
    """Each ``testcase`` under ``node`` with the names of the ``testsuite`` elements above it."""
    for child in node:
        if child.tag == "testcase":
            yield suites, child
        elif child.tag == "testsuite":
            yield from _junit_cases(child, [*suites, child.get("name", "")])
        elif child.tag == "testsuites":
            yield from _junit_cases(child, suites)


def _junit_status(case: ET.Element) -> str:
    tags = {child.tag for child in case}
    if tags & {"failure", "error"}:
        return FAILED
    if "skipped" in tags:
        return SKIPPED
    return PASSED


def parse_json(documents: Iterable[bytes], root: str = WORK) -> dict[str, str]:
    """The JSON reports of jest (``--json --outputFile``) and vitest (``--reporter=json``),
    one layout: id ``file::describe > test``; and of mocha (``--reporter json``): id
    ``file::full title``. File paths are made relative to ``root``, the work tree as the
    runner saw it, so a fresh checkout gives the same ids. A test file that failed to load
    (no test results, an error message) is one failed test named ``file::<file>``: its
    tests were not run, and a pass rate must count them.

    >>> parse_json([b'{"testResults": [{"name": "/workspace/t/a.test.js", "status": "failed",'
    ...             b' "assertionResults": [{"ancestorTitles": ["m"], "title": "adds",'
    ...             b' "status": "passed"}, {"ancestorTitles": [], "title": "b", "status":'
    ...             b' "pending"}]}, {"name": "/workspace/t/b.test.js", "status": "failed",'
    ...             b' "message": "SyntaxError", "assertionResults": []}]}'])
    {'t/a.test.js::m > adds': 'passed', 't/a.test.js::b': 'skipped', 't/b.test.js::<file>': 'failed'}
    """
    tests: dict[str, str] = {}
    for doc in documents:
        data = _json_document(doc)
        if isinstance(data.get("testResults"), list):
            _jest_tests(data["testResults"], root, tests)
        elif isinstance(data.get("stats"), dict) and isinstance(data.get("tests"), list):
            _mocha_tests(data, root, tests)
    return tests


def _json_document(doc: bytes) -> dict:
    if len(doc) > MAX_REPORT_BYTES:
        return {}
    try:
        data = json.loads(doc)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


_JEST_STATUS = {"passed": PASSED, "failed": FAILED, "pending": SKIPPED, "skipped": SKIPPED,
                "todo": SKIPPED, "disabled": SKIPPED, "focused": PASSED}


def _jest_tests(files: list, root: str, tests: dict[str, str]) -> None:
    for result in files:
        if not isinstance(result, dict):
            continue
        path = relative_path(str(result.get("name") or result.get("testFilePath") or ""), root)
        cases = [c for c in result.get("assertionResults") or [] if isinstance(c, dict)]
        if not cases and result.get("status") == "failed":
            tests[f"{path}::<file>"] = FAILED
        for case in cases:
            titles = [str(t) for t in case.get("ancestorTitles") or []]
            tid = f"{path}::{' > '.join([*titles, str(case.get('title', ''))])}"
            tests[tid] = _merge(tests.get(tid), _JEST_STATUS.get(case.get("status"), FAILED))


def _mocha_tests(data: dict, root: str, tests: dict[str, str]) -> None:
    for key, status in (("passes", PASSED), ("pending", SKIPPED), ("failures", FAILED)):
        for case in data.get(key) or []:
            if isinstance(case, dict):
                path = relative_path(str(case.get("file") or ""), root)
                tid = f"{path}::{case.get('fullTitle', '')}"
                tests[tid] = _merge(tests.get(tid), status)


def relative_path(path: str, root: str = WORK) -> str:
    """A runner's file path as the repository names it: ``file://`` and the work tree dropped.

    >>> relative_path("file:///workspace/test/a.js"), relative_path("test/a.js")
    ('test/a.js', 'test/a.js')
    """
    path = path.removeprefix("file://")
    root = root.rstrip("/") + "/"
    return path[len(root):] if path.startswith(root) else path


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
FILE_PARSERS = ("junit", "json", "tap")
"""The formats of report files, in the order they are tried."""
PARSERS = ("junit", "json", *TEXT_PARSERS, "exit-code")
EXIT_CODE = "exit-code"
"""The parser of a run that gave no per-test result: never evidence that tests ran."""


def report_kind(doc: bytes) -> str:
    """Which of ``FILE_PARSERS`` a report file is written in, read from its content ("" when
    none): a runner's file reporter is chosen by the command, so the file says what it is.

    >>> [report_kind(d) for d in (b'<?xml version="1.0"?><testsuites/>', b' {"stats": {}}',
    ...                           b"TAP version 13\\nok 1 - a\\n", b"hello")]
    ['junit', 'json', 'tap', '']
    """
    head = doc[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"<"):
        return "junit"
    if head.startswith(b"{"):
        return "json"
    if re.search(rb"^(TAP version \d+|(not )?ok \d+)", head, re.M):
        return "tap"
    return ""


def _parse_files(kind: str, docs: list[bytes], root: str) -> dict[str, str]:
    if kind == "junit":
        return parse_junit(docs)
    if kind == "json":
        return parse_json(docs, root)
    return parse_tap("\n".join(d.decode("utf-8", "replace") for d in docs))


def parse(parser: str, stdout: str, stderr: str, exit_code: int | None,
          junit: Iterable[bytes] = (), command: str = "", root: str = WORK) -> TestReport:
    """Per-test statuses with ``parser``.

    ``junit`` holds the report files the run wrote, in any of ``FILE_PARSERS``' formats
    (``report_kind`` tells them apart); ``root`` is the work tree's path as the runner saw
    it, dropped from the file paths in JSON reports. A file parser (``junit``, ``json``) or
    ``auto`` reads the files first, then tries each text parser on the output (the runner
    may have been stopped before writing its file; ``pytest -rA`` still printed every
    test); ``tap`` reads TAP files, then the output. A parser that finds nothing falls back
    to the exit code (parser ``exit-code``), so a report always says what it rests on."""
    if parser not in PARSERS and parser != "auto":
        raise ValueError(f"unknown test parser {parser!r}: use one of auto, {', '.join(PARSERS)}")
    docs = [d for d in junit if len(d) <= MAX_REPORT_BYTES]
    text = stdout + "\n" + stderr
    if parser in (*FILE_PARSERS, "auto"):
        for kind in FILE_PARSERS:
            tests = _parse_files(kind, [d for d in docs if report_kind(d) == kind], root)
            if tests:
                return TestReport(kind, tests)
    candidates = TEXT_PARSERS if parser in ("auto", "junit", "json") else {
        k: v for k, v in TEXT_PARSERS.items() if k == parser}
    for name, fn in candidates.items():
        tests = fn(text)
        if tests:
            return TestReport(name, tests)
    return TestReport(EXIT_CODE, {command or "<command>": PASSED if exit_code == 0 else FAILED})

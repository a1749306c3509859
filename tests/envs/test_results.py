"""The result parsers on real runner output: tiny projects built here, run by the real runners."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codecorpus.envs import results


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run a runner with stderr merged into stdout, as the sandbox records a test run."""
    full_env = {**os.environ, "NO_COLOR": "1", **env}
    return subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=full_env, timeout=300, check=False)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


PY_TESTS = {
    "tests/test_calc.py": (
        "import pytest\n"
        "def test_add():\n    assert 1 + 1 == 2\n"
        "def test_bad():\n    assert 1 == 2\n"
        "@pytest.mark.skip(reason='no')\ndef test_skip():\n    pass\n"
        "@pytest.mark.parametrize('x', [1, 2])\ndef test_param(x):\n    assert x == 1\n"
    ),
}
PY_EXPECTED = {
    "tests/test_calc.py::test_add": "passed",
    "tests/test_calc.py::test_bad": "failed",
    "tests/test_calc.py::test_param[1]": "passed",
    "tests/test_calc.py::test_param[2]": "failed",
}


def test_pytest_rA_and_junit(tmp_path):
    _write(tmp_path, PY_TESTS)
    proc = _run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider",
                 "--junitxml=report.xml", "tests"], tmp_path)
    text = results.parse("pytest", proc.stdout, "", proc.returncode)
    assert text.parser == "pytest"
    # -rA lists passed and failed tests by node id; skipped ones only by file and line.
    assert text.tests == PY_EXPECTED
    junit = results.parse("auto", proc.stdout, "", proc.returncode,
                          [(tmp_path / "report.xml").read_bytes()])
    assert junit.parser == "junit"
    assert junit.tests == {
        "tests.test_calc::test_add": "passed", "tests.test_calc::test_bad": "failed",
        "tests.test_calc::test_skip": "skipped", "tests.test_calc::test_param[1]": "passed",
        "tests.test_calc::test_param[2]": "failed"}


def test_unittest_verbose(tmp_path):
    _write(tmp_path, {"test_mod.py": (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_ok(self):\n        print('noise')\n        self.assertTrue(True)\n"
        "    def test_fail(self):\n        self.assertEqual(1, 2)\n"
        "    def test_error(self):\n        raise RuntimeError('x')\n"
        "    @unittest.skip('later')\n    def test_skip(self):\n        pass\n")})
    proc = _run([sys.executable, "-m", "unittest", "-v"], tmp_path)
    report = results.parse("auto", proc.stdout, "", proc.returncode)
    assert report.parser == "unittest"
    assert report.tests == {"test_mod.T.test_ok": "passed", "test_mod.T.test_fail": "failed",
                            "test_mod.T.test_error": "failed", "test_mod.T.test_skip": "skipped"}


def test_unittest_verbose_with_docstrings(tmp_path):
    """A docstring's first line is printed on a line of its own, before the status."""
    _write(tmp_path, {"test_doc.py": (
        "import unittest\n"
        "class T(unittest.TestCase):\n"
        "    def test_doc(self):\n        'Checks ... a thing.'\n        print('out ... ok?')\n"
        "    def test_fail(self):\n        'Fails.'\n        self.fail('x')\n"
        "    def test_plain(self):\n        pass\n"
        "    @unittest.skip('why')\n    def test_skip(self):\n        'Skipped.'\n")})
    proc = _run([sys.executable, "-m", "unittest", "-v"], tmp_path)
    assert "Checks ... a thing." in proc.stdout
    assert results.parse("unittest", proc.stdout, "", proc.returncode).tests == {
        "test_doc.T.test_doc": "passed", "test_doc.T.test_fail": "failed",
        "test_doc.T.test_plain": "passed", "test_doc.T.test_skip": "skipped"}


@pytest.mark.skipif(not shutil.which("node"), reason="node is not installed")
def test_node_test_tap(tmp_path):
    _write(tmp_path, {"test/math.test.js": (
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "test('adds', () => assert.strictEqual(1 + 1, 2));\n"
        "test('breaks', () => assert.strictEqual(1, 2));\n"
        "test('later', { skip: true }, () => {});\n"
        "test('suite', async (t) => {\n"
        "  await t.test('inner ok', () => {});\n"
        "  await t.test('inner bad', () => { throw new Error('x'); });\n});\n")})
    proc = _run(["node", "--test", "--test-reporter=tap"], tmp_path)
    report = results.parse("tap", proc.stdout, "", proc.returncode)
    assert report.tests == {
        "adds": "passed", "breaks": "failed", "later": "skipped",
        "suite > inner ok": "passed", "suite > inner bad": "failed"}


@pytest.mark.skipif(not shutil.which("cargo"), reason="cargo is not installed")
def test_cargo_test(tmp_path):
    _write(tmp_path, {
        "Cargo.toml": '[package]\nname = "tiny"\nversion = "0.1.0"\nedition = "2021"\n',
        "src/lib.rs": (
            "/// ```\n/// assert_eq!(tiny::add(1, 1), 2);\n/// ```\n"
            "pub fn add(a: i32, b: i32) -> i32 { a + b }\n"
            "#[cfg(test)]\nmod tests {\n"
            "    #[test]\n    fn adds() { assert_eq!(super::add(1, 2), 3); }\n"
            "    #[test]\n    fn breaks() { assert_eq!(super::add(1, 2), 4); }\n"
            "    #[test]\n    #[ignore]\n    fn slow() {}\n}\n"),
        "tests/it.rs": "#[test]\nfn integration() { assert_eq!(tiny::add(2, 2), 4); }\n",
    })
    proc = _run(["cargo", "test", "--offline", "--no-fail-fast"], tmp_path,
                CARGO_TARGET_DIR=str(tmp_path / "target"))
    report = results.parse("cargo", proc.stdout, "", proc.returncode)
    # The unit-test binary fails, so cargo stops before the integration and doc tests
    # unless --no-fail-fast: all three targets are here.
    assert report.tests == {
        "src/lib.rs::tests::adds": "passed", "src/lib.rs::tests::breaks": "failed",
        "src/lib.rs::tests::slow": "skipped", "tests/it.rs::integration": "passed",
        "doc::src/lib.rs - add (line 1)": "passed"}


@pytest.mark.skipif(not shutil.which("go"), reason="go is not installed (apt-get install golang-go)")
def test_go_test_json(tmp_path):
    _write(tmp_path, {
        "go.mod": "module example.com/tiny\n\ngo 1.19\n",
        "calc/calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
        "calc/calc_test.go": (
            'package calc\n\nimport "testing"\n\n'
            "func TestAdd(t *testing.T) { if Add(1, 1) != 2 { t.Fatal(\"add\") } }\n"
            "func TestBad(t *testing.T) { t.Fatal(\"bad\") }\n"
            'func TestSkip(t *testing.T) { t.Skip("later") }\n'
            "func TestSub(t *testing.T) {\n"
            '\tt.Run("one", func(t *testing.T) {})\n\tt.Run("two", func(t *testing.T) { t.Fail() })\n}\n'),
    })
    proc = _run(["go", "test", "-json", "./..."], tmp_path, GOFLAGS="-mod=mod",
                GOCACHE=str(tmp_path / ".gocache"), GOPATH=str(tmp_path / ".gopath"),
                GOTOOLCHAIN="local", GOPROXY="off")
    report = results.parse("go-json", proc.stdout, "", proc.returncode)
    pkg = "example.com/tiny/calc"
    assert report.tests == {
        f"{pkg}::TestAdd": "passed", f"{pkg}::TestBad": "failed", f"{pkg}::TestSkip": "skipped",
        f"{pkg}::TestSub": "failed", f"{pkg}::TestSub/one": "passed",
        f"{pkg}::TestSub/two": "failed"}


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ctest")),
                    reason="cmake is not installed")
def test_ctest(tmp_path):
    _write(tmp_path, {"CMakeLists.txt": (
        "cmake_minimum_required(VERSION 3.10)\nproject(tiny NONE)\nenable_testing()\n"
        "add_test(NAME passes COMMAND true)\nadd_test(NAME fails COMMAND false)\n"
        "add_test(NAME skips COMMAND sh -c \"exit 77\")\n"
        "set_tests_properties(skips PROPERTIES SKIP_RETURN_CODE 77)\n")})
    build = tmp_path / "build"
    configure = _run(["cmake", "-S", str(tmp_path), "-B", str(build)], tmp_path)
    assert configure.returncode == 0, configure.stderr
    proc = _run(["ctest", "--test-dir", str(build), "--output-on-failure"], tmp_path)
    report = results.parse("ctest", proc.stdout, "", proc.returncode)
    assert report.tests == {"passes": "passed", "fails": "failed", "skips": "skipped"}


def test_exit_code_when_nothing_parses():
    report = results.parse("auto", "all good\n", "", 0, command="make check")
    assert report == results.TestReport("exit-code", {"make check": "passed"})
    assert results.parse("tap", "", "", 2, command="x").tests == {"x": "failed"}
    with pytest.raises(ValueError, match="unknown test parser"):
        results.parse("nose", "", "", 0)


# ---------------------------------------------------------------- report files
# tests/envs/data/reports/ holds what the real runners wrote for one small suite each
# (mocha 12, jest 30, vitest 4, ava 7, node 20, pytest 9), made under /tmp/i37b-runners:
#   describe('math') { it('adds') ok; it('fails') fails; it.skip('skipped');
#                      describe('nested') { it('deep ok') ok } }
# (ava has no describe: adds, fails, skipped, also ok; node adds a top-level 'top level').

REPORTS = Path(__file__).parent / "data" / "reports"
FIXTURE_ROOT = "/tmp/i37b-runners"
JS_SUITE = {"math > adds": "passed", "math > fails": "failed", "math > skipped": "skipped",
            "math > nested > deep ok": "passed"}


def _report(name: str, parser: str = "auto") -> results.TestReport:
    return results.parse(parser, "", "", 1, [(REPORTS / name).read_bytes()], root=FIXTURE_ROOT)


@pytest.mark.parametrize(("name", "kind", "prefix"), [
    ("jest.json", "json", "j/sample.test.js::"),
    ("vitest.json", "json", "v/sample.test.mjs::"),
    ("vitest-junit.xml", "junit", "sample.test.mjs::"),
])
def test_jest_and_vitest_reports(name, kind, prefix):
    report = _report(name, kind)
    assert report.parser == kind
    assert report.tests == {prefix + k: v for k, v in JS_SUITE.items()}


def test_mocha_reports_xunit_and_json():
    assert _report("mocha-xunit.xml", "junit").tests == {
        "math::adds": "passed", "math::fails": "failed", "math::skipped": "skipped",
        "math nested::deep ok": "passed"}
    json_report = _report("mocha.json", "json")
    assert json_report.parser == "json"
    assert json_report.tests == {
        "m/sample.test.js::math adds": "passed", "m/sample.test.js::math fails": "failed",
        "m/sample.test.js::math skipped": "skipped",
        "m/sample.test.js::math nested deep ok": "passed"}


def test_ava_tap_and_node_reports():
    assert _report("ava.tap", "tap").tests == {
        "adds": "passed", "fails": "failed", "skipped": "skipped", "also ok": "passed"}
    node = {**JS_SUITE, "top level": "passed"}
    assert _report("node.tap", "tap").tests == node
    assert _report("node-junit.xml", "junit").tests == {f"test::{k}": v for k, v in node.items()}


def test_pytest_junit_file_and_report_kinds():
    assert _report("pytest-junit.xml", "junit").tests == {
        "test_sample::test_ok": "passed", "test_sample::test_bad": "failed",
        "test_sample::test_skipped": "skipped", "test_sample::test_param[1]": "passed",
        "test_sample::test_param[2]": "passed", "test_sample.TestCase::test_error": "failed",
        "test_sample.TestCase::test_method": "passed"}
    kinds = {p.name: results.report_kind(p.read_bytes()) for p in REPORTS.iterdir()}
    assert {k for k, v in kinds.items() if v == "junit"} == {
        "mocha-xunit.xml", "node-junit.xml", "vitest-junit.xml", "pytest-junit.xml"}
    assert {k for k, v in kinds.items() if v == "json"} == {"jest.json", "vitest.json", "mocha.json"}
    assert {k for k, v in kinds.items() if v == "tap"} == {"ava.tap", "node.tap"}


def test_json_ids_do_not_depend_on_the_checkout_path():
    """The same suite run in two trees has the same ids: the work tree's path is dropped."""
    doc = (REPORTS / "jest.json").read_text()
    moved = doc.replace(FIXTURE_ROOT, "/elsewhere/tree").encode()
    assert (results.parse("json", "", "", 1, [moved], root="/elsewhere/tree").tests
            == _report("jest.json").tests)


def test_a_jest_file_that_does_not_load_counts_as_failed():
    doc = json.dumps({"testResults": [
        {"name": "/workspace/a.test.js", "status": "passed",
         "assertionResults": [{"ancestorTitles": [], "title": "t", "status": "passed"}]},
        {"name": "/workspace/b.test.js", "status": "failed", "message": "Cannot find module",
         "assertionResults": []}]}).encode()
    assert results.parse("json", "", "", 1, [doc]).tests == {
        "a.test.js::t": "passed", "b.test.js::<file>": "failed"}


def test_a_file_parser_without_a_file_falls_back_to_output_then_exit_code():
    """The runner stopped before writing its file: what it printed is read, and when it
    printed no test either the report says ``exit-code``, the mark of no per-test result."""
    assert results.parse("junit", "PASSED t.py::test_a\n", "", 0).parser == "pytest"
    nothing = results.parse("json", "Error: Cannot find module 'jest'\n", "", 1, command="jest")
    assert nothing == results.TestReport(results.EXIT_CODE, {"jest": "failed"})


def test_node_test_file_reporters_live(tmp_path):
    """``node --test`` writing TAP and JUnit files (the reporters the discovery asks for)."""
    _write(tmp_path, {"test/a.test.mjs": (
        "import { describe, it } from 'node:test';\nimport assert from 'node:assert';\n"
        "describe('s', () => {\n  it('ok', () => {});\n"
        "  it('bad', () => assert.equal(1, 2));\n});\n")})
    out = tmp_path / "results"
    out.mkdir()
    proc = _run(["node", "--test", "--test-reporter=tap", f"--test-reporter-destination={out}/r.tap",
                 "--test-reporter=junit", f"--test-reporter-destination={out}/r.xml"], tmp_path)
    assert proc.returncode == 1
    tap = results.parse("tap", proc.stdout, "", 1, [(out / "r.tap").read_bytes()])
    assert tap.tests == {"s > ok": "passed", "s > bad": "failed"}
    junit = results.parse("junit", proc.stdout, "", 1, [(out / "r.xml").read_bytes()])
    assert junit.tests == {"test::s > ok": "passed", "test::s > bad": "failed"}

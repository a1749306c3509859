"""enry (Linguist) detection: ambiguous extensions, extensionless files, modelines, magika,
tree-sitter parse_error_frac, and the breadth of Linguist names."""

from __future__ import annotations

import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import LangidConfig
from codecorpus.langid import detect as detector
from codecorpus.langid import parse
from codecorpus.langid import stage as langid


@pytest.mark.parametrize(
    ("path", "text", "lang"),
    [
        ("x.h", "int add(int a, int b);\n", "C"),
        ("x.h", "#include <vector>\nnamespace a { class B {}; }\n", "C++"),
        ("x.h", "#import <Foundation/Foundation.h>\n@interface A : NSObject\n@end\n", "Objective-C"),
        ("x.m", "#import <Foundation/Foundation.h>\n@implementation A\n@end\n", "Objective-C"),
        ("x.m", "function y = f(x)\n% square it\ny = x.^2;\nend\n", "MATLAB"),
        ("x.pl", "use strict;\nmy $x = 1;\nprint $x;\n", "Perl"),
        ("x.pl", ":- module(a, []).\nfoo(X) :- bar(X).\n", "Prolog"),
        ("x.ts", "const x: number = 1;\nexport { x };\n", "TypeScript"),
        ("x.ts", '<?xml version="1.0"?>\n<!DOCTYPE TS>\n<TS version="2.1"><context></context></TS>\n', "XML"),
        ("x.v", "module top(input a, output b);\n  assign b = a;\nendmodule\n", "Verilog"),
        ("x.v", "Theorem t : forall n : nat, n = n.\nProof. reflexivity. Qed.\n", "Rocq Prover"),
        ("x.inc", "<?php\necho 'hi';\n", "PHP"),
        ("x.cls", "\\NeedsTeXFormat{LaTeX2e}\n\\ProvidesClass{mine}\n", "TeX"),
        ("x.r", "x <- c(1, 2)\nprint(mean(x))\n", "R"),
        ("x.R", "x <- c(1, 2)\nprint(mean(x))\n", "R"),
    ],
)
def test_ambiguous_extensions_resolved_from_content(path: str, text: str, lang: str) -> None:
    got, method = detector.detect(path, text)
    assert got == lang
    assert method in ("content", "classifier", "extension")


@pytest.mark.parametrize(
    ("path", "text", "lang", "method"),
    [
        ("Dockerfile", "FROM python:3.12\n", "Dockerfile", "filename"),
        ("Makefile", "all:\n\techo hi\n", "Makefile", "filename"),
        ("Jenkinsfile", "pipeline {}\n", "Groovy", "filename"),
        ("scripts/deploy", "#!/usr/bin/env bash\nset -e\n", "Shell", "shebang"),
        ("scripts/tool", "#!/usr/bin/env perl5.36\nprint 1;\n", "Perl", "shebang"),
        ("notes", "# vim: set ft=ruby:\nputs 1\n", "Ruby", "modeline"),
        ("a.weird", "-*- mode: python -*-\n", "Python", "modeline"),
    ],
)
def test_names_shebangs_and_modelines(path: str, text: str, lang: str, method: str) -> None:
    assert detector.detect(path, text) == (lang, method)


def test_content_only_uses_magika() -> None:
    code = "import os\nimport sys\n\n\ndef main(argv):\n    for a in argv:\n        print(os.path.basename(a))\n"
    assert detector.detect("", code) == ("Python", "magika")
    # without magika the content model still reads it; with neither, content gives nothing
    assert detector.detect("", code, magika=False) == ("Python", "content_model")
    assert detector.detect("", code, magika=False, use_content_model=False) == (schema.UNKNOWN, schema.UNKNOWN)
    # too little content for any guess
    assert detector.detect("", "x\n") == (schema.UNKNOWN, schema.UNKNOWN)


def test_more_than_100_linguist_languages_reachable() -> None:
    from codecorpus.langid import languages

    found = set()
    for lang in languages.LANGUAGES:
        for ext in lang.extensions[:1]:
            got, _ = detector.detect(f"src/x{ext}", "")
            assert got != schema.UNKNOWN, ext
            found.add(got)
        for name in lang.filenames[:1]:
            found.add(detector.detect(name, "")[0])
    assert len(found - {schema.UNKNOWN}) >= 100
    assert {"Python", "TypeScript", "C++", "Shell", "Markdown", "Jupyter Notebook"} <= found


def test_parse_error_frac() -> None:
    assert parse.parse_error_frac("Python", "def f(x):\n    return x\n") == 0.0
    broken = parse.parse_error_frac("Python", "def f(x:\n    return x +\n")
    assert broken is not None and 0 < broken <= 1
    for lang, ok in [("JavaScript", "let a = 1;\n"), ("TypeScript", "let a: number = 1;\n"),
                     ("Java", "class A { int x; }\n"), ("Go", "package a\nfunc f() {}\n"),
                     ("Rust", "fn f() {}\n"), ("C", "int f(void) { return 0; }\n"),
                     ("C++", "namespace a { int f(); }\n"), ("C#", "class A { }\n"),
                     ("Ruby", "def f; end\n"), ("PHP", "<?php echo 1;\n"), ("Shell", "echo hi\n")]:
        assert parse.parse_error_frac(lang, ok) == 0.0, lang
        assert parse.parse_error_frac(lang, ok + "}}}{{{ ((( ") > 0, lang
    assert parse.parse_error_frac("Markdown", "# x") is None


def test_stage_adds_parse_error_frac_and_keeps_docs_kind() -> None:
    rows = [("a.py", "def f(:\n", "code"), ("b.md", "# x\n", "code"), ("guide.html", "# Guide\n", "docs")]
    n = len(rows)
    table = pa.table({
        schema.ID: [f"id{i}" for i in range(n)], schema.SOURCE: ["s"] * n, schema.REPO: ["r"] * n,
        schema.PATH: [p for p, _, _ in rows], schema.REVISION: [""] * n, schema.LICENSE: ["MIT"] * n,
        schema.LANG: [schema.UNKNOWN] * n, schema.KIND: [k for _, _, k in rows],
        schema.TEXT: [t for _, t, _ in rows], schema.BYTES: [len(t) for _, t, _ in rows],
        schema.CONTENT_HASH: ["h"] * n, schema.ENCODING: ["utf-8"] * n,
    }, schema=schema.DOC_SCHEMA)
    out = langid.run(table, LangidConfig()).table
    assert out.schema.field(schema.PARSE_ERROR_FRAC).type == pa.float32()
    errs = out.column(schema.PARSE_ERROR_FRAC).to_pylist()
    assert errs[0] > 0 and errs[1] is None
    assert out.column(schema.KIND).to_pylist() == ["code", "docs", "docs"]
    off = langid.run(table, LangidConfig(parse_errors=False)).table
    assert off.column(schema.PARSE_ERROR_FRAC).null_count == n

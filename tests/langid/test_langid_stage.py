import doctest

import pyarrow as pa
import pytest

from codecorpus import schema
from codecorpus.config import LangidConfig
from codecorpus.langid import languages
from codecorpus.langid import stage as langid
from codecorpus.langid.stage import LANG_METHOD, LANG_METHODS


def _docs(*rows: tuple[str, str], kind: str = "code") -> pa.Table:
    """A DOC_SCHEMA table of (path, text) rows, as ingest leaves it (lang unknown)."""
    n = len(rows)
    texts = [text for _, text in rows]
    return pa.table(
        {
            schema.ID: [f"id{i}" for i in range(n)],
            schema.SOURCE: ["src"] * n,
            schema.REPO: ["repo"] * n,
            schema.PATH: [path for path, _ in rows],
            schema.REVISION: ["rev"] * n,
            schema.LICENSE: ["MIT"] * n,
            schema.LANG: [schema.UNKNOWN] * n,
            schema.KIND: [kind] * n,
            schema.TEXT: texts,
            schema.BYTES: [len(t.encode()) for t in texts],
            schema.CONTENT_HASH: ["h"] * n,
            schema.ENCODING: ["utf-8"] * n,
        },
        schema=schema.DOC_SCHEMA,
    )


def _detect(path: str, text: str = "", **cfg: bool) -> tuple[str, str, str]:
    return langid.detect(path, text, LangidConfig(**cfg))


@pytest.mark.parametrize(
    ("path", "lang"),
    [
        ("Makefile", "Makefile"),
        ("sub/dir/GNUmakefile", "Makefile"),
        ("Dockerfile", "Dockerfile"),
        ("CMakeLists.txt", "CMake"),
        ("Rakefile", "Ruby"),
        ("Gemfile", "Ruby"),
        ("BUILD", "Starlark"),
        ("pkg/BUILD.bazel", "Starlark"),
        ("home/.bashrc", "Shell"),
        ("requirements.txt", "Pip Requirements"),
    ],
)
def test_filename_rule(path: str, lang: str) -> None:
    assert _detect(path)[0] == lang
    assert _detect(path)[2] == "filename"


@pytest.mark.parametrize(
    ("path", "lang"),
    [
        ("a/b/main.py", "Python"),
        ("x.PY", "Python"),
        ("lib.rs", "Rust"),
        ("app.tsx", "TSX"),
        ("analysis.R", "R"),
        ("analysis.r", "R"),
        # Linguist matches extensions case-insensitively: .C/.H are C (not the old Unix C++)
        ("widget.C", "C"),
        ("widget.c", "C"),
        ("build.gradle.kts", "Gradle Kotlin DSL"),
        ("main.tf", "HCL"),
        ("README.md", "Markdown"),
        ("nb.ipynb", "Jupyter Notebook"),
        (".prettierrc.json", "JSON"),
        ("CMakeLists.txt.bak", None),
    ],
)
def test_extension_rule_and_case(path: str, lang: str | None) -> None:
    got, _, method = _detect(path)
    if lang is None:
        assert (got, method) == (schema.UNKNOWN, schema.UNKNOWN)
    else:
        assert (got, method) == (lang, "extension")


def test_dotfile_without_extension_is_not_an_extension() -> None:
    assert _detect(".hidden")[0] == schema.UNKNOWN


@pytest.mark.parametrize(
    ("first_line", "lang"),
    [
        ("#!/usr/bin/python", "Python"),
        ("#!/usr/bin/env python3", "Python"),
        ("#!/usr/bin/env python3.11", "Python"),
        ("#!/usr/local/bin/python2.7 -u", "Python"),
        ("#! /bin/sh", "Shell"),
        ("#!/bin/bash -euo pipefail", "Shell"),
        ("#!/usr/bin/env zsh", "Shell"),
        ("#!/usr/bin/env node", "JavaScript"),
        ("#!/usr/bin/env ruby", "Ruby"),
        ("#!/usr/bin/perl -w", "Perl"),
        ("#!/usr/bin/env perl5.36", "Perl"),
        ("#!/usr/bin/php", "PHP"),
        ("#!/usr/bin/env lua5.4", "Lua"),
        ("#!/usr/bin/env Rscript", "R"),
        ("#!/usr/bin/env -S deno run --allow-net", "TypeScript"),
        ("#!/usr/bin/env -S python3 -u", "Python"),
        ("#!/usr/bin/env -Spython3", "Python"),
        ("#!/usr/bin/env -u HOME bash", "Shell"),
        ("#!/usr/bin/env LC_ALL=C awk -f", "Awk"),
        ("\ufeff#!/bin/sh", "Shell"),
    ],
)
def test_shebang_rule(first_line: str, lang: str) -> None:
    assert _detect("bin/tool", first_line + "\nbody\n") == (
        lang,
        languages.kind_of(lang),
        "shebang",
    )


def test_shebang_ranks_above_the_extension_as_in_linguist() -> None:
    assert _detect("tool.rb", "#!/bin/sh\n")[0:3:2] == ("Shell", "shebang")
    assert _detect("tool.rb", "puts 1\n")[0:3:2] == ("Ruby", "extension")
    assert _detect("tool.cgi", "#!/usr/bin/perl\n")[0:3:2] == ("Perl", "shebang")


def test_shebang_can_be_switched_off() -> None:
    assert _detect("bin/tool", "#!/bin/sh\n", shebang=False)[0] == schema.UNKNOWN


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("int add(int a, int b);\n", "C"),
        ("namespace geo { int area(); }\n", "C++"),
        ("template<typename T> T twice(T x);\n", "C++"),
        ("#include <vector>\nstd::vector<int> v();\n", "C++"),
        ("struct S {\npublic:\n  int x;\n};\n", "C++"),
        ("@interface Foo : NSObject\n@end\n", "Objective-C"),
        ("#import <Foundation/Foundation.h>\n", "Objective-C"),
    ],
)
def test_h_content_rule(text: str, lang: str) -> None:
    assert _detect("include/x.h", text) == (lang, "code", "content")


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ('#import "Foo.h"\n@implementation Foo\n@end\n', "Objective-C"),
        ("#include <stdio.h>\n", "Objective-C"),
        ("function y = square(x)\n  y = x.^2;\nend\n", "MATLAB"),
    ],
)
def test_m_content_rule(text: str, lang: str) -> None:
    # Linguist's .m heuristics decide, or (no heuristic matched) its classifier does
    got, kind, method = _detect("src/x.m", text)
    assert (got, kind) == (lang, "code") and method in ("content", "classifier")


def test_unknown_keeps_the_existing_kind() -> None:
    assert _detect("data.weird", "x") == (schema.UNKNOWN, "data", schema.UNKNOWN)
    result = langid.run(_docs(("notes.weird", "x"), kind="docs"), LangidConfig())
    assert result.table.column(schema.KIND).to_pylist() == ["docs"]


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("a.py", "code"),
        ("a.md", "docs"),
        ("a.rst", "docs"),
        ("a.txt", "docs"),
        ("a.tex", "docs"),
        ("a.ipynb", "notebook"),
        ("a.json", "data"),
        ("a.csv", "data"),
        ("a.yaml", "config"),
        ("a.toml", "config"),
        ("a.ini", "config"),
        ("a.xml", "config"),
    ],
)
def test_kinds(path: str, kind: str) -> None:
    assert _detect(path)[1] == kind


def test_stage_annotates_every_row_and_drops_none() -> None:
    table = _docs(
        ("Makefile", "all:\n"),
        ("src/main.go", "package main\n"),
        ("bin/run", "#!/usr/bin/env python3\nprint(1)\n"),
        ("inc/a.h", "class A {};\n"),
        ("blob.xyz", "\x00\x01"),
        ("README.md", "# hi\n"),
    )
    result = langid.run(table, LangidConfig())
    out = result.table
    assert out.num_rows == table.num_rows
    assert result.dropped.num_rows == 0
    assert out.column(schema.ID).to_pylist() == table.column(schema.ID).to_pylist()
    assert out.column(schema.LANG).to_pylist() == [
        "Makefile",
        "Go",
        "Python",
        "C++",
        schema.UNKNOWN,
        "Markdown",
    ]
    assert out.column(LANG_METHOD).to_pylist() == [
        "filename",
        "extension",
        "shebang",
        "content",
        "unknown",
        "extension",
    ]
    assert out.column(schema.KIND).to_pylist() == ["code", "code", "code", "code", "code", "docs"]
    assert out.schema.field(LANG_METHOD).type == langid.STAGE_COLUMNS[LANG_METHOD]
    assert out.schema.field(schema.LANG) == schema.DOC_SCHEMA.field(schema.LANG)
    assert set(out.column(LANG_METHOD).to_pylist()) <= set(LANG_METHODS)


def test_stage_on_an_empty_table() -> None:
    out = langid.run(_docs(), LangidConfig()).table
    assert out.num_rows == 0
    assert LANG_METHOD in out.column_names


def test_rerun_replaces_lang_method_instead_of_adding_it() -> None:
    once = langid.run(_docs(("a.py", "")), LangidConfig()).table
    twice = langid.run(once, LangidConfig()).table
    assert twice.column_names == once.column_names


def test_table_covers_many_linguist_languages_with_valid_kinds() -> None:
    names = {lang.name for lang in languages.LANGUAGES}
    assert len(names) == len(languages.LANGUAGES) >= 50
    for required in (
        "Python",
        "C++",
        "C#",
        "Objective-C",
        "Shell",
        "Jupyter Notebook",
        "Protocol Buffer",
        "Visual Basic .NET",
        "Vim Script",
        "Emacs Lisp",
        "HCL",
    ):
        assert required in names
    assert all(lang.kind in schema.KINDS for lang in languages.LANGUAGES)
    assert all(ext.startswith(".") for lang in languages.LANGUAGES for ext in lang.extensions)


def test_languages_doctests() -> None:
    assert doctest.testmod(languages).failed == 0
    assert doctest.testmod(langid).failed == 0

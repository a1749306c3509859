"""The language table: GitHub Linguist names, with extensions, file names and interpreters.

This is data plus a few lookups, kept free of the stage so that a later
Linguist/enry-based detector can fall back on it. Names are Linguist's canonical
spellings (``languages.yml``), so per-language reports line up with GitHub's.

Where Linguist lists one extension under several languages (``.pl`` Perl/Prolog,
``.fs`` F#/GLSL, ``.cls`` TeX/Apex, ``.f`` Fortran/Forth ...) the table picks the
language that dominates code corpora; only ``.h`` and ``.m`` get a content check
(see :func:`resolve_by_content`), because both sides are common there.

Extensions are written lowercase and match case-insensitively (``.R`` and ``.r``
are both R). An extension written with an uppercase letter matches only that exact
spelling and wins over the lowercase one: ``.C`` and ``.H`` are C++ while ``.c``
and ``.h`` are C (the old Unix convention Linguist also follows).

``kind`` is one of ``schema.KINDS``:

- ``code``: programming languages, plus the markup, style and template languages
  people write by hand as source (HTML, CSS, Vue, Jinja ...) and build files
  (Makefile, Dockerfile, CMake, Starlark);
- ``docs``: prose (Markdown, reStructuredText, AsciiDoc, TeX, Text ...);
- ``notebook``: Jupyter;
- ``data``: data files (JSON, CSV, TSV, SVG, diffs);
- ``config``: configuration (YAML, TOML, INI, XML, HCL, ignore lists ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from codecorpus import schema


@dataclass(frozen=True)
class Language:
    name: str
    kind: str
    extensions: tuple[str, ...] = ()
    filenames: tuple[str, ...] = ()
    interpreters: tuple[str, ...] = ()


def _lang(
    name: str,
    kind: str,
    extensions: str = "",
    filenames: str = "",
    interpreters: str = "",
) -> Language:
    """Table-row shorthand: each list is one space-separated string."""
    return Language(
        name, kind, tuple(extensions.split()), tuple(filenames.split()), tuple(interpreters.split())
    )


LANGUAGES: tuple[Language, ...] = (
    # --- programming languages ---------------------------------------------------------
    _lang(
        "Python",
        "code",
        ".py .pyw .pyi .pyt .gyp .gypi .wsgi",
        "SConstruct SConscript wscript BUCK .pythonrc",
        "python python2 python3 pypy pypy3 python-dbg",
    ),
    _lang("Cython", "code", ".pyx .pxd .pxi"),
    _lang(
        "JavaScript",
        "code",
        ".js .mjs .cjs .jsx .jsm .es6",
        "Jakefile",
        "node nodejs qjs rhino d8 v8 gjs",
    ),
    _lang("TypeScript", "code", ".ts .mts .cts", "", "deno ts-node tsx"),
    _lang("TSX", "code", ".tsx"),
    _lang("C", "code", ".c .h .cats .idc", "", "tcc"),
    _lang(
        "C++",
        "code",
        ".cpp .cc .cxx .c++ .cp .cppm .ixx .hpp .hh .hxx .h++ .ipp .tpp .txx .inl .tcc .C .H",
    ),
    _lang("Objective-C", "code", ".m"),
    _lang("Objective-C++", "code", ".mm"),
    _lang("MATLAB", "code", ".matlab"),
    _lang("CUDA", "code", ".cu .cuh"),
    _lang("C#", "code", ".cs .csx .cake"),
    _lang("F#", "code", ".fs .fsi .fsx"),
    _lang("Visual Basic .NET", "code", ".vb .vbhtml"),
    _lang("VBScript", "code", ".vbs"),
    _lang("Java", "code", ".java .jav .jsh"),
    _lang("Kotlin", "code", ".kt .kts .ktm", "", "kotlin"),
    _lang("Scala", "code", ".scala .sc .sbt", "", "scala"),
    _lang("Groovy", "code", ".groovy .gvy .gy .gsh .grt .gtpl", "Jenkinsfile", "groovy"),
    _lang("Gradle", "code", ".gradle"),
    _lang("Gradle Kotlin DSL", "code", ".gradle.kts"),
    _lang("Clojure", "code", ".clj .cljs .cljc .cljx .edn", "", "clojure bb"),
    _lang("Go", "code", ".go"),
    _lang("Rust", "code", ".rs", "", "rust-script"),
    _lang("Swift", "code", ".swift", "", "swift"),
    _lang("Dart", "code", ".dart", "", "dart"),
    _lang("Zig", "code", ".zig .zon"),
    _lang("Nim", "code", ".nim .nims .nimble", "", "nim"),
    _lang("D", "code", ".d .di", "", "rdmd"),
    _lang("Crystal", "code", ".cr", "", "crystal"),
    _lang(
        "Ruby",
        "code",
        ".rb .rbw .rake .gemspec .podspec .ru .builder .jbuilder .thor",
        "Rakefile Gemfile Vagrantfile Guardfile Podfile Brewfile Capfile .irbrc .pryrc",
        "ruby macruby rake jruby rbx",
    ),
    _lang("PHP", "code", ".php .phtml .php3 .php4 .php5 .phps .phpt", "", "php"),
    _lang("Perl", "code", ".pl .pm .plx .psgi", "cpanfile", "perl cperl"),
    _lang("Raku", "code", ".raku .rakumod .p6 .pm6", "", "raku perl6 rakudo"),
    _lang("Lua", "code", ".lua .luau .rockspec", "", "lua luajit"),
    _lang("R", "code", ".r .rprofile", ".Rprofile", "Rscript"),
    _lang("Julia", "code", ".jl", "", "julia"),
    _lang("Haskell", "code", ".hs .hs-boot .hsc", "", "runhaskell runghc"),
    _lang("Literate Haskell", "code", ".lhs"),
    _lang("OCaml", "code", ".ml .mli .mll .mly", "", "ocaml ocamlrun"),
    _lang("Elixir", "code", ".ex .exs", "mix.lock", "elixir"),
    _lang("Erlang", "code", ".erl .hrl .escript .xrl .yrl", "rebar.config", "escript"),
    _lang("Elm", "code", ".elm"),
    _lang("Common Lisp", "code", ".lisp .lsp .asd", "", "sbcl clisp ecl"),
    _lang("Scheme", "code", ".scm .ss .sld .sls", "", "guile chicken csi racket-scheme"),
    _lang("Racket", "code", ".rkt .rktl .rktd", "", "racket"),
    _lang("Emacs Lisp", "code", ".el .emacs", ".emacs _emacs .spacemacs .abbrev_defs", ""),
    _lang("Vim Script", "code", ".vim .vimrc .vmb", ".vimrc _vimrc .gvimrc _gvimrc .exrc", ""),
    _lang("Fortran", "code", ".f .f77 .for .fpp"),
    _lang("Fortran Free Form", "code", ".f90 .f95 .f03 .f08"),
    _lang("Pascal", "code", ".pas .dpr .lpr .pp", "", "instantfpc"),
    _lang("Ada", "code", ".adb .ads .ada"),
    _lang("COBOL", "code", ".cob .cbl .ccp .cobol .cpy"),
    _lang("Assembly", "code", ".asm .nasm .a51"),
    _lang("Unix Assembly", "code", ".s"),
    _lang("Verilog", "code", ".v .veo"),
    _lang("SystemVerilog", "code", ".sv .svh .vh"),
    _lang("VHDL", "code", ".vhd .vhdl .vhf .vhi .vho .vhs .vht .vhw"),
    _lang("Solidity", "code", ".sol"),
    _lang("GLSL", "code", ".glsl .vert .frag .geom .comp .tesc .tese .vsh .fsh"),
    _lang("HLSL", "code", ".hlsl .hlsli .fx .fxh"),
    _lang("WebAssembly", "code", ".wat .wast"),
    _lang("Haxe", "code", ".hx .hxsl"),
    _lang("Smalltalk", "code", ".st"),
    _lang("Prolog", "code", ".prolog", "", "swipl"),
    _lang("Tcl", "code", ".tcl .tm .itk", "", "tclsh wish"),
    _lang("Awk", "code", ".awk .gawk .mawk .nawk", "", "awk gawk mawk nawk"),
    _lang(
        "Shell",
        "code",
        ".sh .bash .zsh .ksh .command .bats .tmux",
        ".bashrc .bash_profile .bash_login .bash_logout .bash_aliases .bash_functions "
        ".zshrc .zprofile .zshenv .zlogin .zlogout .profile .login .kshrc .cshrc "
        "PKGBUILD APKBUILD gradlew configure",
        "sh bash zsh ksh mksh dash ash",
    ),
    _lang("Tcsh", "code", ".tcsh .csh", "", "tcsh csh"),
    _lang("fish", "code", ".fish", "", "fish"),
    _lang("PowerShell", "code", ".ps1 .psm1 .psd1", "", "pwsh powershell"),
    _lang("Batchfile", "code", ".bat .cmd"),
    _lang("SQL", "code", ".sql .ddl .dml"),
    _lang("PLpgSQL", "code", ".pgsql .plpgsql"),
    _lang("GraphQL", "code", ".graphql .gql .graphqls"),
    _lang("Protocol Buffer", "code", ".proto"),
    _lang("Thrift", "code", ".thrift"),
    _lang("Cap'n Proto", "code", ".capnp"),
    _lang("Nix", "code", ".nix"),
    _lang(
        "Starlark",
        "code",
        ".bzl .star",
        "BUILD BUILD.bazel WORKSPACE WORKSPACE.bazel MODULE.bazel Tiltfile",
    ),
    _lang(
        "Makefile",
        "code",
        ".mk .mak .make",
        "Makefile makefile GNUmakefile Makefile.am Makefile.in Makefile.inc Kbuild",
        "make",
    ),
    _lang("CMake", "code", ".cmake .cmake.in", "CMakeLists.txt"),
    _lang("Meson", "code", "", "meson.build meson_options.txt meson.options"),
    _lang("Ninja", "code", ".ninja"),
    _lang("Dockerfile", "code", ".dockerfile .containerfile", "Dockerfile Containerfile"),
    _lang("Just", "code", ".just", "justfile Justfile .justfile"),
    # --- markup, style and templates (written as source) ---------------------------------
    _lang("HTML", "code", ".html .htm .xhtml"),
    _lang("CSS", "code", ".css"),
    _lang("SCSS", "code", ".scss"),
    _lang("Sass", "code", ".sass"),
    _lang("Less", "code", ".less"),
    _lang("Stylus", "code", ".styl"),
    _lang("Vue", "code", ".vue"),
    _lang("Svelte", "code", ".svelte"),
    _lang("Astro", "code", ".astro"),
    _lang("Jinja", "code", ".jinja .jinja2 .j2"),
    _lang("HTML+ERB", "code", ".erb .html.erb .rhtml"),
    _lang("Handlebars", "code", ".hbs .handlebars"),
    _lang("Mustache", "code", ".mustache"),
    _lang("Twig", "code", ".twig"),
    _lang("Blade", "code", ".blade .blade.php"),
    _lang("Smarty", "code", ".tpl"),
    _lang("Pug", "code", ".pug .jade"),
    # --- prose ---------------------------------------------------------------------------
    _lang("Markdown", "docs", ".md .markdown .mdown .mkd .mkdn .mdwn .ronn", "contents.lr"),
    _lang("MDX", "docs", ".mdx"),
    _lang("reStructuredText", "docs", ".rst .rest .rst.txt .rest.txt"),
    _lang("AsciiDoc", "docs", ".adoc .asciidoc"),
    _lang("Org", "docs", ".org"),
    _lang("RMarkdown", "docs", ".rmd .qmd"),
    _lang("TeX", "docs", ".tex .ltx .sty .cls .dtx .ins .bbx .cbx .toc"),
    _lang("BibTeX", "docs", ".bib .bibtex"),
    _lang("Texinfo", "docs", ".texinfo .texi .txi"),
    _lang("Pod", "docs", ".pod"),
    _lang("Roff", "docs", ".roff .man .mdoc .1 .2 .3 .4 .5 .6 .7 .8 .9"),
    _lang(
        "Text",
        "docs",
        ".txt .text",
        "README LICENSE LICENCE COPYING COPYRIGHT NOTICE AUTHORS CONTRIBUTORS INSTALL NEWS "
        "CHANGES THANKS TODO HISTORY readme.1st read.me",
    ),
    # --- notebooks -----------------------------------------------------------------------
    _lang("Jupyter Notebook", "notebook", ".ipynb"),
    # --- data ----------------------------------------------------------------------------
    _lang(
        "JSON",
        "data",
        ".json .geojson .jsonl .ndjson .topojson .har .webmanifest .avsc",
        ".arcconfig .watchmanconfig composer.lock mcmod.info flake.lock Pipfile.lock",
    ),
    _lang(
        "JSON with Comments",
        "config",
        ".jsonc .code-workspace .sublime-settings",
        ".babelrc .eslintrc.json .jshintrc .jscsrc tsconfig.json jsconfig.json "
        "devcontainer.json .devcontainer.json",
    ),
    _lang("JSON5", "config", ".json5"),
    _lang("CSV", "data", ".csv"),
    _lang("TSV", "data", ".tsv"),
    _lang("SVG", "data", ".svg"),
    _lang("Diff", "data", ".diff .patch"),
    # --- configuration -------------------------------------------------------------------
    _lang(
        "YAML",
        "config",
        ".yml .yaml .yaml-tmlanguage",
        ".clang-format .clang-tidy .gemrc .clangd CITATION.cff glide.lock yarn.lock",
    ),
    _lang("TOML", "config", ".toml", "Cargo.lock Pipfile poetry.lock pdm.lock uv.lock Gopkg.lock"),
    _lang(
        "INI",
        "config",
        ".ini .cfg .cnf .prefs",
        ".flake8 .pylintrc .coveragerc .buckconfig pylintrc buildozer.spec",
    ),
    _lang("Java Properties", "config", ".properties"),
    _lang(
        "XML",
        "config",
        ".xml .xsd .xsl .xslt .csproj .vbproj .fsproj .vcxproj .props .targets .nuspec "
        ".resx .wsdl .xaml .xib .storyboard .iml .rss .atom .pom .kml .gpx .ui .qrc",
        ".classpath .project .cproject App.config Web.config packages.config",
    ),
    _lang("XML Property List", "config", ".plist .entitlements"),
    _lang("HCL", "config", ".hcl .tf .tfvars .nomad .workflow"),
    _lang(
        "Ignore List",
        "config",
        ".gitignore .dockerignore .npmignore .eslintignore",
        ".gitignore .dockerignore .npmignore .eslintignore .prettierignore .hgignore "
        ".helmignore .vscodeignore .cvsignore .bzrignore",
    ),
    _lang("Git Attributes", "config", "", ".gitattributes"),
    _lang("Git Config", "config", ".gitconfig", ".gitconfig .gitmodules"),
    _lang("EditorConfig", "config", ".editorconfig", ".editorconfig"),
    _lang("Dotenv", "config", ".env", ".env .env.example .env.local .env.sample .env.template"),
    _lang(
        "Pip Requirements",
        "config",
        "",
        "requirements.txt requirements-dev.txt requirements-test.txt constraints.txt "
        "dev-requirements.txt test-requirements.txt",
    ),
    _lang("Go Module", "config", "", "go.mod go.work"),
    _lang("Go Checksums", "data", "", "go.sum go.work.sum"),
    _lang("Nginx", "config", ".nginx .nginxconf .vhost", "nginx.conf"),
    _lang("ApacheConf", "config", ".apacheconf", ".htaccess apache2.conf httpd.conf"),
)

BY_NAME: dict[str, Language] = {lang.name: lang for lang in LANGUAGES}


def _index(attribute: str, keep: Callable[[str], bool] = lambda key: True) -> dict[str, str]:
    """Key -> language name; a key listed twice is a table bug, caught at import."""
    table: dict[str, str] = {}
    for lang in LANGUAGES:
        for key in getattr(lang, attribute):
            if not keep(key):
                continue
            if key in table:
                raise AssertionError(
                    f"{attribute} {key!r} is listed for {table[key]} and {lang.name}"
                )
            table[key] = lang.name
    return table


EXTENSIONS: dict[str, str] = _index("extensions", keep=lambda ext: ext == ext.lower())
"""Lowercase extension (with its dot) -> language; matched case-insensitively."""

EXACT_EXTENSIONS: dict[str, str] = _index("extensions", keep=lambda ext: ext != ext.lower())
"""Extensions whose case matters (``.C``, ``.H``); checked before :data:`EXTENSIONS`."""

FILENAMES: dict[str, str] = _index("filenames")
"""Exact base names, as Linguist matches them (``Makefile`` and ``makefile`` both listed)."""

INTERPRETERS: dict[str, str] = _index("interpreters")
"""``#!`` program names; versioned names (``python3.11``) are stripped to these."""

CONTENT_CHECKED_EXTENSIONS = frozenset({".h", ".m"})
"""Extensions :func:`resolve_by_content` decides from the text."""

_CPP_MARKERS = ("class ", "namespace ", "template<", "template <", "std::", "public:")
_OBJC_MARKERS = ("@interface", "@implementation", "@protocol", "#import")
_OBJC_M_MARKERS = ("@interface", "@implementation", "#import", "#include")
_CONTENT_SCAN_CHARS = 65536
"""Markers appear near the top of a file; scanning a prefix keeps huge headers cheap."""


def kind_of(language: str, default: str = "data") -> str:
    lang = BY_NAME.get(language)
    return lang.kind if lang is not None else default


def language_from_filename(basename: str) -> str | None:
    return FILENAMES.get(basename)


def extension_candidates(basename: str) -> list[str]:
    """Suffixes of ``basename`` from its first dot on, longest first.

    A leading dot marks a hidden file, not an extension (``.bashrc`` has none).

    >>> extension_candidates("view.html.erb")
    ['.html.erb', '.erb']
    >>> extension_candidates(".eslintrc.json")
    ['.json']
    >>> extension_candidates("Makefile")
    []
    """
    out = []
    start = basename.find(".", 1)
    while start != -1:
        if start < len(basename) - 1:
            out.append(basename[start:])
        start = basename.find(".", start + 1)
    return out


def language_from_extension(basename: str) -> str | None:
    """Language of the longest known extension; ``.h``/``.m`` give their table default.

    Callers that can read the text should check :data:`CONTENT_CHECKED_EXTENSIONS`
    first and use :func:`resolve_by_content` instead.
    """
    for ext in extension_candidates(basename):
        lang = EXACT_EXTENSIONS.get(ext) or EXTENSIONS.get(ext.lower())
        if lang is not None:
            return lang
    return None


def content_checked_extension(basename: str) -> str | None:
    """``.h`` or ``.m`` when that is the file's extension, else None.

    Case matters: ``.H`` is C++ by its exact-case entry and needs no check.
    """
    dot = basename.rfind(".")
    ext = basename[dot:] if dot > 0 else ""
    return ext if ext in CONTENT_CHECKED_EXTENSIONS else None


def resolve_by_content(extension: str, text: str) -> str:
    """Decide ``.h`` (C, C++ or Objective-C) and ``.m`` (Objective-C or MATLAB) by markers.

    Objective-C markers are checked before C++ ones for ``.h``: ``@interface`` is
    unambiguous, while ``class `` also turns up in Objective-C comments.

    >>> resolve_by_content(".h", "namespace x { int f(); }")
    'C++'
    >>> resolve_by_content(".h", "@interface Foo : NSObject\\n@end")
    'Objective-C'
    >>> resolve_by_content(".h", "int f(void);")
    'C'
    >>> resolve_by_content(".m", "function y = f(x)\\n  y = x;\\nend")
    'MATLAB'
    """
    head = text[:_CONTENT_SCAN_CHARS]
    if extension == ".h":
        if any(marker in head for marker in _OBJC_MARKERS):
            return "Objective-C"
        if any(marker in head for marker in _CPP_MARKERS):
            return "C++"
        return "C"
    if extension == ".m":
        if any(marker in head for marker in _OBJC_M_MARKERS):
            return "Objective-C"
        return "MATLAB"
    raise ValueError(f"no content rule for {extension!r}: add it to CONTENT_CHECKED_EXTENSIONS")


_VERSION_SUFFIX = re.compile(r"[0-9][0-9.]*$")
_ENV_OPTIONS_WITH_ARGUMENT = frozenset({"-u", "--unset", "-C", "--chdir", "-P"})


def shebang_interpreter(first_line: str) -> str | None:
    """The program a ``#!`` line runs, as a bare name; ``env`` and its options are skipped.

    Handles ``#!/usr/bin/env -S python3 -u`` (``-S`` splits its argument, which the
    whitespace split already did), ``env VAR=1 prog`` and ``env -u VAR prog``.

    >>> shebang_interpreter("#!/usr/bin/env -S python3.11 -u")
    'python3.11'
    >>> shebang_interpreter("#! /bin/bash -e")
    'bash'
    >>> shebang_interpreter("import os") is None
    True
    """
    line = first_line.lstrip("\ufeff")
    if not line.startswith("#!"):
        return None
    words = line[2:].split()
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    if program != "env":
        return program or None
    rest = iter(words[1:])
    for word in rest:
        if word in _ENV_OPTIONS_WITH_ARGUMENT:
            next(rest, None)
        elif word.startswith("-S") and len(word) > 2:
            return word[2:].rsplit("/", 1)[-1]
        elif word.startswith("-") or "=" in word:
            continue
        else:
            return word.rsplit("/", 1)[-1]
    return None


def language_from_shebang(first_line: str) -> str | None:
    """Language of a ``#!`` line; ``python3.11`` / ``perl5`` fall back to ``python`` / ``perl``.

    >>> language_from_shebang("#!/usr/bin/env python3.11")
    'Python'
    >>> language_from_shebang("#!/usr/bin/env Rscript")
    'R'
    """
    program = shebang_interpreter(first_line)
    if program is None:
        return None
    lang = INTERPRETERS.get(program)
    if lang is None:
        lang = INTERPRETERS.get(_VERSION_SUFFIX.sub("", program))
    return lang


assert all(lang.kind in schema.KINDS for lang in LANGUAGES), "every kind must be in schema.KINDS"

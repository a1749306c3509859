"""Language detection: Linguist's strategies through go-enry, magika for content alone.

``enry.get_language`` runs GitHub Linguist's strategy chain (modeline, file name,
shebang, extension, content heuristics for ambiguous extensions such as ``.h``,
``.m``, ``.pl``, ``.ts``, ``.v``, ``.inc``, ``.cls``, ``.r``, then the Bayesian
classifier) with Linguist's own data, so tags carry Linguist's canonical names.
``lang_method`` names the strategy that decided: the first single strategy, in
Linguist's order, that agrees with the chain's answer (``classifier`` if none).

When the chain has no answer (an extensionless file without a shebang, an
unknown extension), the bytes alone decide (:func:`combine`): magika's model (shipped
in its wheel; ONNX on CPU; labels mapped onto Linguist names) where it is sure or reads
plain text, else codecorpus's content model (:mod:`codecorpus.langid.content_model`,
``content_model``) where its margin is enough, else magika above ``magika_min_score``.
Where Linguist's classifier picks, for an ambiguous extension, a language the content
model was never shown (M for Octave's ``.m`` files), the model chooses among the
candidates it knows. codecorpus's own table (``languages.py``) is the last
fallback (``table``). Everything runs offline.

A file whose extension Linguist does not list gets no *programming* language from
magika or the content model (unless ``magika_unlisted_code``): Linguist names none there (its classifier
only chooses among the extension's candidates, and there are none), and a real Haskell
or Python file would carry one of the extensions Linguist lists for it. Such files are
data or small DSLs that merely look like code: the standard library's 143 ``.decTest``
files (decimal test vectors with ``--`` comments) are Haskell to magika at scores up to
0.98, f2py's ``.pyf`` signatures Fortran, SystemTap's ``.stp`` Awk or Swift. Magika's data,
markup and prose labels (INI, YAML, CSV, Markdown) are kept there, and files without
any extension get every magika label. Per-file guesses are then reconciled per repository
and extension (:mod:`codecorpus.langid.vote`).
"""

from __future__ import annotations

import functools
from typing import Any

import enry
import enry.definitions as enry_lib

from codecorpus import schema
from codecorpus.langid import content_model, languages

_HEAD_BYTES = 16 * 1024
"""Content the heuristics and the classifier see. Linguist reads the whole blob; the
markers its heuristics look for (includes, ``@interface``, ``use strict``) sit at the
top, and 16 KiB bounds the cost of Go's regexes on large files."""

MAGIKA_TO_LINGUIST = {
    "asm": "Assembly", "awk": "Awk", "batch": "Batchfile", "c": "C", "clojure": "Clojure",
    "cmake": "CMake", "cobol": "COBOL", "coffeescript": "CoffeeScript", "cpp": "C++", "cs": "C#",
    "css": "CSS", "csv": "CSV", "dart": "Dart", "diff": "Diff", "dockerfile": "Dockerfile",
    "elixir": "Elixir", "erb": "HTML+ERB", "erlang": "Erlang", "fortran": "Fortran", "go": "Go",
    "gradle": "Gradle", "groovy": "Groovy", "haskell": "Haskell", "hcl": "HCL", "html": "HTML",
    "ini": "INI", "ipynb": "Jupyter Notebook", "java": "Java", "javascript": "JavaScript",
    "jinja": "Jinja", "json": "JSON", "jsonl": "JSON", "julia": "Julia", "kotlin": "Kotlin",
    "latex": "TeX", "lisp": "Common Lisp", "lua": "Lua", "makefile": "Makefile",
    "markdown": "Markdown", "matlab": "MATLAB", "objectivec": "Objective-C", "ocaml": "OCaml",
    "pascal": "Pascal", "perl": "Perl", "php": "PHP", "powershell": "PowerShell", "prolog": "Prolog",
    "proto": "Protocol Buffer", "python": "Python", "r": "R", "rst": "reStructuredText",
    "ruby": "Ruby", "rust": "Rust", "scala": "Scala", "scss": "SCSS", "shell": "Shell", "sql": "SQL",
    "solidity": "Solidity", "svg": "SVG", "swift": "Swift", "tcl": "Tcl", "toml": "TOML",
    "tsv": "TSV", "twig": "Twig", "typescript": "TypeScript", "vba": "VBA",
    "verilog": "Verilog", "vhdl": "VHDL", "vue": "Vue", "xml": "XML", "yaml": "YAML", "zig": "Zig",
    "bazel": "Starlark", "gemfile": "Ruby", "gemspec": "Ruby", "textproto": "Protocol Buffer Text Format",
    "smali": "Smali", "handlebars": "Handlebars", "autohotkey": "AutoHotkey", "m4": "M4",
}
_ENRY_KIND = {"programming": "code", "markup": "code", "prose": "docs", "data": "data"}
_MODELINE_HINTS = ("vim:", "vi:", "ex:", "-*-")


def basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def detect(path: str, text: str, *, magika: bool = True, magika_min_score: float = 0.5,
           shebang: bool = True, magika_unlisted_code: bool = False,
           use_content_model: bool = True) -> tuple[str, str]:
    """(Linguist language or ``unknown``, lang_method) of one file.

    >>> detect("src/app/main.py", "import os\\n")
    ('Python', 'extension')
    >>> detect("include/vec.h", "#include <vector>\\nnamespace a { class B {}; }\\n")
    ('C++', 'content')
    >>> detect("bin/tool", "#!/usr/bin/env python3\\nprint(1)\\n")
    ('Python', 'shebang')
    """
    name = basename(path)
    data = text[:_HEAD_BYTES].encode("utf-8", "surrogatepass")
    if not shebang and data.startswith(b"#!"):
        data = data.split(b"\n", 1)[-1]
    fast = _fast_extension(name, data)
    if fast is not None:
        return fast, "extension"
    if _plain_ambiguous(name, data):
        # Linguist's heuristics decide before its classifier: run them once, not twice
        by_content = enry.get_language_by_content(name, data).language
        if by_content:
            return by_content, "content"
    lang = enry.get_language(name, data) if name or data else ""
    method = _method(name, data, lang) if lang else schema.UNKNOWN
    if method in _AFTER_SHEBANG and shebang:
        # Linguist ranks the #! line above the extension; enry's parser misses versioned
        # (perl5.36, lua5.4) and env-option (-S, -u) interpreters, which the table reads
        by_table = _table_shebang(text)
        if by_table is not None:
            return by_table, "shebang"
    if method == "classifier":
        revised = _revise_classifier(name, data, lang, use_content_model)
        if revised is not None:
            return revised
    if lang:
        return lang, method
    if (magika or use_content_model) and len(data.strip()) >= MIN_MAGIKA_BYTES:
        guess, how = _content_guess(data, magika, magika_min_score, use_content_model)
        if guess != schema.UNKNOWN and (magika_unlisted_code or not _unlisted_code(name, guess)):
            return guess, how
    return _table(name, text, shebang)


def _revise_classifier(name: str, data: bytes, lang: str, use_content_model: bool) -> tuple[str, str] | None:
    """A better answer than Linguist's classifier's ``lang`` for an ambiguous extension, or None.

    Where it chose a language the content model was never shown (M, MUF, Mercury for a ``.m``
    file), the model, trained on far more files, chooses among the candidates it knows. On
    (almost) no content the classifier is a coin toss: the extension's usual language wins.
    """
    if use_content_model:
        better = _model_among_candidates(name, data, lang)
        if better is not None:
            return better, CONTENT_MODEL_METHOD
    if len(data.strip()) < MIN_CLASSIFIER_BYTES:
        by_ext = languages.language_from_extension(name)
        if by_ext is not None:
            return by_ext, "extension"
    return None


def extension(path: str) -> str:
    """The lowercased last suffix of a path's base name, ``""`` without one.

    >>> extension("Lib/test/decimaltestdata/abs.decTest"), extension("bin/.bashrc"), extension("x.tar.gz")
    ('.dectest', '', '.gz')
    """
    name = basename(path)
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 and dot < len(name) - 1 else ""


@functools.lru_cache(maxsize=4096)
def extension_candidates(ext: str) -> tuple[str, ...]:
    """Every language Linguist lists for an extension (its extension strategy), sorted.

    >>> extension_candidates(".f")
    ('Filebench WML', 'Forth', 'Fortran')
    >>> extension_candidates(".py"), extension_candidates(".dectest")
    (('Python',), ())
    """
    if not ext:
        return ()
    # enry-python 0.2.0 binds go-enry's GetLanguagesByExtension in its library but has no
    # Python wrapper for it (its get_language_by_extension returns the alphabetically first
    # candidate only); the call follows the library's own wrappers (get_languages_by_filename)
    candidates, _keep = enry_lib.prepare_candidates(None)
    found = enry_lib.go_str_slice_to_py(
        enry_lib.lib, enry_lib.lib.GetLanguagesByExtension(f"x{ext}".encode(), b"", 0, candidates)
    )
    return tuple(sorted(found))


def _unlisted_code(name: str, lang: str) -> bool:
    """A programming language guessed for a file whose extension Linguist does not list."""
    ext = extension(name)
    return bool(ext) and not extension_candidates(ext) and enry.get_language_type(lang) == "programming"


def _fast_extension(name: str, data: bytes) -> str | None:
    """The extension's language when Linguist's chain could not say otherwise, else None.

    That is: no modeline hint, no ``#!``, no file-name rule, not an ambiguous extension,
    and enry's extension answer equals codecorpus's table. Skipping the chain there
    (most files: ``.py``, ``.js``, ``.json``) is what keeps langid fast; everything
    else goes through the full chain.
    """
    if not name or "." not in name or data.startswith(b"#!") or _has_modeline_hint(data):
        return None
    ext = name[name.rfind("."):].lower()
    if ambiguous_extension(ext):
        return None
    usual = _by_extension(name)
    if usual is None or enry.get_language_by_filename(name).language:
        return None
    return usual


@functools.lru_cache(maxsize=65536)
def _by_extension(name: str) -> str | None:
    """Extension answer when enry's and the table's agree (cached per base name)."""
    usual = languages.language_from_extension(name)
    return usual if usual is not None and enry.get_language_by_extension(name).language == usual else None


def _plain_ambiguous(name: str, data: bytes) -> bool:
    """An ambiguous extension with no shebang, modeline or file-name rule to outrank it."""
    if extension(name) not in CONTESTED_EXTENSIONS:
        return False
    if data.startswith(b"#!") or _has_modeline_hint(data):
        return False
    return not enry.get_language_by_filename(name).language


def _has_modeline_hint(data: bytes) -> bool:
    head, tail = data[:2048], data[-2048:]
    return any(h.encode() in head or h.encode() in tail for h in _MODELINE_HINTS)


MIN_CLASSIFIER_BYTES = 16
MIN_MAGIKA_BYTES = 32
_AFTER_SHEBANG = ("extension", "content", "classifier", schema.UNKNOWN)


def _table_shebang(text: str) -> str | None:
    text = text.removeprefix("\ufeff")
    if not text.startswith("#!"):
        return None
    return languages.language_from_shebang(text[:1024].partition("\n")[0])


def _method(name: str, data: bytes, lang: str) -> str:
    """Which single Linguist strategy, in Linguist's order, gives the chain's answer."""
    if _has_modeline_hint(data) and (
        enry.get_language_by_modeline(data).language == lang
    ):
        return "modeline"
    if name and enry.get_language_by_filename(name).language == lang:
        return "filename"
    if data.startswith(b"#!") and enry.get_language_by_shebang(data).language == lang:
        return "shebang"
    if name and "." in name:
        ext = name[name.rfind("."):].lower()
        if ext in CONTESTED_EXTENSIONS:
            return "content" if enry.get_language_by_content(name, data).language == lang else "classifier"
        if lang in (enry.get_language_by_extension(name).language, languages.language_from_extension(name)):
            return "extension"
        if enry.get_language_by_content(name, data).language == lang:
            return "content"
    return "classifier"


def ambiguous_extension(ext: str) -> bool:
    """Linguist lists the extension under several languages (``.f``, ``.h``, ``.ml``, ``.rs``, ``.md``):
    no shortcut by extension, its heuristics and then its classifier decide (how
    ``lang_method`` records that: :data:`CONTESTED_EXTENSIONS`).

    >>> ambiguous_extension(".f"), ambiguous_extension(".ml"), ambiguous_extension(".py")
    (True, True, False)
    """
    return len(extension_candidates(ext)) > 1


CONTESTED_EXTENSIONS = frozenset(
    {".h", ".m", ".pl", ".pm", ".t", ".ts", ".v", ".inc", ".cls", ".r", ".fs", ".cs", ".sql",
     ".d", ".l", ".mod", ".pro", ".f", ".for", ".pp", ".php", ".hh", ".ms", ".n", ".sc", ".st"}
)
"""Ambiguous extensions whose candidates are all common in code corpora: the heuristics'
answer is recorded as ``content`` even when it is the extension's usual language. Other
ambiguous extensions (``.md``: Markdown or GCC Machine Description; ``.json``; ``.yml``)
run the same chain, but their usual answer is recorded as ``extension``."""


@functools.lru_cache(maxsize=1)
def _magika() -> Any:
    """magika as it ships (its own ONNX Runtime session): one per process, loaded on first use.
    magika 1.0.3 has no public option for the session's thread pool, so none is set."""
    from magika import Magika

    return Magika()


def _magika_guess(data: bytes, min_score: float) -> str | None:
    """magika's Linguist label when its score reaches ``min_score``."""
    found = magika_label(data)
    return found[0] if found is not None and found[1] >= min_score and found[0] != schema.UNKNOWN else None


def magika_label(data: bytes) -> tuple[str, float] | None:
    """magika's label on the bytes as a Linguist name (``unknown`` for its labels Linguist lacks:
    plain text, binary formats), with its score; None when magika gives no answer."""
    result = _magika().identify_bytes(data)
    if not result.ok:
        return None
    return MAGIKA_TO_LINGUIST.get(str(result.output.label), schema.UNKNOWN), float(result.score)


CONTENT_MODEL_MIN_MARGIN = 0.2
MAGIKA_FIRST_SCORE = 0.8
"""Thresholds of :func:`combine`, chosen by ``bench/langid_train.py --validate`` on the training
packages (held out by package), never on the bench's files."""


def combine(model_lang: str, margin: float, magika: tuple[str, float] | None, min_margin: float,
            magika_first: float, magika_min: float = 0.5) -> tuple[str, str]:
    """(label, method) from the content model's guess (with its margin) and magika's.

    magika first where it is sure (score >= ``magika_first``, ``unknown`` included: plain text),
    or where it reads plain text (``unknown``) above ``magika_min``: extensionless licences and
    wheels' ``RECORD`` files are what the model, trained on code, would call C or CMake; then the model where its margin is at least ``min_margin`` and it names a programming
    language (its prose and data classes, Text, Markdown, JSON, say "not code", and leave the
    answer to magika); then magika above ``magika_min`` (``unknown`` included); else ``unknown``.

    >>> combine("Lua", 0.4, ("JSON", 0.99), 0.2, 0.95), combine("Lua", 0.4, ("SQL", 0.7), 0.2, 0.95)
    (('JSON', 'magika'), ('Lua', 'content_model'))
    >>> combine("Lua", 0.05, ("SQL", 0.7), 0.2, 0.95), combine("Lua", 0.05, None, 0.2, 0.95)
    (('SQL', 'magika'), ('unknown', 'unknown'))
    """
    if magika is not None and magika[1] >= magika_first:
        return magika[0], "magika" if magika[0] != schema.UNKNOWN else schema.UNKNOWN
    if magika is not None and magika[0] == schema.UNKNOWN and magika[1] >= magika_min:
        return schema.UNKNOWN, schema.UNKNOWN  # magika reads text, not code: the model only knows code well
    if margin >= min_margin and enry.get_language_type(model_lang) == "programming":
        return model_lang, CONTENT_MODEL_METHOD
    if magika is not None and magika[1] >= magika_min and magika[0] != schema.UNKNOWN:
        return magika[0], "magika"
    return schema.UNKNOWN, schema.UNKNOWN


CONTENT_MODEL_METHOD = "content_model"


def _model_among_candidates(name: str, data: bytes, lang: str) -> str | None:
    """The content model's pick among an ambiguous extension's candidates, where Linguist's classifier
    picked ``lang``, a language the model does not know, and the model knows two candidates or more."""
    model = content_model.load()
    if lang in model.languages:
        return None
    found = model.predict_among(data, extension_candidates(extension(name)))
    return found[0] if found is not None and found[1] >= CONTENT_MODEL_MIN_MARGIN else None


def _content_guess(data: bytes, use_magika: bool, magika_min_score: float,
                   use_model: bool) -> tuple[str, str]:
    """(label, method) of bytes alone: codecorpus's content model and magika, as :func:`combine` rules."""
    found = magika_label(data) if use_magika else None
    if not use_model:
        if found is not None and found[1] >= magika_min_score and found[0] != schema.UNKNOWN:
            return found[0], "magika"
        return schema.UNKNOWN, schema.UNKNOWN
    model_lang, margin = content_model.load().predict(data)
    return combine(model_lang, margin, found, CONTENT_MODEL_MIN_MARGIN, MAGIKA_FIRST_SCORE, magika_min_score)


def _table(name: str, text: str, shebang: bool) -> tuple[str, str]:
    lang = languages.language_from_filename(name) or languages.language_from_extension(name)
    if lang is not None:
        return lang, "table"
    return schema.UNKNOWN, schema.UNKNOWN


def kind_of(lang: str, default: str) -> str:
    """``schema.KINDS`` value of a language: codecorpus's table first, then Linguist's type."""
    if lang == schema.UNKNOWN:
        return default
    if lang == "Jupyter Notebook":
        return "notebook"
    known = languages.kind_of(lang, default="")
    if known:
        return known
    return _ENRY_KIND.get(enry.get_language_type(lang), default)

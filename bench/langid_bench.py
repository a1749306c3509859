"""langid accuracy and speed on real files this machine holds (not written by codecorpus).

Corpus (ground truth from where a file lives and its unambiguous extension):
installed Python packages (.py/.pyi -> Python, .pyx -> Cython, .c -> C, .cpp/.cc/.hpp -> C++,
.md -> Markdown, .json -> JSON, .html -> HTML), Node's bundled npm (.js/.mjs/.cjs ->
JavaScript, .json, .md), Perl's library (.pm/.pl -> Perl), /usr/include (C headers: ``*.h``
outside c++/ -> C; headers under c++/ with or without ``.h`` -> C++; this is the ambiguous-
extension and extensionless case).

Two modes, per language and overall:
- ``names``: path + content, as the pipeline sees files;
- ``content``: file name hidden (content only).

Peers measured in the same run: codecorpus's previous table-only detector
(``langid.languages``: name, extension, shebang, .h/.m content rules) for ``names``;
Linguist's chain alone (``enry.get_language`` with an empty name) for ``content``.
Speed: files/s of ``langid.detect`` and of the whole langid stage (with tree-sitter's
parse_error_frac) on one table. The machine is shared and loaded: read ratios, not
absolute numbers.

    python bench/langid_bench.py [--per-lang 300]
"""

from __future__ import annotations

import argparse
import hashlib
import site
import sys
import sysconfig
import time
from collections import defaultdict
from pathlib import Path

import enry
import pyarrow as pa

from codecorpus import schema
from codecorpus.config import LangidConfig
from codecorpus.langid import detect as detector
from codecorpus.langid import languages
from codecorpus.langid import stage as langid_stage

MAX_BYTES = 200_000


def _site_dirs() -> list[Path]:
    dirs = {Path(p) for p in site.getsitepackages()} | {Path(sysconfig.get_paths()["purelib"])}
    return sorted(d for d in dirs if d.is_dir())


def _truth(path: Path) -> str | None:
    s = str(path)
    name = path.name
    suffix = path.suffix.lower()
    if s.startswith("/usr/include/"):
        if "/c++/" in s:
            return "C++" if suffix in ("", ".h", ".tcc", ".hpp") else None
        return "C" if suffix == ".h" else None
    if s.startswith("/usr/share/perl"):
        return "Perl" if suffix in (".pm", ".pl") else None
    table = {".py": "Python", ".pyi": "Python", ".pyx": "Cython", ".c": "C", ".cpp": "C++",
             ".cc": "C++", ".hpp": "C++", ".md": "Markdown", ".json": "JSON", ".html": "HTML",
             ".js": "JavaScript", ".mjs": "JavaScript", ".cjs": "JavaScript"}
    if name.endswith(".min.js"):
        return None
    return table.get(suffix)


def collect(per_lang: int) -> list[tuple[str, str, str]]:
    """(path, text, truth) with at most ``per_lang`` files per language, chosen by path hash."""
    roots = [*_site_dirs(), Path("/usr/lib/node_modules"), Path("/usr/share/perl"), Path("/usr/include")]
    by_lang: dict[str, list[tuple[str, Path]]] = defaultdict(list)
    for root in roots:
        if not root.is_dir():
            continue
        for p in root.rglob("*"):
            if p.is_symlink() or not p.is_file():
                continue
            truth = _truth(p)
            if truth is not None:
                by_lang[truth].append((hashlib.sha1(str(p).encode()).hexdigest(), p))
    out = []
    for lang, items in sorted(by_lang.items()):
        items.sort()
        taken = 0
        for _, p in items:
            if taken >= per_lang:
                break
            try:
                data = p.read_bytes()[:MAX_BYTES]
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if not text.strip():
                continue
            out.append((str(p), text, lang))
            taken += 1
    return out


def table_detector(path: str, text: str) -> str:
    """codecorpus's previous detector (the table), as a peer."""
    name = path.rsplit("/", 1)[-1]
    lang = languages.language_from_filename(name)
    if lang is None:
        ext = languages.content_checked_extension(name)
        lang = languages.resolve_by_content(ext, text) if ext else languages.language_from_extension(name)
    if lang is None and text.startswith("#!"):
        lang = languages.language_from_shebang(text.partition("\n")[0])
    return lang or schema.UNKNOWN


def score(files, fn) -> tuple[dict[str, tuple[int, int]], float]:
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    t0 = time.perf_counter()
    for path, text, truth in files:
        got = fn(path, text)
        hits[truth][0] += got == truth
        hits[truth][1] += 1
    secs = time.perf_counter() - t0
    return {k: (v[0], v[1]) for k, v in hits.items()}, len(files) / secs


def _acc(h: dict[str, tuple[int, int]], lang: str | None = None) -> float:
    if lang is not None:
        ok, n = h.get(lang, (0, 0))
        return ok / n if n else float("nan")
    return sum(v[0] for v in h.values()) / max(1, sum(v[1] for v in h.values()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-lang", type=int, default=300)
    args = ap.parse_args()
    t0 = time.perf_counter()
    files = collect(args.per_lang)
    print(f"corpus: {len(files)} files in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    detector.detect("x.py", "x = 1\n")  # load enry, magika lazily below
    detector._magika()

    runs = {
        "names: codecorpus (enry+magika+table)": score(files, lambda p, t: detector.detect(p, t)[0]),
        "names: peer table-only (previous)": score(files, table_detector),
        "content: codecorpus (enry chain, then magika)": score(files, lambda p, t: detector.detect("", t)[0]),
        "content: peer enry alone": score(files, lambda p, t: enry.get_language("", t[:65536].encode()) or "unknown"),
    }
    langs = sorted({truth for _, _, truth in files})
    header = f"{'language':<12}{'files':>6}" + "".join(f"{k.split(': ')[0][:7] + ':' + k.split(': ')[1][:18]:>28}" for k in runs)
    print(header)
    for lang in langs:
        n = runs[next(iter(runs))][0][lang][1]
        print(f"{lang:<12}{n:>6}" + "".join(f"{_acc(h, lang):>28.3f}" for h, _ in runs.values()))
    print(f"{'ALL':<12}{len(files):>6}" + "".join(f"{_acc(h):>28.3f}" for h, _ in runs.values()))
    print(f"{'files/s':<18}" + "".join(f"{fps:>28.0f}" for _, fps in runs.values()))
    names, peer = runs["names: codecorpus (enry+magika+table)"], runs["names: peer table-only (previous)"]
    content, cpeer = runs["content: codecorpus (enry chain, then magika)"], runs["content: peer enry alone"]
    print(f"\nnames   accuracy ratio vs table-only: {_acc(names[0]) / max(_acc(peer[0]), 1e-9):.3f}x; "
          f"speed ratio {names[1] / peer[1]:.3f}x")
    print(f"content accuracy ratio vs enry alone: {_acc(content[0]) / max(_acc(cpeer[0]), 1e-9):.3f}x; "
          f"speed ratio {content[1] / cpeer[1]:.3f}x")
    _stage_speed(files)


def _stage_speed(files) -> None:
    n = len(files)
    texts = [t for _, t, _ in files]
    table = pa.table({
        schema.ID: [str(i) for i in range(n)], schema.SOURCE: ["b"] * n, schema.REPO: ["b"] * n,
        schema.PATH: [p for p, _, _ in files], schema.REVISION: [""] * n, schema.LICENSE: ["x"] * n,
        schema.LANG: [schema.UNKNOWN] * n, schema.KIND: ["code"] * n, schema.TEXT: texts,
        schema.BYTES: [len(t.encode()) for t in texts], schema.CONTENT_HASH: [""] * n,
        schema.ENCODING: ["utf-8"] * n,
    }, schema=schema.DOC_SCHEMA)
    for label, cfg in [("with parse_error_frac", LangidConfig()), ("without tree-sitter", LangidConfig(parse_errors=False))]:
        t0 = time.perf_counter()
        langid_stage.run(table, cfg)
        secs = time.perf_counter() - t0
        mb = sum(table.column(schema.BYTES).to_pylist()) / 1e6
        print(f"langid stage {label}: {n / secs:.0f} files/s, {mb / secs:.1f} MB/s")


if __name__ == "__main__":
    main()

"""langid accuracy on real files this machine holds, with names and on content alone.

Corpus: files nobody wrote for codecorpus, from many sources at once (each a ``source``):
the venv's site-packages (every installed distribution), the system Python's
dist-packages, /usr/share (perl, vim, emacs, cmake, java, javascript ...), /usr/lib
(node's npm, Go's standard library under /usr/lib/go*, tcl, llvm, valgrind ...),
/usr/include, cargo's registry sources (~/.cargo/registry/src) and the JDK's src.zip
when they exist. At most ``--per-lang`` files per language, spread over its sources
(round robin in path-hash order, so no one source dominates), deduplicated by content.

Ground truth, independent of codecorpus's detector: GitHub Linguist's extension map
(its ``languages.yml`` as go-enry ships it) where it lists the file's extension under one
language only. Two ambiguous cases are labelled by where the file lives: ``.h`` headers
under /usr/include are C, except under ``c++/`` and LLVM's C++ API (``llvm-N/``
outside ``llvm-c/``), where they (and extensionless headers) are C++; ``.pm``/``.pl`` under /usr/share/perl* are Perl. Files of other ambiguous or
unlisted extensions, minified JavaScript, empty and non-UTF-8 files are left out.
Accuracy is reported on the 30 *programming* languages (Linguist's type) with the most
files on this machine, per language and over all their sampled files. That is what this
machine holds, not a popularity ranking: Vim Script (vim's runtime) and Perl rank high,
TypeScript or Rust are absent unless some package ships them.

Two modes, of ``codecorpus.langid.detect.detect`` (the per-file chain the stage runs):
- ``named``: path and content, as the pipeline sees files;
- ``content``: the file name replaced by ``fileN`` (content only; a ``#!`` line is content).

Goals: named >= 0.99, content >= 0.90. The confusion pairs (truth -> answer) show where
the misses go. Accuracy does not depend on the machine's load; speed is not measured here.

    python bench/langid_bench.py [--per-lang 200] [--top 30]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import site
import sys
import sysconfig
import time
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import enry

from codecorpus import schema
from codecorpus.langid import detect as detector

MAX_BYTES = 200_000
MIN_BYTES = 16
MIN_FILES = 5
"""A language needs this many sampled files to be scored (a share of 1 or 2 files says little)."""
GOALS = {"named": 0.99, "content": 0.90}


def sources() -> list[tuple[str, Path]]:
    """(source name, root) of every tree this machine holds that the corpus draws from."""
    roots: list[tuple[str, Path]] = []
    for p in sorted({Path(p) for p in site.getsitepackages()} | {Path(sysconfig.get_paths()["purelib"])}):
        roots.append(("venv-site-packages", p))
    roots += [
        ("dist-packages", Path("/usr/lib/python3/dist-packages")),
        ("usr-share", Path("/usr/share")),
        ("node-npm", Path("/usr/lib/node_modules")),
        ("usr-lib", Path("/usr/lib")),
        ("usr-include", Path("/usr/include")),
        ("cargo-registry", Path.home() / ".cargo" / "registry" / "src"),
    ]
    roots += [(f"go-{p.name}", p / "src") for p in sorted(Path("/usr/lib").glob("go*"))]
    out, seen = [], set()
    for name, root in roots:
        real = root.resolve()
        if root.is_dir() and real not in seen:  # /usr/lib/go is a link to /usr/lib/go-1.19
            seen.add(real)
            out.append((name, root))
    return out


def _skip_dir(path: Path, name: str) -> bool:
    """Subtrees already walked as their own source, or not worth walking."""
    full = str(path / name)
    return full in ("/usr/lib/node_modules", "/usr/lib/python3", "/usr/lib/jvm") or (
        full.startswith("/usr/lib/go") or name in ("__pycache__", ".git", "node_modules", "site-packages")
    )


def walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not _skip_dir(here, d))
        for f in sorted(filenames):
            yield here / f


def truth(path: str) -> str | None:
    """Linguist's language for a path by its extension where that is unambiguous; see the module doc."""
    name = path.rsplit("/", 1)[-1]
    ext = detector.extension(name)
    if path.startswith("/usr/include/"):
        if "/c++/" in path or (path.startswith("/usr/include/llvm-") and "/llvm-c/" not in path):
            return "C++" if ext in ("", ".h", ".hpp", ".tcc") else None
        if ext == ".h":
            return "C"
    if path.startswith("/usr/share/perl") and ext in (".pm", ".pl"):
        return "Perl"
    if not ext or name.endswith(".min.js") or enry.get_language_by_filename(name).language:
        return None
    candidates = detector.extension_candidates(ext)
    return candidates[0] if len(candidates) == 1 else None


def _read(data: bytes) -> str | None:
    data = data[:MAX_BYTES]
    if len(data.strip()) < MIN_BYTES or b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _candidates() -> dict[str, dict[str, list[tuple[str, str]]]]:
    """language -> source -> [(path hash, path)] over every tree (the JDK's src.zip as members)."""
    found: dict[str, dict[str, list[tuple[str, str]]]] = defaultdict(lambda: defaultdict(list))
    seen: set[str] = set()
    for source, root in sources():
        for p in walk(root):
            s = str(p)
            if s in seen or p.is_symlink():
                continue
            seen.add(s)
            lang = truth(s)
            if lang is not None:
                found[lang][source].append((hashlib.sha1(s.encode()).hexdigest(), s))
    for src_zip in sorted(Path("/usr/lib/jvm").glob("*/lib/src.zip"))[:1]:
        with zipfile.ZipFile(src_zip) as z:
            for member in z.namelist():
                if member.endswith(".java"):
                    key = f"{src_zip}!{member}"
                    found["Java"]["jdk-src.zip"].append((hashlib.sha1(key.encode()).hexdigest(), key))
    return found


def _load(key: str) -> str | None:
    if "!" in key:
        archive, member = key.split("!", 1)
        with zipfile.ZipFile(archive) as z:
            return _read(z.read(member))
    try:
        with open(key, "rb") as f:
            return _read(f.read(MAX_BYTES))
    except OSError:
        return None


def collect(per_lang: int) -> tuple[list[tuple[str, str, str, str]], Counter[str]]:
    """(path, text, truth, source): up to ``per_lang`` files per language, round robin over sources;
    and every language's file count on the machine (which languages are the most common)."""
    out, hashes = [], set()
    candidates = _candidates()
    on_machine = Counter({lang: sum(map(len, by_source.values())) for lang, by_source in candidates.items()})
    for lang, by_source in sorted(candidates.items()):
        queues = {src: sorted(items) for src, items in sorted(by_source.items())}
        taken = 0
        while taken < per_lang and any(queues.values()):
            for src, queue in queues.items():
                while queue and taken < per_lang:
                    _, path = queue.pop(0)
                    text = _load(path)
                    digest = hashlib.sha1(text.encode()).hexdigest() if text is not None else None
                    if text is None or digest in hashes:
                        continue
                    hashes.add(digest)
                    out.append((path, text, lang, src))
                    taken += 1
                    break
    return out, on_machine


def evaluate(files: list[tuple[str, str, str, str]], mode: str) -> list[str]:
    """The detector's answer per file in ``mode``."""
    answers = []
    for i, (path, text, _, _) in enumerate(files):
        shown = path if mode == "named" else f"file{i}"
        answers.append(detector.detect(shown, text)[0])
    return answers


def report(files, on_machine: Counter[str], answers: dict[str, list[str]], top: int) -> dict[str, float]:
    """Per-language and overall accuracy on the ``top`` programming languages with the most files
    on this machine (at least ``MIN_FILES`` in the sample), then the confusion pairs."""
    by_lang = Counter(t for _, _, t, _ in files)
    common = sorted(on_machine.items(), key=lambda kv: (-kv[1], kv[0]))
    langs = [lang for lang, _ in common
             if enry.get_language_type(lang) == "programming" and by_lang[lang] >= MIN_FILES][:top]
    chosen = set(langs)
    src_of = defaultdict(set)
    for _, _, t, src in files:
        src_of[t].add(src)
    print(f"{'language':<18}{'machine':>8}{'files':>6}{'sources':>8}" + "".join(f"{m:>10}" for m in answers))
    totals: dict[str, list[int]] = {m: [0, 0] for m in answers}
    for lang in langs:
        row = f"{lang:<18}{on_machine[lang]:>8}{by_lang[lang]:>6}{len(src_of[lang]):>8}"
        for mode, got in answers.items():
            idx = [i for i, f in enumerate(files) if f[2] == lang]
            ok = sum(got[i] == lang for i in idx)
            totals[mode][0] += ok
            totals[mode][1] += len(idx)
            row += f"{ok / len(idx):>10.3f}"
        print(row)
    accuracy = {m: ok / max(1, n) for m, (ok, n) in totals.items()}
    n_all = sum(by_lang[lang] for lang in langs)
    print(f"{'ALL (files)':<18}{'':>8}{n_all:>6}{'':>8}" + "".join(f"{accuracy[m]:>10.3f}" for m in answers))
    for mode, got in answers.items():
        pairs = Counter((f[2], got[i]) for i, f in enumerate(files) if f[2] in chosen and got[i] != f[2])
        print(f"\nconfusion pairs, {mode} (truth -> answer: files), {sum(pairs.values())} misses:")
        for (want, have), n in pairs.most_common(25):
            print(f"  {want} -> {have}: {n}")
    known = [lang for lang in langs if lang in set(detector.MAGIKA_TO_LINGUIST.values())]
    idx = [i for i, f in enumerate(files) if f[2] in known]
    ok = sum(answers["content"][i] == files[i][2] for i in idx)
    print(f"\ncontent accuracy on the {len(known)} of these languages magika has a label for: "
          f"{ok / max(1, len(idx)):.3f} ({len(idx)} files; the others it can only miss: "
          f"{', '.join(sorted(set(langs) - set(known)))})")
    print()
    for mode, acc in accuracy.items():
        verdict = "meets" if acc >= GOALS[mode] else "below"
        print(f"{mode:<8} accuracy {acc:.3f} on {len(langs)} languages ({verdict} the goal {GOALS[mode]:.2f})")
    return accuracy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-lang", type=int, default=200)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    t0 = time.perf_counter()
    files, on_machine = collect(args.per_lang)
    sources_used = sorted({src for *_, src in files})
    print(f"corpus: {len(files)} files, {len({f[2] for f in files})} languages, "
          f"{len(sources_used)} sources ({', '.join(sources_used)}), collected in "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    answers = {mode: evaluate(files, mode) for mode in ("named", "content")}
    report(files, on_machine, answers, args.top)
    unknown = sum(a == schema.UNKNOWN for a in answers["content"])
    print(f"content mode: {unknown} of {len(files)} files unknown (no guess above magika_min_score)")


if __name__ == "__main__":
    main()

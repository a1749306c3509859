"""Train codecorpus's content model (``src/codecorpus/langid/content_model.bin.gz``) on real files.

The files: every ``train`` archive of ``langid_sources.ARCHIVES`` (pinned Debian, npm and PyPI
packages, none of them a bench source), labelled by Linguist's unambiguous extensions or the
archive's own rule (``.m`` in Octave's packages is MATLAB). Fetch them first:

    python bench/langid_sources.py fetch --role train
    python bench/langid_train.py                 # writes the model and the cache's train-manifest.txt
    python bench/langid_train.py --validate      # 2-fold by package: the model's accuracy on the
                                                 # packages it did not see, and with magika beside it

Per language at most ``--per-lang`` files, at most ``--per-package`` of them from one package
(sha1 order, deduplicated by content), so no one package is the language. Languages with fewer
than ``MIN_FILES`` files are left out. The same archives give the same model bytes.

``--validate`` chose the detector's thresholds (``detect.CONTENT_MODEL_MIN_MARGIN``): it reads
training packages only, never a bench source.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from langid_sources import CACHE, MANIFEST, archive_files, archives, decode, label

from codecorpus.langid import content_model

MIN_FILES = 8


def collect(per_lang: int, per_package: int) -> list[tuple[bytes, str, str]]:
    """(file head, language, package) of the training files, sampled as the module doc says."""
    by_lang: dict[str, dict[str, list[tuple[str, bytes]]]] = defaultdict(lambda: defaultdict(list))
    seen: set[str] = set()
    missing = []
    for archive in archives("train"):
        if not archive.folder.is_dir():
            missing.append(archive.name)
            continue
        for key, data in archive_files(archive):
            lang = label(archive, key)
            if lang is None or decode(data) is None:
                continue
            digest = hashlib.sha1(data).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            by_lang[lang][archive.name].append((digest, data))
    if missing:
        print(f"absent training archives (fetch them for the shipped model): {', '.join(missing)}", file=sys.stderr)
    docs = []
    for lang, packages in sorted(by_lang.items()):
        queues = {name: sorted(items)[:per_package] for name, items in sorted(packages.items())}
        picked: list[tuple[bytes, str, str]] = []
        while len(picked) < per_lang and any(queues.values()):
            for name, queue in queues.items():
                if queue and len(picked) < per_lang:
                    picked.append((queue.pop(0)[1], lang, name))
        if len(picked) >= MIN_FILES:
            docs += picked
    return docs


def validate(docs: list[tuple[bytes, str, str]]) -> None:
    """2-fold by package: train on one half of the packages, score the other half's files."""
    from codecorpus.langid import detect as detector

    packages = sorted({g for _, _, g in docs}, key=lambda g: hashlib.sha1(g.encode()).hexdigest())
    folds = [set(packages[0::2]), set(packages[1::2])]
    rows = []
    for held in folds:
        model = content_model.train([d for d in docs if d[2] not in held])
        known = set(model.languages)
        for data, lang, group in docs:
            if group in held and lang in known:
                guess, margin = model.predict(data)
                rows.append((lang, guess, margin, detector.magika_label(data)))
    total = len(rows)
    print(f"held-out files whose language the other fold knows: {total}")
    print(f"model alone: {sum(t == g for t, g, _, _ in rows) / total:.3f}")
    magika_ok = sum(t == m[0] for t, _, _, m in rows if m is not None)
    print(f"magika alone: {magika_ok / total:.3f}")
    for min_margin in (0.0, 0.1, 0.2, 0.3, 0.5):
        for magika_score in (0.8, 0.9, 0.95, 0.99):
            ok = sum(t == detector.combine(g, mg, m, min_margin, magika_score)[0] for t, g, mg, m in rows)
            print(f"  margin >= {min_margin:.1f}, magika >= {magika_score:.2f}: {ok / total:.3f}")
    pairs = Counter((t, g) for t, g, _, _ in rows if t != g)
    print("model's confusion pairs:", ", ".join(f"{t}->{g}: {n}" for (t, g), n in pairs.most_common(15)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-lang", type=int, default=600)
    ap.add_argument("--per-package", type=int, default=300)
    ap.add_argument("--validate", action="store_true")
    ap.add_argument("--out", type=Path, default=content_model.MODEL_FILE)
    args = ap.parse_args()
    t0 = time.perf_counter()
    docs = collect(args.per_lang, args.per_package)
    langs = Counter(lang for _, lang, _ in docs)
    print(f"{len(docs)} files, {len(langs)} languages, {len({g for *_, g in docs})} packages "
          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    print(", ".join(f"{lang}: {n}" for lang, n in sorted(langs.items())), file=sys.stderr)
    if args.validate:
        validate(docs)
        return
    model = content_model.train(docs)
    blob = model.to_bytes()
    args.out.write_bytes(blob)
    CACHE.mkdir(parents=True, exist_ok=True)
    digests = sorted(hashlib.sha1(d).hexdigest() for d, _, _ in docs)
    (CACHE / MANIFEST).write_text("".join(f"{h}\n" for h in digests))
    print(f"wrote {args.out} ({len(blob)} bytes, {len(model.ids)} features, {len(model.languages)} languages, "
          f"sha256 {hashlib.sha256(blob).hexdigest()[:16]})", file=sys.stderr)
    print(f"magnitude check: mean |weight| {np.abs(model.weights).mean():.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Redaction recall and false positives per kind on real code, and speed against detect-secrets.

Real code: Python standard-library sources of this machine (sorted, first N files).
Each planted copy of a file gets one real-looking secret of one kind (random values
in the kind's exact shape) inserted as an assignment after a random line.

- recall(kind): planted values that are gone from the output *and* counted as that kind;
- fires/MB on unplanted code (kind): spans the kind redacts in the original files. For
  secrets this is the false-positive rate; for e-mail and IPs most hits are real
  addresses in headers and tests (PII that should go), so it is an upper bound;
- speed: MB/s of ``redact_column`` (the stage's path) vs detect-secrets 1.5 (``SecretsCollection.scan_file``
  with its default plugins) over the same planted files, and detect-secrets' recall
  (a planted line flagged) for the kinds it has plugins for.

Run: ``python bench/redaction_bench.py [--files 400]``. Times are CPU seconds of this
process (``time.process_time``), so MB/s is per core even on a shared, loaded machine.
"""

from __future__ import annotations

import argparse
import random
import string
import sysconfig
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

from codecorpus.config import RedactConfig
from codecorpus.filters import redact

ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"


def plant(kind: str, rng: random.Random) -> tuple[str, str]:
    """(line to insert, the secret value that must disappear) for ``kind``."""
    r = lambda chars, n: "".join(rng.choice(chars) for _ in range(n))  # noqa: E731
    user = r(string.ascii_lowercase, 6)
    shapes = {
        "email": lambda: (f"{user}.{r(string.ascii_lowercase, 5)}@{r(string.ascii_lowercase, 7)}.com",) * 2,
        "ipv4": lambda: (f"{rng.randint(11, 99)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",) * 2,
        "ipv6": lambda: (f"2a0{rng.randint(0, 9)}:{r('0123456789abcdef', 4)}:{r('0123456789abcdef', 4)}::{r('0123456789abcdef', 3)}",) * 2,
        "aws_access_key": lambda: (k := "AKIA" + r(UPPER, 16), k),
        "aws_secret_key": lambda: (f"aws_secret_access_key = '{(k := r(B64, 40))}'", k),
        "gcp_api_key": lambda: (k := "AIza" + r(ALNUM + "_-", 35), k),
        "gcp_oauth_secret": lambda: (k := "GOCSPX-" + r(ALNUM, 28), k),
        "gcp_service_account": lambda: (f'"private_key_id": "{(k := r("0123456789abcdef", 40))}"', k),
        "azure_storage_key": lambda: (f"AccountName=x;AccountKey={(k := r(B64, 86) + '==')};", k),
        "azure_sas": lambda: (f"https://a.blob.core.windows.net/c?sv=2020&sig={(k := r(ALNUM, 44))}", k),
        "azure_client_secret": lambda: (k := r(ALNUM, 3) + "8Q~" + r(ALNUM, 34), k),
        "github_token": lambda: (k := "ghp_" + r(ALNUM, 36), k),
        "gitlab_token": lambda: (k := "glpat-" + r(ALNUM, 20), k),
        "slack_token": lambda: (k := f"xoxb-{r(string.digits, 12)}-{r(ALNUM, 24)}", k),
        "slack_webhook": lambda: (k := f"https://hooks.slack.com/services/T{r(UPPER, 8)}/B{r(UPPER, 8)}/{r(ALNUM, 24)}", k),
        "stripe_key": lambda: (k := "sk_live_" + r(ALNUM, 24), k),
        "jwt": lambda: (k := f"eyJhbGciOiJIUzI1NiJ9.eyJ{r(ALNUM, 30)}.{r(ALNUM + '_-', 43)}", k),
        "private_key": lambda: ("-----BEGIN RSA PRIVATE KEY-----\\n" + "\\n".join(r(B64, 64) for _ in range(4))
                                + "\\n-----END RSA PRIVATE KEY-----", "BEGIN RSA PRIVATE KEY"),
        "password": lambda: (f"db_password = '{(k := r(ALNUM, 6) + rng.choice('!#%&') + r(string.digits, 3))}'", k),
        "secret": lambda: (f"api_secret = '{(k := r(ALNUM, 32))}'", k),
    }
    line, value = shapes[kind]()
    if "=" not in line and ":" not in line.split("//")[0][:20]:
        line = f"value = '{line}'"
    return line, value


def corpus(n: int) -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    return [p for p in files if 2_000 < p.stat().st_size < 60_000][:n]


def planted_copies(texts: list[str], seed: int = 0) -> list[tuple[str, str, str]]:
    """(kind, planted text, value) for every file, kinds in rotation."""
    rng = random.Random(seed)
    out = []
    for i, text in enumerate(texts):
        kind = redact.KINDS[i % len(redact.KINDS)]
        line, value = plant(kind, rng)
        lines = text.split("\n")
        at = rng.randrange(len(lines))
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
        lines.insert(at + 1, indent + line)
        out.append((kind, "\n".join(lines), value))
    return out


def bench_ours(planted: list[tuple[str, str, str]], cfg: RedactConfig) -> tuple[dict, float]:
    hits, total = Counter(), Counter()
    texts = pa.array([text for _, text, _ in planted], pa.large_string())
    t0 = time.process_time()
    outputs = zip(*redact.redact_column(texts, [""] * len(texts), cfg), strict=True)
    seconds = time.process_time() - t0
    for (kind, _, value), (out, counts) in zip(planted, outputs, strict=True):
        total[kind] += 1
        hits[kind] += value not in out and counts[kind] > 0
    return {k: hits[k] / total[k] for k in total}, seconds


def bench_detect_secrets(planted: list[tuple[str, str, str]]) -> tuple[dict, float] | None:
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    hits, total = Counter(), Counter()
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (_, text, _) in enumerate(planted):
            path = Path(tmp) / f"f{i}.py"
            path.write_text(text)
            paths.append(path)
        t0 = time.process_time()
        with default_settings():
            found = []
            for path in paths:
                coll = SecretsCollection()
                coll.scan_file(str(path))
                found.append({s.line_number for _, s in coll})
        seconds = time.process_time() - t0
    for (kind, text, value), lines in zip(planted, found, strict=True):
        first = value.split("\\n")[0]
        line_no = next(i + 1 for i, line in enumerate(text.split("\n")) if first in line or value in line)
        total[kind] += 1
        hits[kind] += line_no in lines
    return {k: hits[k] / total[k] for k in total}, seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=400)
    args = parser.parse_args()
    files = corpus(args.files)
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    cfg = RedactConfig()
    planted = planted_copies(texts)

    clean_counts: Counter[str] = Counter()
    t0 = time.process_time()
    for counts in redact.redact_column(pa.array(texts, pa.large_string()), [""] * len(texts), cfg)[1]:
        clean_counts.update(counts)
    clean_seconds = time.process_time() - t0
    recall, ours_seconds = bench_ours(planted, cfg)
    peer = bench_detect_secrets(planted)

    print(f"corpus: {len(texts)} stdlib files, {mb:.1f} MB; each planted copy holds one secret")
    print(f"{'kind':<22}{'recall':>8}{'fires/MB clean':>16}{'detect-secrets recall':>24}")
    for kind in redact.KINDS:
        ds = f"{peer[0].get(kind, 0):.2f}" if peer else "n/a"
        print(f"{kind:<22}{recall.get(kind, 0):>8.2f}{clean_counts[kind] / mb:>16.2f}{ds:>24}")
    ours_speed = mb / ours_seconds
    print(f"\nredact_column: {ours_speed:.1f} MB/s planted, {mb / clean_seconds:.1f} MB/s clean (one core)")
    if peer:
        peer_speed = mb / peer[1]
        print(f"detect-secrets 1.5 scan_file: {peer_speed:.2f} MB/s -> redact_column is {ours_speed / peer_speed:.1f}x faster")
    else:
        print("detect-secrets not installed (pip install -e .[dev]): no peer comparison")


if __name__ == "__main__":
    main()

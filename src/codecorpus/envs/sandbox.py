"""The one module that runs repository code: bubblewrap with explicit limits.

Layout inside the sandbox: the host's system directories read-only (``/usr``, ``/etc``,
``/opt``, the ``/bin`` and ``/lib`` links), the toolchains' own prefixes read-only at their
host paths (so shebangs and venv ``home =`` lines keep working), the repository work tree
writable at ``/workspace``, the environment directory (the cached installed dependencies)
at ``/env`` (writable while installing, read-only while testing), and a private tmpfs for
``/tmp``, ``$HOME`` (``/home/sandbox``) and ``/dev/shm`` (``multiprocessing`` locks and
queues live there), each capped in size. Every namespace is unshared; the network
namespace is shared only in the install phase.

Isolation from the host: the host's package directories (``hidden_paths``: every host
interpreter's ``site-packages``/``dist-packages``) are covered by empty read-only mounts,
and a toolchain's programs appear only as links in ``/toolchain/bin`` (``tool_links``:
``python``, ``python3`` ... to the interpreter), never as the toolchain's whole ``bin``
directory with its ``pytest`` and ``pip``. ``PATH`` is the environment's own prefixes
(``/env/venv/bin``, ``/env/bin``), then ``/toolchain/bin``, then ``/usr/bin`` and ``/bin``;
``/usr/local/bin`` (host extras) is left out. A test runner or a dependency the
environment did not install is therefore missing, not borrowed from the host.

Tool caches: ``$HOME`` is writable (npm's ``~/.npm``, pip's and pytest's caches,
``XDG_CACHE_HOME``), and while testing an installed ``node_modules/.cache`` in the
environment is covered by a private tmpfs (ava and xo write there, and the environment is
read-only). ``CODECORPUS_RESULTS`` names an empty writable directory outside the work tree
(``/results``) that test commands write their report files into; the caller reads it after
the run (``results_dir``).

Limits and why each is set where it is:

- CPU seconds, data segment (memory), address space, file size, open files, processes:
  ``prlimit`` applied to the command inside the sandbox, so bubblewrap itself is unlimited.
- Processes: ``RLIMIT_NPROC`` counts every process and thread of a *user*, and the kernel
  never enforces it for root. So when the caller is root the sandboxed command runs as a
  dedicated unprivileged uid (``uid_base`` + the caller's pid: unique per worker process),
  dropped to by ``setpriv`` inside a privileged bubblewrap with every capability and the
  bounding set cleared; the count is then exactly this sandbox's processes. For a non-root
  caller bubblewrap makes a user namespace, and since Linux 5.14 the limit is counted per
  user namespace, so it covers the sandbox only as well. A pid namespace holds them all:
  when its first process exits or bubblewrap is killed (``--die-with-parent``), the kernel
  kills every process left in it, so no daemon outlives a run.
- Wall time and output bytes: the parent reads stdout and stderr with a cap and a deadline
  and kills the whole session (bubblewrap leads it) on overflow or timeout.
- ``/tmp`` and ``$HOME`` are tmpfs mounts with ``--size`` so filling them costs bounded RAM.

Memory is ``RLIMIT_DATA`` (private writable mappings, what ``malloc`` and ``mmap`` of
anonymous memory use), not ``RLIMIT_AS``: V8, Go and the JVM reserve large address ranges
they never touch, which an address-space cap would refuse. ``address_space_bytes`` is there
for runtimes that need the stricter cap.

``kind: none`` (only when a recipe asks for it) runs the command bare in the work tree with
the same rlimits and environment, a private temporary $HOME, and no namespace: no network
isolation, no read-only system, and for a root caller no process limit.

A run ends with a machine-readable ``violation`` (``None`` when the command ran within
every limit), so callers count drops by reason instead of parsing messages.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

WORK = "/workspace"
ENV = "/env"
HOME = "/home/sandbox"
RESULTS = "/results"
"""Inside the sandbox: the directory test commands write report files to (``$CODECORPUS_RESULTS``)."""
TOOL_BIN = "/toolchain/bin"
"""Inside the sandbox: links to the toolchains' programs (``tool_links``), on PATH after the env's."""
WRITABLE_ENV_CACHES = ("node_modules/.cache",)
"""Directories of an installed environment that tools write while testing (ava, xo, babel):
a private tmpfs covers each one that exists."""
SYSTEM_DIRS = ("/usr", "/etc", "/opt")
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEFAULT_SOURCE_DATE_EPOCH = 315532800  # 1980-01-01, the earliest date a zip file can hold
# Host variables that say where the configured package indexes are; passed to installs only.
INDEX_ENV_PREFIXES = ("PIP_", "UV_", "npm_config_", "NPM_CONFIG_", "CARGO_REGISTR", "GOPROXY")
INDEX_ENV_NAMES = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                   "NO_PROXY", "GOFLAGS", "GONOSUMDB", "GOSUMDB", "SSL_CERT_FILE", "SSL_CERT_DIR",
                   "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO")
# Host user files that configure those indexes; copied (not bound) into the sandbox $HOME.
INDEX_CONFIG_FILES = (".config/pip/pip.conf", ".pip/pip.conf", ".npmrc", ".yarnrc",
                      ".cargo/config.toml", ".cargo/config")

TIMEOUT = "timeout"
OUTPUT_LIMIT = "output_limit"
MEMORY_LIMIT = "memory_limit"
PROCESS_LIMIT = "process_limit"
FILE_SIZE_LIMIT = "file_size_limit"
CPU_LIMIT = "cpu_limit"
SANDBOX_VIOLATION = "sandbox_violation"
DAEMON_LEFT_BEHIND = "daemon_left_behind"
SANDBOX_ERROR = "sandbox_error"
VIOLATIONS = (TIMEOUT, OUTPUT_LIMIT, MEMORY_LIMIT, PROCESS_LIMIT, FILE_SIZE_LIMIT, CPU_LIMIT,
              SANDBOX_VIOLATION, DAEMON_LEFT_BEHIND, SANDBOX_ERROR)

# Evidence in a failed command's output, in the order it is checked. Each runtime words a
# refused resource its own way; these are the messages of Python, glibc, sh/bash, Node,
# Rust, Go and the JVM.
_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (PROCESS_LIMIT, re.compile(
        r"Cannot fork|fork: retry|fork: Resource temporarily unavailable|"
        r"BlockingIOError: \[Errno 11\]|can't start new thread|spawn \S* ?EAGAIN|"
        r"Resource temporarily unavailable.*(?:fork|thread|spawn)|"
        r"(?:fork|thread|spawn).*Resource temporarily unavailable|unable to create native thread")),
    (MEMORY_LIMIT, re.compile(
        r"MemoryError|Cannot allocate memory|out of memory|std::bad_alloc|"
        r"memory allocation of \d+ bytes failed|JavaScript heap out of memory|OutOfMemoryError")),
    (FILE_SIZE_LIMIT, re.compile(r"File too large|EFBIG")),
    (SANDBOX_VIOLATION, re.compile(
        r"Read-only file system|EROFS|Network is unreachable|ENETUNREACH|"
        r"Temporary failure in name resolution|EAI_AGAIN|getaddrinfo ENOTFOUND|"
        r"Name or service not known")),
)
_DENIED_PATH = re.compile(r"[Pp]ermission denied[:,]? (?:open |mkdir |unlink |rmdir )?'(/[^']*)'")


class Limits(BaseModel):
    """Resource limits of one sandboxed command."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    wall_seconds: float = Field(600.0, gt=0)
    cpu_seconds: int = Field(600, gt=0, description="per process (RLIMIT_CPU)")
    memory_bytes: int = Field(4 << 30, gt=0, description="per process (RLIMIT_DATA)")
    address_space_bytes: int | None = Field(None, gt=0, description="per process (RLIMIT_AS)")
    processes: int = Field(512, gt=1, description="processes and threads (RLIMIT_NPROC)")
    file_size_bytes: int = Field(1 << 30, gt=0)
    open_files: int = Field(1024, gt=3)
    output_bytes: int = Field(16 << 20, gt=0, description="stdout + stderr kept before a kill")
    tmpfs_bytes: int = Field(512 << 20, gt=0, description="size of each of /tmp, $HOME and /dev/shm")


class SandboxConfig(BaseModel):
    """How repository commands run: ``bwrap`` always, ``none`` only when a recipe says so."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["bwrap", "none"] = "bwrap"
    limits: Limits = Limits()
    toolchain_paths: tuple[str, ...] = Field(
        (), description="host directories bound read-only at the same path (toolchain prefixes)")
    path_dirs: tuple[str, ...] = Field((), description="directories put on PATH after the environment's")
    tool_links: tuple[tuple[str, str], ...] = Field(
        (), description="(name, host program) linked into /toolchain/bin: the toolchains' programs")
    hidden_paths: tuple[str, ...] = Field(
        (), description="host directories covered by an empty read-only mount (host site-packages)")
    toolchain_env: tuple[tuple[str, str], ...] = ()
    uid_base: int = Field(1_500_000_000, gt=65535, lt=2**31 - 2**23)
    source_date_epoch: int = DEFAULT_SOURCE_DATE_EPOCH


@dataclass(frozen=True)
class RunResult:
    """What one sandboxed command did."""

    command: str
    exit_code: int | None
    """The command's exit status (128 + N when a signal N ended it); None when it was killed."""
    stdout: str
    stderr: str
    output_bytes: int
    wall_seconds: float
    cpu_seconds: float
    violation: str | None
    violation_detail: str = ""
    leftover_processes: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.violation is None


def sandbox_uid(config: SandboxConfig) -> int:
    """The unprivileged uid a root caller's sandboxes run as: one per worker process, so the
    per-user process count is this process's sandbox only."""
    return config.uid_base + os.getpid() % (1 << 23)


def grant(path: Path, config: SandboxConfig) -> None:
    """Make a host directory writable from the sandbox: a root caller chowns it (recursively,
    without following links) to the sandbox uid; a non-root caller already owns it."""
    if os.geteuid() != 0 or config.kind == "none":
        return
    uid = sandbox_uid(config)
    for root, dirs, files in os.walk(path):
        for name in (root, *(os.path.join(root, n) for n in dirs + files)):
            os.chown(name, uid, uid, follow_symlinks=False)


def run(
    command: str,
    work_dir: Path,
    config: SandboxConfig,
    *,
    env_dir: Path | None = None,
    network: bool = False,
    env_writable: bool = False,
    extra_env: Mapping[str, str] | None = None,
    merge_stderr: bool = False,
    results_dir: Path | None = None,
) -> RunResult:
    """Run ``command`` (a ``/bin/sh -c`` string) in ``work_dir`` under ``config``'s sandbox.

    ``network`` and ``env_writable`` are for the install phase; tests run with neither.
    ``merge_stderr`` records stderr into ``stdout`` in order (runners such as cargo print
    which target runs on stderr and its tests on stdout). ``results_dir``, a host
    directory, is bound writable at ``/results`` and named by ``$CODECORPUS_RESULTS``.
    The working directory is ``/workspace`` and ``$ENV_DIR`` names the environment directory
    (``/env``), so commands read the same in every run.
    """
    work_dir, env_dir = Path(work_dir).resolve(), env_dir and Path(env_dir).resolve()
    results_dir = results_dir and Path(results_dir).resolve()
    if config.kind == "none":
        inside_work, inside_env = str(work_dir), str(env_dir or "")
        inside_results = str(results_dir or "")
    else:
        inside_work, inside_env = WORK, ENV if env_dir else ""
        inside_results = RESULTS if results_dir else ""
        grant(work_dir, config)
        if env_dir and env_writable:
            grant(env_dir, config)
        if results_dir:
            grant(results_dir, config)
    home = tempfile.mkdtemp(prefix="sandbox-home-") if config.kind == "none" else HOME
    tools = _host_tool_dir(config, home) if config.kind == "none" else TOOL_BIN
    env = _environment(config, inside_work, inside_env, home, tools, network, extra_env or {})
    if inside_results:
        env["CODECORPUS_RESULTS"] = inside_results
    status_r, status_w = os.pipe()
    inner = _inner_argv(command, config, status_w)
    info_r = None
    if config.kind == "none":
        argv, files, cwd = inner, [], str(work_dir)
    else:
        argv, files = _bwrap_argv(config, work_dir, env_dir, network, env_writable, inner,
                                  results_dir)
        info_r, info_w = os.pipe()  # bubblewrap writes its first child's host pid here
        files.append(info_w)
        argv[1:1] = ["--info-fd", str(info_w)]
        cwd = "/"
    try:
        return _supervise(command, argv, env, cwd, config.limits, (status_r, status_w), files,
                          merge_stderr, info_r)
    finally:
        if info_r is not None:
            os.close(info_r)
        for fd in files:
            with contextlib.suppress(OSError):
                os.close(fd)
        if config.kind == "none":
            shutil.rmtree(home, ignore_errors=True)


def _host_tool_dir(config: SandboxConfig, home: str) -> str:
    """``kind: none``: the tool links made in a directory of the private $HOME."""
    tools = Path(home) / ".toolchain-bin"
    tools.mkdir()
    for name, target in config.tool_links:
        (tools / name).symlink_to(target)
    return str(tools)


def sandbox_path(env_dir: str, tools: str, path_dirs: Sequence[str]) -> str:
    """PATH inside the sandbox: the environment's prefixes first, then the toolchains' links,
    their extra directories, and the system's; never ``/usr/local/bin``.

    >>> sandbox_path("/env", "/toolchain/bin", ())
    '/env/venv/bin:/env/bin:/toolchain/bin:/usr/bin:/bin'
    """
    path = [tools, *path_dirs, "/usr/bin", "/bin"]
    if env_dir:
        path = [f"{env_dir}/venv/bin", f"{env_dir}/bin", *path]
    return ":".join(dict.fromkeys(path))


def _environment(config: SandboxConfig, work: str, env_dir: str, home: str, tools: str,
                 network: bool, extra: Mapping[str, str]) -> dict[str, str]:
    env = {
        "PATH": sandbox_path(env_dir, tools, config.path_dirs), "HOME": home,
        "TMPDIR": "/tmp" if home == HOME else home, "USER": "sandbox",
        "LOGNAME": "sandbox", "TZ": "UTC", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0", "SOURCE_DATE_EPOCH": str(config.source_date_epoch),
        "CI": "true", "NO_COLOR": "1", "TERM": "dumb", "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1", "XDG_CACHE_HOME": f"{home}/.cache",
        "npm_config_cache": f"{home}/.npm", "WORK_DIR": work, "ENV_DIR": env_dir,
    }
    if network:
        env.update({k: v for k, v in os.environ.items()
                    if k.startswith(INDEX_ENV_PREFIXES) or k in INDEX_ENV_NAMES})
    env.update(dict(config.toolchain_env))
    env.update(extra)
    return env


def _inner_argv(command: str, config: SandboxConfig, status_fd: int) -> list[str]:
    """``[setpriv ...] bash -c INIT prlimit ... -- sh -c command``.

    The small init shell runs the limited command with the status pipe closed, then
    writes its exit status and the number of processes still alive in the pid namespace
    (a daemon the command left behind) to the status pipe.
    """
    lim = config.limits
    # CPU: SIGXCPU at the soft limit, SIGKILL a second later for a process that ignores it.
    limits = [f"--cpu={lim.cpu_seconds}:{lim.cpu_seconds + 1}", f"--data={lim.memory_bytes}",
              f"--nproc={lim.processes}", f"--fsize={lim.file_size_bytes}",
              f"--nofile={lim.open_files}", "--core=0"]
    if lim.address_space_bytes:
        limits.append(f"--as={lim.address_space_bytes}")
    init = (
        f'"$@" {status_fd}>&- </dev/null; rc=$?; left=0; '
        'if [ "$$" = 2 ]; then for p in /proc/[0-9]*; do p=${p#/proc/}; '
        '[ "$p" = 1 ] || [ "$p" = "$$" ] || left=$((left+1)); done; fi; '
        f'echo "rc=$rc left=$left" >&{status_fd}; times >&{status_fd}; exit $rc'
    )
    # bash, not dash: the status pipe's fd number can exceed 9, which dash cannot redirect.
    argv = ["/bin/bash", "--norc", "--noprofile", "-c", init, "sandbox-init", "prlimit",
            *limits, "--", "/bin/sh", "-c", command]
    if config.kind == "bwrap" and os.geteuid() == 0:
        uid = sandbox_uid(config)
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", *argv]
    return argv


def _bwrap_argv(config: SandboxConfig, work: Path, env_dir: Path | None, network: bool,
                env_writable: bool, inner: list[str], results_dir: Path | None = None,
                ) -> tuple[list[str], list[int]]:
    """bubblewrap's arguments and the fds it reads (copied index config files)."""
    size = str(config.limits.tmpfs_bytes)
    # --unshare-all spelled out: as root the user namespace is left out, because setpriv
    # must switch to a real unprivileged uid (see the module docstring).
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid",
            "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    if not network:
        args.append("--unshare-net")
    if os.geteuid() == 0:  # privileged: setpriv drops to the sandbox uid (RLIMIT_NPROC)
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid())]
    for d in SYSTEM_DIRS:
        if os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", size,
             "--tmpfs", "/tmp", "--perms", "0755", "--dir", "/home"]
    args += ["--perms", "0777", "--size", size, "--tmpfs", HOME]
    args += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
    made: set[str] = set()
    for path in config.toolchain_paths:
        args += [*_parents(path, made), "--ro-bind", path, path]
    args += _isolation(config)
    args += ["--bind", str(work), WORK]
    if env_dir:
        args += _env_mounts(env_dir, env_writable, size)
    if results_dir:
        args += ["--bind", str(results_dir), RESULTS]
    files: list[int] = []
    if network:
        args += _index_config(files)
    return [*args, "--chdir", WORK, "--", *inner], files


def _env_mounts(env_dir: Path, writable: bool, size: str) -> list[str]:
    """The environment at ``/env``; while testing (read-only), a private tmpfs over each of
    its tool caches (``WRITABLE_ENV_CACHES``)."""
    args = ["--bind" if writable else "--ro-bind", str(env_dir), ENV]
    for rel in () if writable else WRITABLE_ENV_CACHES:
        if (env_dir / rel).is_dir() and not (env_dir / rel).is_symlink():
            args += ["--perms", "1777", "--size", size, "--tmpfs", f"{ENV}/{rel}"]
    return args


def _isolation(config: SandboxConfig) -> list[str]:
    """The host's package directories covered (after the binds that hold them), and the
    toolchains' programs linked into ``/toolchain/bin``."""
    args = []
    for path in config.hidden_paths:
        if os.path.isdir(path):
            args += ["--perms", "0555", "--size", "4096", "--tmpfs", path, "--remount-ro", path]
    args += ["--perms", "0755", "--dir", "/toolchain", "--perms", "0755", "--dir", TOOL_BIN]
    for name, target in config.tool_links:
        args += ["--symlink", target, f"{TOOL_BIN}/{name}"]
    return args


def _parents(path: str, made: set[str]) -> list[str]:
    """``--dir`` each missing ancestor with mode 0755 (bubblewrap's own are 0700, which an
    unprivileged sandbox uid could not traverse)."""
    out = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        parent = str(Path(*parts[:i]))
        if parent in made or parent in SYSTEM_DIRS or parent in SYSTEM_LINKS or parent == "/home":
            continue
        made.add(parent)
        out += ["--perms", "0755", "--dir", parent]
    return out


_SECRET_LINE = re.compile(rb"(?im)^[^\n]*(?:_authtoken|_auth|_password|password|token)\s*[=:][^\n]*\n?")


def _index_config(files: list[int]) -> list[str]:
    """Copy the caller's package-index config files into the sandbox $HOME (read-only).

    Install scripts are repository code and the network is on, so lines holding
    credentials (auth tokens, passwords) are left out: an index that needs them must be
    reachable another way (a local mirror, a proxy that authenticates)."""
    home, args = Path.home(), []
    for rel in INDEX_CONFIG_FILES:
        src = home / rel
        if not src.is_file():
            continue
        r, w = os.pipe()
        data = _SECRET_LINE.sub(b"", src.read_bytes()[:60000])
        os.write(w, data)  # fits a pipe buffer: no writer thread needed
        os.close(w)
        files.append(r)
        made: set[str] = set()
        dest = f"{HOME}/{rel}"
        args += [*_parents(dest, made), "--perms", "0444", "--ro-bind-data", str(r), dest]
    return args


@dataclass
class _Capture:
    cap: int
    out: bytearray
    err: bytearray
    status: bytearray
    total: int = 0
    overflow: bool = False
    info: bytearray = field(default_factory=bytearray)
    namespace: tuple[int, str] | None = None
    """Host pid and start time of the pid namespace's first process."""


def _supervise(command: str, argv: list[str], env: dict[str, str], cwd: str, limits: Limits,
               status: tuple[int, int], files: list[int], merge_stderr: bool,
               info_r: int | None) -> RunResult:
    status_r, status_w = status
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            pass_fds=(status_w, *files), start_new_session=True)
    except OSError as exc:
        os.close(status_r)
        os.close(status_w)
        return RunResult(command, None, "", str(exc), 0, 0.0, 0.0, SANDBOX_ERROR, str(exc))
    os.close(status_w)
    for fd in files:  # bubblewrap holds its copies; ours would keep its pipes open
        with contextlib.suppress(OSError):
            os.close(fd)
    files.clear()
    cap = _Capture(limits.output_bytes, bytearray(), bytearray(), bytearray())
    timed_out = _pump(proc, status_r, cap, start + limits.wall_seconds, info_r)
    _, wait_status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    if cap.namespace:
        _end_namespace(*cap.namespace)
    wall = time.monotonic() - start
    return _result(command, proc.returncode, cap, timed_out, wall, usage, limits.cpu_seconds)


def _kill(proc: subprocess.Popen) -> None:
    """Kill bubblewrap's whole session; its pid namespace dies with its first process."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _pump(proc: subprocess.Popen, status_r: int, cap: _Capture, deadline: float,
          info_r: int | None) -> bool:
    """Read stdout, stderr, the status and info pipes until they close and bubblewrap exits;
    kill the session on timeout or overflow. Returns whether the deadline passed."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, cap.out)
    if proc.stderr:
        sel.register(proc.stderr, selectors.EVENT_READ, cap.err)
    sel.register(status_r, selectors.EVENT_READ, cap.status)
    if info_r is not None:
        sel.register(info_r, selectors.EVENT_READ, cap.info)
    timed_out, killed_at = False, None
    while sel.get_map() or not _exited(proc.pid):
        now = time.monotonic()
        if killed_at is None and now >= deadline:
            timed_out, killed_at = True, now
            _kill(proc)
        if killed_at is not None and now - killed_at > 10:
            break  # a pipe held open past a kill: stop reading, the wait reaps bwrap
        if not sel.get_map():
            time.sleep(0.01)
            continue
        for key, _ in sel.select(timeout=max(0.01, min(1.0, deadline - now))):
            if _read(sel, key, cap) and killed_at is None:
                cap.overflow, killed_at = True, time.monotonic()
                _kill(proc)
    sel.close()
    proc.stdout.close()
    if proc.stderr:
        proc.stderr.close()
    os.close(status_r)
    return timed_out


def _start_time(pid: int) -> str:
    """A process's start time (field 22 of /proc/PID/stat): tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def _end_namespace(pid: int, started: str) -> None:
    """Make sure the pid namespace is gone before a run returns: kill its first process
    (the kernel then kills the rest) and wait until it has exited. bubblewrap itself can
    exit while the namespace is still being torn down."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return
        fields = stat.rsplit(")", 1)[-1].split()
        if not started or fields[19] != started or fields[0] in ("Z", "X"):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (``wait4`` collects it and its usage)."""
    info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return info is not None


def _read(sel: selectors.BaseSelector, key: selectors.SelectorKey, cap: _Capture) -> bool:
    """Read one chunk into its buffer; returns whether the output cap is now exceeded."""
    fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
    chunk = os.read(fd, 1 << 16)
    if not chunk:
        sel.unregister(key.fileobj)
        return False
    if key.data is cap.status:
        cap.status.extend(chunk[:512])
        return False
    if key.data is cap.info:
        cap.info.extend(chunk[:4096])
        m = re.search(rb'"child-pid"\s*:\s*(\d+)', bytes(cap.info))
        if m and cap.namespace is None:
            pid = int(m.group(1))
            cap.namespace = (pid, _start_time(pid))
        return False
    cap.total += len(chunk)
    room = cap.cap - len(cap.out) - len(cap.err)
    key.data.extend(chunk[: max(room, 0)])
    return cap.total > cap.cap


_STATUS = re.compile(rb"rc=(\d+) left=(\d+)")
# ``times``: the shell's own user/system time, then its waited children's.
_TIMES = re.compile(rb"(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s+(\d+)m([\d.]+)s (\d+)m([\d.]+)s")


def _result(command: str, bwrap_code: int, cap: _Capture, timed_out: bool, wall: float,
            usage: os.struct_rusage | None, cpu_limit: int) -> RunResult:
    out = cap.out.decode("utf-8", "replace")
    err = cap.err.decode("utf-8", "replace")
    match = _STATUS.search(bytes(cap.status))
    exit_code = int(match.group(1)) if match else None
    left = int(match.group(2)) if match else 0
    cpu = _cpu(cap.status, usage)
    violation, detail = _classify(exit_code, bwrap_code, left, out, err, cap, timed_out)
    if exit_code == 128 + signal.SIGKILL and violation is None and cpu >= cpu_limit:
        violation, detail = CPU_LIMIT, f"killed after {cpu:.1f} CPU seconds"
    return RunResult(command, exit_code, out, err, cap.total, wall, cpu, violation, detail, left)


def _cpu(status: bytes, usage: os.struct_rusage | None) -> float:
    """CPU seconds of the command and every process it waited for, from the init shell's
    ``times`` (bubblewrap's own rusage does not include the sandbox); the wait's rusage
    when there was no sandbox."""
    m = _TIMES.search(bytes(status))
    if m:
        g = [float(x) for x in m.groups()]
        return g[4] * 60 + g[5] + g[6] * 60 + g[7]
    return (usage.ru_utime + usage.ru_stime) if usage else 0.0


def _classify(exit_code: int | None, bwrap_code: int, left: int, out: str, err: str,
              cap: _Capture, timed_out: bool) -> tuple[str | None, str]:
    """The violation a run ended with, and the evidence for it."""
    if cap.overflow:
        return OUTPUT_LIMIT, f"more than {cap.cap} bytes of output"
    tail = (err[-20000:] + "\n" + out[-20000:])
    if exit_code is None and not timed_out:
        if err.startswith("bwrap:") or (bwrap_code != 0 and "setpriv" in err):
            return SANDBOX_ERROR, err.strip()[:500]
        return SANDBOX_ERROR, f"no status from the sandbox (exit {bwrap_code})"
    if exit_code == 128 + signal.SIGXCPU:
        return CPU_LIMIT, "SIGXCPU"
    if exit_code == 128 + signal.SIGXFSZ:
        return FILE_SIZE_LIMIT, "SIGXFSZ"
    found = _evidence(tail)
    # A refused fork is never a passing run's business; other evidence counts on failure only
    # (a test may print "MemoryError" while checking its own error handling).
    if found and (exit_code != 0 or timed_out or found[0] == PROCESS_LIMIT):
        return found
    if timed_out:
        return TIMEOUT, "wall time exceeded"
    if left:
        return DAEMON_LEFT_BEHIND, f"{left} process(es) alive after the command exited"
    return None, ""


def _evidence(text: str) -> tuple[str, str] | None:
    for reason, pattern in _MARKERS:
        m = pattern.search(text)
        if m:
            return reason, _line_of(text, m.start())
    for m in _DENIED_PATH.finditer(text):
        if not m.group(1).startswith((WORK, ENV, HOME + "/", "/tmp/", "/dev/", RESULTS)):
            return SANDBOX_VIOLATION, _line_of(text, m.start())
    return None


def _line_of(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start: end if end >= 0 else len(text)].strip()[:300]


def available() -> str | None:
    """Why bubblewrap cannot run here, or None when it can."""
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (apt-get install -y bubblewrap)"
    if not shutil.which("prlimit") or not shutil.which("setpriv"):
        return "util-linux's prlimit/setpriv are missing"
    with tempfile.TemporaryDirectory(prefix="sandbox-probe-") as work:
        probe = run("true", Path(work), SandboxConfig(kind="bwrap"))
    return None if probe.ok else f"bwrap does not start: {probe.violation_detail}"


def overhead(config: SandboxConfig, work_dir: Path, command: Sequence[str] = ("true",),
             repeats: int = 20) -> dict[str, float]:
    """Median milliseconds of ``command`` run bare and run through the sandbox, and their
    difference: what the sandbox costs per command."""
    bare, boxed = [], []
    line = " ".join(command)
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", line], cwd=work_dir, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        run(line, work_dir, config)
        boxed.append(time.perf_counter() - t0)
    b, s = statistics.median(bare) * 1e3, statistics.median(boxed) * 1e3
    return {"bare_ms": b, "sandbox_ms": s, "overhead_ms": s - b}


def python_toolchain() -> tuple[str, ...]:
    """The running interpreter's real prefix: the Python toolchain sandboxes see."""
    return (os.path.realpath(sys.base_prefix),)

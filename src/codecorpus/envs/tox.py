"""What tox would run for a repository's test environment, as plain shell commands.

tox itself is not run: it builds its virtualenvs and installs their dependencies when the
tests start, which needs the network the test phase does not have. Instead its
configuration (``tox.ini``, ``setup.cfg``'s ``[tox:tox]``, or ``pyproject.toml``'s
``[tool.tox] legacy_tox_ini``) is read the way tox reads it, for the one environment that
tests the package on the host's Python:

- the environment: from ``env_list``/``envlist`` (brace expansions such as
  ``py3{9-13}-tests`` included), the one whose factors name the host Python and tests
  (lint, docs, typing and packaging environments are never chosen); ``py`` when none is
  listed;
- its settings: ``[testenv:NAME]`` (or a section whose expansion holds NAME) over
  ``[testenv]``, factor-conditional lines (``tests: pytest``, ``!py39: x``,
  ``py311,py312: y``, ``a-b: z``) kept when they match NAME's factors;
- substitutions: ``{posargs}`` (its default when it has one), ``{toxinidir}``,
  ``{envpython}``, ``{envbindir}``, ``{envdir}``, ``{envsitepackagesdir}`` (shell
  expansions of ``$ENV_DIR``, made where they stand: inside a quoted string or a quoted
  ``set_env`` value too), ``{envtmpdir}``/``{envlogdir}`` (directories under the sandbox's
  private /tmp, made before the command), ``{envname}``, ``{env:VAR:default}``,
  ``{[section]key}``, ``{/}`` and ``{:}``; ``\\{`` and ``\\}`` are braces. A command or
  dependency holding anything else is left out and noted: a literal ``{...}`` would only
  make a command fail for a reason that is not the tests'. tox runs ``set_env`` and
  ``commands_pre`` with every command, so when one of those cannot be resolved the
  commands are left out, with a note;
- ``deps`` (requirement lines, ``-r``/``-c``/``-e`` options split into arguments),
  ``extras``, ``dependency_groups`` (PEP 735), ``skip_install``/``package = skip``,
  ``set_env``/``setenv`` (assignments before each command) and ``commands_pre`` (run before
  each command, in the test phase: they may build into the work tree).
"""

from __future__ import annotations

import configparser
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from codecorpus.envs.text import line_of, quote, read_text

ENV_TMP = "/tmp/tox-env-tmp"
ENV_LOG = "/tmp/tox-env-log"
# Factors of environments that are not the test suite.
_NOT_TESTS = frozenset({
    "lint", "linting", "flake8", "pylint", "mypy", "typing", "types", "type", "typecheck",
    "pyright", "ty", "pyrefly", "docs", "doc", "docset", "style", "format", "fmt", "black",
    "isort", "ruff", "pre-commit", "precommit", "codespell", "spell", "twine", "build",
    "release", "publish", "packaging", "check", "checks", "manifest", "readme", "changelog",
    "coverage", "report", "combine", "clean", "bench", "benchmark", "benchmarks", "safety",
    "security", "bandit", "pydocstyle", "docformatter", "autopep8", "update", "fetch",
    "compile", "upgrade", "dev", "develop", "venv", "cog", "pep8", "qa", "verify_tables",
    "doctest", "doctests", "sphinx", "linkcheck", "mkdocs", "perf", "asv",
})
_COND = re.compile(r"^([!\w.{},+-]+):\s+(.*)$")
_SUB = re.compile(r"\{([^{}]*)\}")
_NOT_FROM_AN_INDEX = re.compile(r"(^|[\s@])(git|hg|svn|bzr)\+|(^|[\s@])https?://")
"""A requirement fetched from a VCS or a URL: the sandbox reaches package indexes only."""
_WHOLE_REF = re.compile(r"\{\[([^\]]+)\]([\w-]+)\}")


@dataclass(frozen=True)
class ToxEnv:
    """One tox test environment as shell commands."""

    name: str
    file: str
    line: int
    install_package: bool
    extras: tuple[str, ...]
    groups: tuple[str, ...]
    deps: tuple[str, ...]
    """pip arguments, shell-quoted: ``-r requirements/tests.txt``, ``'pytest>=8'``."""
    commands: tuple[tuple[str, int], ...]
    """Each command with the line it was read from."""
    notes: tuple[str, ...] = field(default=())


def read_config(root: Path) -> tuple[configparser.ConfigParser, str, str] | None:
    """tox's configuration of a tree: the parser, the file it came from, that file's text.
    Looked for where tox 4 looks: ``tox.ini``, ``setup.cfg``'s ``[tox:tox]``,
    ``pyproject.toml`` (``[tool.tox] legacy_tox_ini``, or the native ``[tool.tox]`` tables),
    ``tox.toml``. A native TOML configuration is read as the ini it stands for
    (``toml_as_ini``)."""
    for name, section in (("tox.ini", "tox"), ("setup.cfg", "tox:tox")):
        text = read_text(root / name)
        ini = _parse(text) if text else None
        if ini is not None and (ini.has_section(section) or ini.has_section("testenv")
                                or any(s.startswith("testenv:") for s in ini.sections())):
            if section == "tox:tox":
                ini = _renamed(ini)
            return ini, name, text
    text = read_text(root / "pyproject.toml")
    try:
        table = (tomllib.loads(text).get("tool") or {}).get("tox")
    except tomllib.TOMLDecodeError:
        table = None
    if isinstance(table, dict):
        legacy = table.get("legacy_tox_ini")
        ini = _parse(legacy) if isinstance(legacy, str) else toml_as_ini(table)
        if ini is not None:
            return ini, "pyproject.toml", text
    text = read_text(root / "tox.toml")
    try:
        table = tomllib.loads(text) if text else None
    except tomllib.TOMLDecodeError:
        table = None
    ini = toml_as_ini(table) if isinstance(table, dict) else None
    return (ini, "tox.toml", text) if ini is not None else None


def toml_as_ini(table: dict) -> configparser.ConfigParser | None:
    """tox 4's native TOML configuration as the ini it stands for: ``env_list`` under
    ``[tox]``, ``env_run_base`` as ``[testenv]``, ``env.NAME`` as ``[testenv:NAME]``;
    ``commands`` (lists of argument lists) as shell lines; ``{replace = "posargs"}`` as its
    default, ``{replace = "env"}`` as its default, other replacements left as a
    substitution the resolver cannot make (so the line is left out and noted). None when
    the table configures no environment.

    >>> ini = toml_as_ini({"env_list": ["3.12", "lint"], "env_run_base": {
    ...     "deps": ["pytest>=8"], "commands": [["pytest", {"replace": "posargs",
    ...     "default": ["tests"], "extend": True}]]}})
    >>> ini["tox"]["env_list"], ini["testenv"]["deps"], ini["testenv"]["commands"]
    ('3.12\\nlint', 'pytest>=8', 'pytest tests')
    """
    envs = table.get("env") if isinstance(table.get("env"), dict) else {}
    base = table.get("env_run_base")
    if not isinstance(base, dict) and not envs:
        return None
    ini = configparser.ConfigParser(interpolation=None, strict=False)
    listed = table.get("env_list") or table.get("envlist") or []
    ini["tox"] = {"env_list": "\n".join(str(e) for e in listed if isinstance(e, str))}
    if isinstance(base, dict):
        ini["testenv"] = _toml_env(base)
    for name, env in envs.items():
        if isinstance(env, dict):
            ini[f"testenv:{name}"] = _toml_env(env)
    return ini


def _toml_env(env: dict) -> dict[str, str]:
    out = {}
    for key, value in env.items():
        if key in ("commands", "commands_pre") and isinstance(value, list):
            out[key] = "\n".join(" ".join(_toml_word(w) for w in c) if isinstance(c, list)
                                 else _toml_word(c) for c in value)
        elif key in ("set_env", "setenv") and isinstance(value, dict):
            out[key] = "\n".join(f"{k}={_toml_value(v)}" for k, v in value.items())
        elif isinstance(value, list):
            out[key] = "\n".join(_toml_value(v) for v in value)
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            out[key] = str(value)
    return out


def _toml_value(value) -> str:
    if isinstance(value, dict):
        kind = value.get("replace")
        default = value.get("default")
        if kind in ("posargs", "env") and default is not None:
            return (" ".join(map(str, default)) if isinstance(default, list) else str(default))
        if kind == "posargs":
            return ""
        return "{" + f"toml-replace:{kind}" + "}"  # not made here: noted and left out
    return str(value)


def _toml_word(word) -> str:
    if isinstance(word, dict):
        return _toml_value(word)
    return quote(str(word)) if "{" not in str(word) else str(word)


def _parse(text: str) -> configparser.ConfigParser | None:
    ini = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        ini.read_string(text)
    except configparser.Error:
        return None
    return ini


def _renamed(ini: configparser.ConfigParser) -> configparser.ConfigParser:
    """setup.cfg spells sections ``[tox:tox]`` and ``[testenv...]``: keep those only."""
    out = configparser.ConfigParser(interpolation=None, strict=False)
    for sec in ini.sections():
        name = "tox" if sec == "tox:tox" else sec
        if name == "tox" or name.startswith("testenv"):
            out[name] = dict(ini[sec])
    return out


def expand(text: str) -> list[str]:
    """tox's generative names: top-level commas, brace alternatives and numeric ranges.

    >>> expand("py3{9-11}-tests, lint")
    ['py39-tests', 'py310-tests', 'py311-tests', 'lint']
    >>> expand("py{38,py3}-{a,b}")
    ['py38-a', 'py38-b', 'pypy3-a', 'pypy3-b']
    """
    out = []
    for part in _split_top(text, ","):
        part = part.strip()
        if part and not part.startswith("#"):
            out += _braces(part)
    return out


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "{") - (ch == "}")
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    return [*parts, cur]


def _braces(text: str) -> list[str]:
    m = _SUB.search(text)
    if not m:
        return [text]
    alts: list[str] = []
    for alt in m.group(1).split(","):
        rng = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", alt)
        alts += ([str(i) for i in range(int(rng.group(1)), int(rng.group(2)) + 1)]
                 if rng else [alt.strip()])
    return [x for alt in alts for x in _braces(text[:m.start()] + alt + text[m.end():])]


def _env_names(ini: configparser.ConfigParser) -> list[str]:
    listed = ""
    if ini.has_section("tox"):
        listed = ini["tox"].get("env_list", ini["tox"].get("envlist", ""))
    names = [n for line in listed.splitlines() for n in expand(line)]
    names += [n for sec in ini.sections() if sec.startswith("testenv:")
              for n in expand(sec.split(":", 1)[1])]
    return list(dict.fromkeys(names)) or ["py"]


def _score(name: str) -> int:
    """How surely an environment name is the test suite on the host's Python (<= 0: not).
    A bare version (``3.11``, as tox 4 lists them) is a Python factor like ``py311``.

    >>> major, minor = platform.python_version_tuple()[:2]
    >>> [_score(n) for n in (f"{major}.{minor}", f"py{major}{minor}", "3.8", "docs", "lint-3.11")]
    [4, 4, 2, 0, 0]
    """
    factors = set(name.split("-"))
    if factors & _NOT_TESTS:
        return 0
    major, minor = platform.python_version_tuple()[:2]
    host = {f"py{major}{minor}", f"py{major}.{minor}", f"python{major}.{minor}",
            f"{major}.{minor}", f"{major}{minor}"}
    score = 0
    if factors & host:
        score += 4
    elif any(re.fullmatch(r"py(thon)?(\d[\d.]*)?|\d\.\d+|\d{2,3}", f) for f in factors):
        score += 2
    if any("pypy" in f for f in factors):
        score -= 3
    if any("test" in f or f == "unit" for f in factors):
        score += 2
    return score


def names_tests(name: str) -> bool:
    """Whether an environment (or nox session) name says it runs the tests: a test or
    Python-version factor, and no lint, docs, build or release one.

    >>> [names_tests(n) for n in ("tests", "py311", "3.12", "docs", "lint", "build-dist")]
    [True, True, True, False, False, False]
    """
    return _score(name) > 0


def chosen_env(ini: configparser.ConfigParser) -> str | None:
    """The environment that runs the tests on the host's Python (the first best scored)."""
    names = _env_names(ini)
    best = max(names, key=_score)
    return best if _score(best) > 0 else None


def _section(ini: configparser.ConfigParser, name: str) -> configparser.SectionProxy | None:
    for sec in ini.sections():
        if sec.startswith("testenv:") and name in expand(sec.split(":", 1)[1]):
            return ini[sec]
    return None


def _applies(cond: str, factors: set[str]) -> bool:
    """``a,b`` is a or b; ``a-b`` a and b; ``!a`` not a (braces expand first)."""
    for alt in expand(cond):
        if all((f[1:] not in factors) if f.startswith("!") else (f in factors)
               for f in alt.split("-")):
            return True
    return False


class _Resolver:
    """Values of one environment, factor conditions applied and substitutions made."""

    def __init__(self, ini: configparser.ConfigParser, name: str):
        self.ini, self.name = ini, name
        self.factors = set(name.split("-"))
        self.own = _section(ini, name)
        self.base = ini["testenv"] if ini.has_section("testenv") else None
        self.notes: list[str] = []
        self.needs_dirs: set[str] = set()

    def raw(self, *keys: str) -> str | None:
        for sec in (self.own, self.base):
            for key in keys:
                if sec is not None and key in sec:
                    return sec[key]
        return None

    def lines(self, *keys: str) -> list[str]:
        """A multi-line value: continuations joined, comments dropped, conditions applied,
        and a line that is only a reference to another value (``{[core]deps}``) replaced by
        that value's lines, as tox does: each is one requirement or command of its own."""
        return self._value_lines(self.raw(*keys) or "", 0)

    def _value_lines(self, value: str, depth: int) -> list[str]:
        value = re.sub(r"\\\s*\n\s*", " ", value)
        out = []
        for line in value.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            m = _COND.match(line)
            if m:
                if not _applies(m.group(1), self.factors):
                    continue
                line = m.group(2).strip()
            ref = _WHOLE_REF.fullmatch(line)
            if ref and depth < 10 and self.ini.has_option(ref.group(1), ref.group(2)):
                out += self._value_lines(self.ini.get(ref.group(1), ref.group(2)), depth + 1)
                continue
            out.append(line)
        return out

    def items(self, *keys: str) -> list[str]:
        """A list value: lines, and commas within a line."""
        return [x.strip() for line in self.lines(*keys) for x in line.split(",") if x.strip()]

    def boolean(self, key: str) -> bool:
        return (self.raw(key) or "").strip().lower() in ("true", "1", "yes")

    def substitute(self, text: str) -> str | None:
        """``text`` with tox's substitutions made; None when one cannot be resolved.

        Substitutions the shell makes when the command runs (``$ENV_DIR``) come marked
        (``_live``): ``_in_place`` or ``_shell_word`` turn the result into shell text."""
        dirs = set(self.needs_dirs)
        text = re.sub("[\0-\5]", "", text)  # the markers below are ours alone
        text = _posargs(text.replace("\\{", "\4").replace("\\}", "\5"))  # \{ \}: braces, kept
        text = re.sub(r"(^|\s)\[\](?=\s|$)", r"\1", text)  # tox 3's bare posargs
        for _ in range(10):
            new = _SUB.sub(lambda m: self._one(m.group(1)), text)
            if new == text:
                break
            text = new
        if "\0" in text or _SUB.search(text):
            shown = _bare(text).translate(_AS_WRITTEN)
            self.notes.append(f"left out (unresolved substitution): {shown[:120]}")
            self.needs_dirs = dirs  # a value left out needs no directory
            return None
        return re.sub(r"\s+", " ", text).strip().translate(_ESCAPED_BRACES)

    def _one(self, key: str) -> str:
        fixed = {"toxinidir": ".", "tox_root": ".", "toxworkdir": ".tox", "work_dir": ".tox",
                 "envpython": "python", "env_python": "python", "basepython": "python",
                 "base_python": "python", "envbindir": _live("$ENV_DIR/venv/bin"),
                 "env_bin_dir": _live("$ENV_DIR/venv/bin"), "envdir": _live("$ENV_DIR/venv"),
                 "env_dir": _live("$ENV_DIR/venv"), "envname": self.name, "env_name": self.name,
                 "/": "/", ":": ":", "envsitepackagesdir": _SITE, "env_site_packages_dir": _SITE}
        if key in fixed:
            return fixed[key]
        if key in ("envtmpdir", "env_tmp_dir", "envlogdir", "env_log_dir"):
            path = ENV_TMP if "tmp" in key else ENV_LOG
            self.needs_dirs.add(path)
            return path
        if key.startswith("env:"):
            return key.split(":", 2)[2] if key.count(":") >= 2 else ""
        ref = re.fullmatch(r"\[([^\]]+)\]([\w-]+)", key)
        if ref and self.ini.has_option(ref.group(1), ref.group(2)):
            return " ".join(self.ini.get(ref.group(1), ref.group(2)).split())
        return "\0" + key + "\1"  # unresolved: kept, and the caller drops the line


def _live(shell: str) -> str:
    """A substitution the shell makes when the command runs, marked so that quoting leaves
    it live (no braces in it: the substitution loop would read them as a key)."""
    return f"\2{shell}\3"


_ESCAPED_BRACES = {4: "{", 5: "}"}
_AS_WRITTEN = {0: "{", 1: "}", 4: "\\{", 5: "\\}"}  # a note shows the line as the file spells it
_SITE = _live("$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')")
_LIVE = re.compile("\2([^\3]*)\3")


def _bare(text: str) -> str:
    return text.replace("\2", "").replace("\3", "")


def _in_place(command: str) -> str:
    """A substituted command as shell text: each live part double-quoted where it stands, and
    inside a single-quoted string that string is closed around it, so that the shell expands
    it wherever tox's substitution was (``'{envdir}/x'`` -> ``''"$ENV_DIR/venv"'/x'``)."""
    out, opened, i = [], "", 0
    while i < len(command):
        ch = command[i]
        if ch == "\2":
            end = command.index("\3", i)
            live = command[i + 1:end]
            out.append({"'": f"'\"{live}\"'", '"': live}.get(opened, f'"{live}"'))
            i = end + 1
            continue
        if ch == "\\" and opened != "'" and command[i + 1:i + 2] != "\2":
            out.append(command[i:i + 2])
            i += 2
            continue
        if ch in "'\"" and opened in ("", ch):
            opened = "" if opened else ch
        out.append(ch)
        i += 1
    return "".join(out)


def _shell_word(value: str) -> str:
    """A substituted value as one shell word: its text quoted, its live parts double-quoted
    (``{envbindir}:/usr/bin`` -> ``"$ENV_DIR/venv/bin":/usr/bin``)."""
    parts = _LIVE.split(value)  # text, live, text, ...
    word = "".join(f'"{part}"' if i % 2 else quote(part) if part else ""
                   for i, part in enumerate(parts))
    return word or "''"


def _posargs(text: str) -> str:
    """``{posargs}`` -> nothing, ``{posargs:default}`` -> its default (nested braces kept)."""
    while True:
        start = text.find("{posargs")
        if start < 0:
            return text
        depth, end = 0, start
        for end in range(start, len(text)):
            depth += (text[end] == "{") - (text[end] == "}")
            if depth == 0:
                break
        inner = text[start + 1: end]
        default = inner.split(":", 1)[1] if ":" in inner else ""
        text = text[:start] + default + text[end + 1:]


def not_from_an_index(requirement: str) -> bool:
    """Whether a requirement is fetched from a VCS or a URL, which the sandbox cannot reach.

    >>> not_from_an_index("git+https://github.com/a/b"), not_from_an_index("nbval @ https://x/y.zip")
    (True, True)
    >>> not_from_an_index("pytest>=8")
    False
    """
    return bool(_NOT_FROM_AN_INDEX.search(requirement))


def _pip_args(dep: str) -> list[str]:
    """One ``deps`` line as pip arguments: ``-r file`` and the like split, a requirement
    quoted for the shell."""
    m = re.fullmatch(r"(-[rce]|--requirement|--constraint|--editable)\s*=?\s*(\S.*)", dep)
    if m:
        return [m.group(1), _shell_word(m.group(2).strip())]
    return [_shell_word(dep)]


def resolve(ini: configparser.ConfigParser, name: str, file: str, text: str) -> ToxEnv:
    """The install settings and commands of environment ``name``."""
    r = _Resolver(ini, name)
    deps = []
    for dep in r.lines("deps"):
        dep = r.substitute(dep)
        if dep and not_from_an_index(dep):
            r.notes.append(f"left out (not from a package index): {dep[:120]}")
        elif dep:
            deps += _pip_args(dep)
    header = f"[{r.own.name}]" if r.own is not None else "[testenv]"
    first = (line_of(text, header) or line_of(text, "[testenv") or line_of(text, "env_run_base")
             or line_of(text, "[tool.tox") or line_of(text, "env_list"))
    commands = _commands(r, text, first)
    package = (r.raw("package") or "").strip()
    skip = r.boolean("skip_install") or package == "skip"
    return ToxEnv(name, file, first, not skip, tuple(r.items("extras")),
                  tuple(r.items("dependency_groups")), tuple(deps), tuple(commands),
                  tuple(r.notes))


def _commands(r: _Resolver, text: str, first: int) -> list[tuple[str, int]]:
    """Each command with its line, ``set_env``'s assignments and ``commands_pre`` before it;
    none when one of those cannot be resolved (noted): tox would not run them without it."""
    env_vars, unresolved = [], []
    for item in r.lines("set_env", "setenv"):
        key, eq, value = item.partition("=")
        value = r.substitute(value.strip()) if eq else ""
        if value is None:
            unresolved.append(f"set_env {key.strip()}")
        elif eq and re.fullmatch(r"[A-Za-z_]\w*", key.strip()):
            env_vars.append(f"{key.strip()}={_shell_word(value)}")
    commands = []
    for cmd in r.lines("commands"):
        line = line_of(text, cmd[:30]) or first
        cmd = r.substitute(cmd.lstrip("-! ").strip())
        if cmd:
            commands.append((" ".join([*env_vars, _in_place(cmd)]), line))
    pre = []
    for cmd in r.lines("commands_pre"):
        resolved = r.substitute(cmd)
        if resolved is None:
            unresolved.append("commands_pre")
        elif resolved:
            pre.append(_in_place(resolved))
    if unresolved and commands:
        after = " and ".join(dict.fromkeys(unresolved))
        r.notes.append(f"commands left out: tox runs them after {after}, which cannot be resolved")
        return []
    if r.needs_dirs:
        pre.insert(0, "mkdir -p " + " ".join(sorted(r.needs_dirs)))
    return [(" && ".join([*pre, c]), line) for c, line in commands]


def read(root: Path) -> ToxEnv | None:
    """The test environment of a tree's tox configuration (None without one)."""
    found = read_config(Path(root))
    if found is None:
        return None
    ini, file, text = found
    name = chosen_env(ini)
    return resolve(ini, name, file, text) if name else None

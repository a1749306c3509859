"""In-repository dependency order: parse imports, resolve them to files, order the files.

A long-context repository document reads best when a file comes after the
files it uses (DeepSeek-Coder and Qwen2.5-Coder build repository-level data
this way). Imports are found with one regular expression per language, not a
parser: that is enough to resolve *in-repo* dependencies, which are all the
order needs, and it never fails on code a grammar would reject. Specifiers
that resolve to no file of the repository (the standard library, third-party
packages) are ignored.

Resolution per language (by file extension):

- Python: ``import a.b`` / ``from a.b import c`` / relative ``from ..m import x``;
  absolute modules match any file whose dotted path *ends with* the module
  (``src/`` layouts and ``Lib/`` trees resolve), the shortest path winning.
- JavaScript/TypeScript: relative ``import``/``export ... from``/``require()``/
  ``import()``, with the usual extension and ``index`` fallbacks.
- Java: ``import a.b.C;`` and ``import a.b.*;`` by path suffix.
- Go: import paths whose tail names a directory of the repository (every
  ``.go`` file in it).
- Rust: ``mod x;`` next to the declaring file, ``use crate::/super::/self::`` paths.
- C/C++: ``#include "x.h"`` / ``<x.h>``, next to the includer first, then by path suffix.
- C#: ``using A.B;`` to every file that declares ``namespace A.B``.

The order repeatedly takes the file with the fewest dependencies not yet
emitted, ties by path, so cycles (legal in Python, C, Go packages ...) are
tolerated: the file of a cycle with the fewest open dependencies goes first.
It costs O((files + edges) log files) with a lazy heap.
"""

from __future__ import annotations

import heapq
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping

PY_EXT = (".py", ".pyi")
JS_EXT = (".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts")
C_EXT = (".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".ipp", ".inl")

_PY_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w.]+(?:[ \t]*,[ \t]*[\w.]+)*)", re.M)
_PY_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+\(?([\w., \t*]+)", re.M)
_JS_SPEC = re.compile(
    r"""(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*|^\s*import\s+)["'](\.{1,2}/[^"'\n]*|\.{1,2})["']""",
    re.M,
)
_JAVA_IMPORT = re.compile(r"^[ \t]*import[ \t]+(?:static[ \t]+)?([\w.]+(?:\.\*)?)[ \t]*;", re.M)
_GO_SINGLE = re.compile(r'^[ \t]*import[ \t]+(?:[\w.]+[ \t]+)?"([^"]+)"', re.M)
_GO_BLOCK = re.compile(r"^[ \t]*import[ \t]*\(([^)]*)\)", re.M | re.S)
_GO_SPEC = re.compile(r'"([^"]+)"')
_RS_MOD = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?mod[ \t]+(\w+)[ \t]*;", re.M)
_RS_USE = re.compile(r"\buse[ \t]+((?:crate|super|self)(?:::\w+)+)")
_C_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.M)
_CS_USING = re.compile(r"^[ \t]*using[ \t]+(?:static[ \t]+)?([\w.]+)[ \t]*;", re.M)
_CS_NAMESPACE = re.compile(r"^[ \t]*namespace[ \t]+([\w.]+)", re.M)


def _ext(path: str) -> str:
    return posixpath.splitext(path)[1].lower()


class _RepoIndex:
    """Lookups from module names, directories and path suffixes to the repository's files."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = sorted(set(paths))
        self.path_set = set(self.paths)
        self.by_suffix: dict[str, list[str]] = defaultdict(list)  # "a/b.h" -> files ending so
        self.by_dir: dict[str, list[str]] = defaultdict(list)
        self.py_modules: dict[str, list[str]] = defaultdict(list)  # dotted suffix -> files
        for path in self.paths:
            parts = path.split("/")
            for i in range(len(parts)):
                self.by_suffix["/".join(parts[i:])].append(path)
            self.by_dir[posixpath.dirname(path)].append(path)
            if _ext(path) in PY_EXT:
                stem = [*parts[:-1], posixpath.splitext(parts[-1])[0]]
                if stem[-1] == "__init__":
                    stem = stem[:-1]
                for i in range(len(stem)):
                    self.py_modules[".".join(stem[i:])].append(path)

    def suffix(self, tail: str) -> str | None:
        """The shortest (then first) path ending with ``/tail`` or equal to it."""
        hits = self.by_suffix.get(tail)
        return min(hits, key=lambda p: (len(p), p)) if hits else None

    def py_module(self, dotted: str) -> str | None:
        hits = self.py_modules.get(dotted)
        return min(hits, key=lambda p: (len(p), p)) if hits else None


def _python_deps(path: str, text: str, index: _RepoIndex) -> set[str]:
    deps: set[str] = set()
    for m in _PY_IMPORT.finditer(text):
        for name in m.group(1).split(","):
            _add(deps, _py_absolute(name.strip(), index))
    package = posixpath.dirname(path).split("/") if posixpath.dirname(path) else []
    for m in _PY_FROM.finditer(text):
        module, names = m.group(1), [n.strip() for n in m.group(2).split(",")]
        names = [n.split()[0] for n in names if n and n.split()[0] != "*"]
        dots = len(module) - len(module.lstrip("."))
        if dots:  # relative: resolve against the importer's package directory
            base = package[: len(package) - (dots - 1)] if dots - 1 <= len(package) else []
            rest = [p for p in module[dots:].split(".") if p]
            target = "/".join(base + rest)
            found = _py_file(target, index)
            _add(deps, found)
            for n in names:
                _add(deps, _py_file(posixpath.join(target, n) if target else n, index))
        else:
            found = _py_absolute(module, index)
            _add(deps, found)
            for n in names:
                _add(deps, index.py_module(f"{module}.{n}"))
    deps.discard(path)
    return deps


def _py_absolute(module: str, index: _RepoIndex) -> str | None:
    return index.py_module(module) if module else None


def _py_file(target: str, index: _RepoIndex) -> str | None:
    for cand in (f"{target}.py", f"{target}.pyi", f"{target}/__init__.py"):
        if cand.lstrip("/") in index.path_set:
            return cand.lstrip("/")
    return None


def _js_deps(path: str, text: str, index: _RepoIndex) -> set[str]:
    deps: set[str] = set()
    here = posixpath.dirname(path)
    for m in _JS_SPEC.finditer(text):
        target = posixpath.normpath(posixpath.join(here, m.group(1)))
        cands = [target] + [target + e for e in JS_EXT] + [f"{target}/index{e}" for e in JS_EXT]
        _add(deps, next((c for c in cands if c in index.path_set), None))
    deps.discard(path)
    return deps


def _java_deps(path: str, text: str, index: _RepoIndex) -> set[str]:
    deps: set[str] = set()
    for m in _JAVA_IMPORT.finditer(text):
        name = m.group(1)
        if name.endswith(".*"):
            directory = name[:-2].replace(".", "/")
            for d, files in index.by_dir.items():
                if d == directory or d.endswith("/" + directory):
                    deps.update(f for f in files if f.endswith(".java"))
        else:
            parts = name.split(".")
            # a static import names a member: try the class, then its enclosing class
            for cut in (len(parts), len(parts) - 1):
                found = index.suffix("/".join(parts[:cut]) + ".java") if cut > 0 else None
                if found:
                    deps.add(found)
                    break
    deps.discard(path)
    return deps


def _go_deps(path: str, text: str, index: _RepoIndex) -> set[str]:
    specs = [m.group(1) for m in _GO_SINGLE.finditer(text)]
    for block in _GO_BLOCK.finditer(text):
        specs += _GO_SPEC.findall(block.group(1))
    deps: set[str] = set()
    for spec in specs:
        parts = spec.split("/")
        for i in range(len(parts)):  # longest tail of the import path that is a repo directory
            files = index.by_dir.get("/".join(parts[i:]))
            if files:
                deps.update(f for f in files if f.endswith(".go") and not f.endswith("_test.go"))
                break
    deps.discard(path)
    return {d for d in deps if posixpath.dirname(d) != posixpath.dirname(path)}


def _rust_deps(path: str, text: str, index: _RepoIndex) -> set[str]:
    deps: set[str] = set()
    here, stem = posixpath.dirname(path), posixpath.splitext(posixpath.basename(path))[0]
    mod_dir = here if stem in ("lib", "main", "mod") else posixpath.join(here, stem)
    for m in _RS_MOD.finditer(text):
        name = m.group(1)
        for cand in (posixpath.join(mod_dir, f"{name}.rs"), posixpath.join(mod_dir, name, "mod.rs")):
            if cand in index.path_set:
                deps.add(cand)
                break
    crate_root = _rust_crate_root(path)
    for m in _RS_USE.finditer(text):
        head, *rest = m.group(1).split("::")
        base = {"crate": crate_root, "self": mod_dir, "super": posixpath.dirname(mod_dir)}[head]
        for cut in range(len(rest), 0, -1):  # longest module path that is a file
            target = posixpath.join(base, *rest[:cut])
            found = next((c for c in (f"{target}.rs", f"{target}/mod.rs") if c in index.path_set), None)
            if found:
                deps.add(found)
                break
    deps.discard(path)
    return deps


def _rust_crate_root(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[: parts.index("src") + 1]) if "src" in parts else ""


def _c_deps(path: str, text: str, index: _RepoIndex) -> set[str]:
    deps: set[str] = set()
    here = posixpath.dirname(path)
    for m in _C_INCLUDE.finditer(text):
        name = m.group(1).strip()
        local = posixpath.normpath(posixpath.join(here, name))
        _add(deps, local if local in index.path_set else index.suffix(posixpath.normpath(name)))
    deps.discard(path)
    return deps


def _csharp_namespaces(texts: Mapping[str, str]) -> dict[str, list[str]]:
    spaces: dict[str, list[str]] = defaultdict(list)
    for path, text in texts.items():
        if _ext(path) == ".cs":
            for m in _CS_NAMESPACE.finditer(text):
                spaces[m.group(1)].append(path)
    return spaces


def _csharp_deps(path: str, text: str, spaces: Mapping[str, list[str]]) -> set[str]:
    deps: set[str] = set()
    for m in _CS_USING.finditer(text):
        deps.update(spaces.get(m.group(1), ()))
    deps.discard(path)
    return deps


def _add(deps: set[str], found: str | None) -> None:
    if found is not None:
        deps.add(found)


def dependencies(texts: Mapping[str, str]) -> dict[str, set[str]]:
    """In-repo dependencies of every file: ``{path: {paths it imports}}`` (paths are repo-relative, POSIX)."""
    index = _RepoIndex(texts)
    spaces = _csharp_namespaces(texts)
    out: dict[str, set[str]] = {}
    for path in index.paths:
        text, ext = texts[path], _ext(path)
        if ext in PY_EXT:
            out[path] = _python_deps(path, text, index)
        elif ext in JS_EXT:
            out[path] = _js_deps(path, text, index)
        elif ext == ".java":
            out[path] = _java_deps(path, text, index)
        elif ext == ".go":
            out[path] = _go_deps(path, text, index)
        elif ext == ".rs":
            out[path] = _rust_deps(path, text, index)
        elif ext in C_EXT:
            out[path] = _c_deps(path, text, index)
        elif ext == ".cs":
            out[path] = _csharp_deps(path, text, spaces)
        else:
            out[path] = set()
    return out


def dependency_order(texts: Mapping[str, str]) -> list[str]:
    """Paths of ``texts`` with dependencies first; cycles broken by fewest open dependencies, then path.

    >>> dependency_order({"b.py": "import a", "a.py": "import c", "c.py": "", "z.py": ""})
    ['c.py', 'a.py', 'b.py', 'z.py']
    >>> dependency_order({"x.py": "import y", "y.py": "import x"})  # a cycle: ties by path
    ['x.py', 'y.py']
    """
    deps = dependencies(texts)
    users: dict[str, list[str]] = defaultdict(list)
    for path, ds in deps.items():
        for d in ds:
            users[d].append(path)
    open_count = {path: len(ds) for path, ds in deps.items()}
    heap = [(n, path) for path, n in open_count.items()]
    heapq.heapify(heap)
    done: set[str] = set()
    order: list[str] = []
    while heap:
        n, path = heapq.heappop(heap)
        if path in done or n != open_count[path]:
            continue  # a stale entry: the file was emitted or its count went down since
        done.add(path)
        order.append(path)
        for user in users[path]:
            if user not in done:
                open_count[user] -= 1
                heapq.heappush(heap, (open_count[user], user))
    return order

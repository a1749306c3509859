"""Dependency order on a small fixture repository per language."""

from __future__ import annotations

import pytest

from codecorpus.packing.deps import dependencies, dependency_order


def before(order: list[str], first: str, then: str) -> bool:
    return order.index(first) < order.index(then)


REPOS = {
    "python": {
        "app/main.py": "from app.models import User\nfrom .util import helper\nimport os\n",
        "app/models.py": "from app.db import base\n",
        "app/db/base.py": "import sqlite3\n",
        "app/db/__init__.py": "",
        "app/util.py": "from . import models\n",
        "app/__init__.py": "",
    },
    "javascript": {
        "src/index.ts": "import { a } from './lib/a';\nexport * from './lib';\nimport x from 'react';\n",
        "src/lib/a.ts": "const b = require('./b.js');\n",
        "src/lib/b.js": "module.exports = 1;\n",
        "src/lib/index.ts": "export const z = await import('./a');\n",
    },
    "java": {
        "src/main/java/com/x/App.java": "package com.x;\nimport com.x.model.User;\nimport java.util.List;\n",
        "src/main/java/com/x/model/User.java": "package com.x.model;\nimport com.x.util.*;\n",
        "src/main/java/com/x/util/Strings.java": "package com.x.util;\n",
    },
    "go": {
        "cmd/app/main.go": 'package main\n\nimport (\n\t"fmt"\n\t"github.com/x/repo/internal/store"\n)\n',
        "internal/store/store.go": 'package store\n\nimport "github.com/x/repo/internal/codec"\n',
        "internal/codec/codec.go": "package codec\n",
        "internal/codec/codec_test.go": 'package codec\n\nimport "testing"\n',
    },
    "rust": {
        "src/main.rs": "mod net;\nuse crate::util::fmt_all;\nfn main() {}\n",
        "src/net/mod.rs": "pub mod tcp;\nuse super::util;\n",
        "src/net/tcp.rs": "use crate::util::fmt_all;\n",
        "src/util.rs": "pub fn fmt_all() {}\n",
    },
    "c": {
        "src/main.c": '#include "app.h"\n#include <stdio.h>\n',
        "include/app.h": '#include "types.h"\n',
        "include/types.h": "typedef int t;\n",
        "src/app.c": '#include "../include/app.h"\n',
    },
    "csharp": {
        "App/Program.cs": "using System;\nusing App.Models;\nnamespace App { class P {} }\n",
        "App/Models/User.cs": "using App.Data;\nnamespace App.Models;\nclass User {}\n",
        "App/Data/Db.cs": "namespace App.Data\n{\n class Db {}\n}\n",
    },
}

EXPECTED_BEFORE = {
    "python": [("app/db/base.py", "app/models.py"), ("app/models.py", "app/util.py"),
               ("app/util.py", "app/main.py"), ("app/models.py", "app/main.py")],
    "javascript": [("src/lib/b.js", "src/lib/a.ts"), ("src/lib/a.ts", "src/lib/index.ts"),
                   ("src/lib/index.ts", "src/index.ts")],
    "java": [("src/main/java/com/x/util/Strings.java", "src/main/java/com/x/model/User.java"),
             ("src/main/java/com/x/model/User.java", "src/main/java/com/x/App.java")],
    "go": [("internal/codec/codec.go", "internal/store/store.go"),
           ("internal/store/store.go", "cmd/app/main.go")],
    "rust": [("src/util.rs", "src/net/tcp.rs"), ("src/net/tcp.rs", "src/net/mod.rs"),
             ("src/net/mod.rs", "src/main.rs")],
    "c": [("include/types.h", "include/app.h"), ("include/app.h", "src/main.c"), ("include/app.h", "src/app.c")],
    "csharp": [("App/Data/Db.cs", "App/Models/User.cs"), ("App/Models/User.cs", "App/Program.cs")],
}  # fmt: skip


@pytest.mark.parametrize("lang", sorted(REPOS))
def test_dependencies_come_first(lang):
    order = dependency_order(REPOS[lang])
    assert sorted(order) == sorted(REPOS[lang])
    for first, then in EXPECTED_BEFORE[lang]:
        assert before(order, first, then), (lang, first, then, order)


def test_resolved_edges_are_in_repo_only():
    deps = dependencies(REPOS["python"])
    assert deps["app/main.py"] == {"app/models.py", "app/util.py"}  # `os` is not in the repo
    assert dependencies(REPOS["go"])["cmd/app/main.go"] == {"internal/store/store.go"}
    assert dependencies(REPOS["c"])["src/main.c"] == {"include/app.h"}


def test_cycles_are_tolerated_and_ties_go_by_path():
    files = {"b.py": "import a\n", "a.py": "import b\n", "c.py": "import a\n", "d.py": ""}
    order = dependency_order(files)
    assert order == ["d.py", "a.py", "b.py", "c.py"]
    assert dependency_order(dict(reversed(list(files.items())))) == order  # input order is irrelevant

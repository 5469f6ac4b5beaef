"""Routers stay thin: no module under master/api/ imports SQLAlchemy or the models, opens a session,
runs a query or takes the cluster lock. That belongs to master/services/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[2] / "src" / "pedl" / "master" / "api"

FORBIDDEN_MODULES = ("sqlalchemy", "pedl.master.db")
# exception types only: api/errors.py maps a database that is down to a 503
ALLOWED_MODULES = ("sqlalchemy.exc",)
# method calls that touch the database or take the cluster lock (Controller.run)
FORBIDDEN_METHODS = {"session", "read_session", "execute", "scalar", "scalars", "run"}
FORBIDDEN_FUNCTIONS = {"select"}


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _forbidden_module(name: str) -> bool:
    return name not in ALLOWED_MODULES and any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES)


def problems(source: str, filename: str) -> list[str]:
    """'file:line: what' for each place the module touches the database directly."""
    tree = ast.parse(source, filename)
    skip: set[int] = set()  # nodes inside `if TYPE_CHECKING:` (annotations only, never run)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking_only(node):
            for stmt in node.body:
                skip.update(id(n) for n in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        what = None
        if isinstance(node, ast.Import):
            bad = [a.name for a in node.names if _forbidden_module(a.name)]
            what = f"imports {bad[0]}" if bad else None
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if _forbidden_module(module):
                what = f"imports from {module}"
            elif module == "pedl.master" and any(a.name == "db" for a in node.names):
                what = "imports pedl.master.db"
        elif isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr in FORBIDDEN_METHODS:
                what = f"calls .{fn.attr}("
            elif isinstance(fn, ast.Name) and fn.id in FORBIDDEN_FUNCTIONS:
                what = f"calls {fn.id}("
        if what is not None:
            found.append(f"{filename}:{node.lineno}: {what}")
    return sorted(found, key=lambda p: (p.split(":")[0], int(p.split(":")[1])))


def test_no_router_touches_the_database() -> None:
    found = []
    for path in sorted(API.glob("*.py")):
        found += problems(path.read_text(), str(path.relative_to(API.parents[2])))
    assert not found, "routers must call a service instead:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "import sqlalchemy\n",
    "from sqlalchemy import select\n",
    "from sqlalchemy.orm import Session\n",
    "from pedl.master.db import models\n",
    "from pedl.master import db\n",
    "def f(ctx):\n    with ctx.db.session() as s:\n        pass\n",
    "def f(ctx):\n    with ctx.db.read_session() as s:\n        pass\n",
    "def f(s):\n    s.execute(1)\n",
    "def f(s):\n    return s.scalar(1)\n",
    "def f(s):\n    return list(s.scalars(1))\n",
    "def f(q):\n    return select(q)\n",
    "def f(ctl):\n    ctl.run(lambda s: None)\n",
])
def test_the_check_catches(source: str) -> None:
    assert problems(source, "x.py")


def test_type_only_imports_are_allowed() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pedl.master.db import models\n"
    assert problems(source, "x.py") == []
    assert problems("from sqlalchemy.exc import OperationalError\n", "x.py") == []


MASTER = API.parent
# who may import the Controller: the context that holds it, the wiring that builds it, and the
# provisioner, a peer that runs its passes under the Controller's lock. Cluster operations and
# services take the effects protocol (cluster/effects.py) instead.
CONTROLLER_IMPORTERS = {"context.py", "wiring.py", "provisioner/provisioner.py"}


def controller_importers(root: Path) -> set[str]:
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "pedl.master.cluster.controller" for n in names) or (
                    isinstance(node, ast.ImportFrom) and node.module == "pedl.master.cluster"
                    and any(a.name == "controller" for a in node.names)):
                found.add(str(path.relative_to(root)))
    return found


def test_only_the_wiring_knows_the_controller() -> None:
    extra = controller_importers(MASTER) - CONTROLLER_IMPORTERS - {"cluster/controller.py"}
    assert not extra, f"these modules import the Controller; take cluster/effects.ClusterEffects instead: {extra}"


def test_the_controller_check_catches(tmp_path: Path) -> None:
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "a.py").write_text("from pedl.master.cluster.controller import Controller\n")
    (tmp_path / "b.py").write_text("from pedl.master.cluster import controller\n")
    (tmp_path / "c.py").write_text("from pedl.master.cluster import effects\n")
    assert controller_importers(tmp_path) == {"services/a.py", "b.py"}

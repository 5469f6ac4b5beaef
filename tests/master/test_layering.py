"""The master's layers: routers stay thin (no module under master/api/ imports SQLAlchemy or the models,
opens a session, runs a query or takes the cluster lock: that belongs to the domain packages), only the
wiring knows the Controller, and each layer imports only the layers below it (cluster/ no domain package)."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
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
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


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


@pytest.mark.parametrize(
    "source",
    [
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
    ],
)
def test_the_check_catches(source: str) -> None:
    assert problems(source, "x.py")


def test_type_only_imports_are_allowed() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pedl.master.db import models\n"
    assert problems(source, "x.py") == []
    assert problems("from sqlalchemy.exc import OperationalError\n", "x.py") == []


MASTER = API.parent
# who may import the Controller: the context that holds it, the wiring that builds it, and the
# provisioner, a peer that runs its passes under the Controller's lock. Cluster operations and
# services take the effects protocol (lifecycle/effects.py) instead.
CONTROLLER_IMPORTERS = {"context.py", "wiring.py", "provisioner/provisioner.py"}


def controller_importers(root: Path) -> set[str]:
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n == "pedl.master.cluster.controller" for n in names) or (
                isinstance(node, ast.ImportFrom)
                and node.module == "pedl.master.cluster"
                and any(a.name == "controller" for a in node.names)
            ):
                found.add(str(path.relative_to(root)))
    return found


def test_only_the_wiring_knows_the_controller() -> None:
    extra = controller_importers(MASTER) - CONTROLLER_IMPORTERS - {"cluster/controller.py"}
    assert not extra, f"these modules import the Controller; take lifecycle/effects.ClusterEffects instead: {extra}"


def test_the_controller_check_catches(tmp_path: Path) -> None:
    (tmp_path / "services").mkdir()
    (tmp_path / "services" / "a.py").write_text("from pedl.master.cluster.controller import Controller\n")
    (tmp_path / "b.py").write_text("from pedl.master.cluster import controller\n")
    (tmp_path / "c.py").write_text("from pedl.master.cluster import effects\n")
    assert controller_importers(tmp_path) == {"services/a.py", "b.py"}


# -- layers -----------------------------------------------------------------------------------------


def _load_module_graph():
    path = MASTER.parents[2] / "tools" / "module_graph.py"
    spec = importlib.util.spec_from_file_location("pedl_tools_module_graph", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


module_graph = _load_module_graph()

# the domain packages: each holds a resource's service functions, rules and persistence helpers
DOMAINS = frozenset(
    {"agents", "checkpoints", "experiments", "identity", "metrics", "model_registry", "tasks", "trials", "workspaces"}
)
# what each layer must not import (module-level, lazy and TYPE_CHECKING imports alike): from the bottom, lifecycle/
# (the rules every domain and the cluster obey), cluster/ and provisioner/ (who runs where, and on what), the
# domains, workers/ (their background loops), api/ (the routers)
FORBIDDEN = {
    # Determined's v1 messages: plain pydantic models every layer may return
    "wire": DOMAINS | {"lifecycle", "cluster", "provisioner", "workers", "api", "db", "(root)"},
    "lifecycle": DOMAINS | {"cluster", "provisioner", "workers", "api"},
    "cluster": DOMAINS | {"workers", "api"},
    "provisioner": DOMAINS | {"workers", "api"},
    **{domain: frozenset({"workers", "api"}) for domain in DOMAINS},
    "workers": frozenset({"api"}),
}


def layer_violations(root: Path) -> list[str]:
    """'importer -> imported (kind)' for each import a layer must not make, under the package at `root`."""
    graph = module_graph.build_graph(root)
    return sorted(
        f"{source} -> {target} ({kind})"
        for (source, target), kind in graph.edges.items()
        if module_graph.layer_of(graph, target) in FORBIDDEN.get(module_graph.layer_of(graph, source), ())
    )


def test_each_layer_imports_only_the_layers_below_it() -> None:
    found = layer_violations(MASTER)
    assert not found, "move the rule the lower layer needs below it (lifecycle/), or the caller up:\n" + "\n".join(
        found
    )


def test_no_module_is_left_in_a_services_package() -> None:
    assert not (MASTER / "services").exists(), "services/ is gone: a module belongs to its domain package"


def test_the_layer_check_catches(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/cluster/__init__.py": "",
        "pkg/cluster/a.py": "def f():\n    from pkg.experiments import service\n",
        "pkg/lifecycle/__init__.py": "",
        "pkg/lifecycle/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.cluster import a\n",
        "pkg/experiments/__init__.py": "",
        "pkg/experiments/service.py": "from pkg.lifecycle import b\nfrom pkg.cluster import a\n",
        "pkg/api/__init__.py": "",
        "pkg/api/c.py": "from pkg.experiments import service\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert layer_violations(tmp_path / "pkg") == [
        "pkg.cluster.a -> pkg.experiments.service (lazy)",
        "pkg.lifecycle.b -> pkg.cluster.a (typing)",
    ]


# -- tests mirror the packages ----------------------------------------------------------------------

INTERNALS = MASTER.parents[2] / "docs" / "internals.md"
MIRRORED = ("lifecycle", "workers", "wire", *sorted(DOMAINS))
TESTS = MASTER.parents[2] / "tests" / "master"


def modules_tested_elsewhere(text: str) -> dict[str, list[str]]:
    """module (`<package>/<module>.py`) -> the test files docs/internals.md says test it, from its lines
    "- `<package>/<module>.py`: `tests/...py`, ..."."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"- `([a-z_]+/[a-z_]+\.py)`: (.+)$", line)
        if match:
            found[match.group(1)] = re.findall(r"`(tests/[\w/]+\.py)`", match.group(2))
    return found


def mirror_problems(tests: Path, sources: list[str], elsewhere: dict[str, list[str]]) -> list[str]:
    """What breaks the rule that each module (`<package>/<module>.py`) has its test at
    tests/master/<package>/test_<module>.py or one line in docs/internals.md naming where it is tested."""
    problems = []
    for module in sources:
        package, name = module.split("/")
        mirrored = (tests / package / f"test_{name}").exists()
        if mirrored and module in elsewhere:
            problems.append(f"{module} has tests/master/{package}/test_{name}: drop its line in docs/internals.md")
        elif not mirrored and not elsewhere.get(module):
            problems.append(f"{module}: no tests/master/{package}/test_{name} and no line in docs/internals.md")
    for module, paths in elsewhere.items():
        if module not in sources:
            problems.append(f"docs/internals.md names {module}, which is not a module of {', '.join(MIRRORED)}")
        problems += [
            f"docs/internals.md: {module} is tested in {p}, which does not exist"
            for p in paths
            if not (tests.parents[1] / p).exists()
        ]
    return problems


def test_each_module_of_a_package_has_its_test_at_the_mirrored_path_or_a_line_saying_where() -> None:
    sources = sorted(
        f"{p.parent.name}/{p.name}"
        for package in MIRRORED
        for p in (MASTER / package).glob("*.py")
        if p.name != "__init__.py"
    )
    problems = mirror_problems(TESTS, sources, modules_tested_elsewhere(INTERNALS.read_text()))
    assert not problems, "\n".join(problems)


def test_the_mirror_check_catches(tmp_path: Path) -> None:
    (tmp_path / "tests" / "master" / "lifecycle").mkdir(parents=True)
    (tmp_path / "tests" / "master" / "lifecycle" / "test_a.py").write_text("")
    (tmp_path / "tests" / "master" / "api").mkdir()
    (tmp_path / "tests" / "master" / "api" / "test_c.py").write_text("")
    elsewhere = modules_tested_elsewhere(
        "- `lifecycle/a.py`: `tests/master/api/test_c.py`\n"
        "- `lifecycle/c.py`: `tests/master/api/test_gone.py`\n"
        "- `services/d.py`: `tests/master/api/test_c.py`\n"
    )
    problems = mirror_problems(
        tmp_path / "tests" / "master", ["lifecycle/a.py", "lifecycle/b.py", "lifecycle/c.py"], elsewhere
    )
    assert problems == [
        "lifecycle/a.py has tests/master/lifecycle/test_a.py: drop its line in docs/internals.md",
        "lifecycle/b.py: no tests/master/lifecycle/test_b.py and no line in docs/internals.md",
        "docs/internals.md: lifecycle/c.py is tested in tests/master/api/test_gone.py, which does not exist",
        f"docs/internals.md names services/d.py, which is not a module of {', '.join(MIRRORED)}",
    ]

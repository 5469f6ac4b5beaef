"""No new import cycle in src/pedl: the import graph (tools/module_graph.py) has only the cycles listed here.

TYPE_CHECKING-only and function-level imports count as edges: either way the two modules depend on each other.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "pedl"


def _load_module_graph():
    spec = importlib.util.spec_from_file_location("pedl_tools_module_graph", ROOT / "tools" / "module_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


module_graph = _load_module_graph()

# The cycles src/pedl has: none. An entry here would be a cycle
# tolerated for now, as its sorted module names; a new cycle fails the test, and so does a listed one
# that is gone. Keep it empty.
KNOWN_CYCLES: list[tuple[str, ...]] = []


def cycle_problems(graph, known: list[tuple[str, ...]]) -> list[str]:
    """What is wrong with `known` as the list of the graph's cycles: new cycles, and listed ones now gone."""
    found = graph.cycles()
    problems = [
        f"new import cycle: {', '.join(cycle)}\n"
        + "\n".join(f"    {a} -> {b} ({kind})" for a, b, kind in graph.cycle_edges(cycle))
        for cycle in found
        if cycle not in known
    ]
    problems += [
        f"listed cycle no longer exists, remove it from KNOWN_CYCLES: {', '.join(cycle)}"
        for cycle in known
        if tuple(sorted(cycle)) not in found
    ]
    return problems


def test_src_pedl_has_only_the_known_import_cycles() -> None:
    problems = cycle_problems(module_graph.build_graph(SRC), KNOWN_CYCLES)
    assert not problems, "\n".join(problems)


def test_known_cycles_are_listed_sorted() -> None:
    assert all(list(cycle) == sorted(cycle) for cycle in KNOWN_CYCLES)


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_a_type_checking_cycle_is_found_and_a_stale_entry_is_reported(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": "def f():\n    from ..sub import d\n",
            "pkg/sub/d.py": "from . import c\n",
            "pkg/e.py": "import pkg.a\n",
        },
    )
    graph = module_graph.build_graph(package)
    assert graph.cycles() == [("pkg.a", "pkg.b"), ("pkg.sub.c", "pkg.sub.d")]
    assert graph.edges[("pkg.b", "pkg.a")] == module_graph.TYPING
    assert graph.edges[("pkg.sub.c", "pkg.sub.d")] == module_graph.LAZY
    assert graph.edges[("pkg.e", "pkg.a")] == module_graph.RUNTIME
    problems = cycle_problems(graph, [("pkg.sub.c", "pkg.sub.d"), ("pkg.a", "pkg.e")])
    assert len(problems) == 2
    assert problems[0].startswith("new import cycle: pkg.a, pkg.b")
    assert "pkg.b -> pkg.a (typing)" in problems[0]
    assert problems[1].startswith("listed cycle no longer exists") and "pkg.a, pkg.e" in problems[1]


def test_the_dot_output_draws_type_checking_imports_dashed(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/api/__init__.py": "",
            "pkg/api/a.py": "from pkg.services import b\n",
            "pkg/services/__init__.py": "",
            "pkg/services/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.api.a\n",
        },
    )
    dot = module_graph.to_dot(module_graph.build_graph(package))
    assert 'subgraph "cluster_api"' in dot and 'subgraph "cluster_services"' in dot
    assert '"pkg.services.b" -> "pkg.api.a" [style=dashed' in dot
    assert '"pkg.api.a" -> "pkg.services.b" [style=solid' in dot


def test_the_package_drawing_counts_imports_between_packages_and_leaves_the_wiring_out(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/wiring.py": "from pkg.api import a\n",
            "pkg/api/__init__.py": "",
            "pkg/api/a.py": "from pkg.domain import b, c\n",
            "pkg/domain/__init__.py": "",
            "pkg/domain/b.py": "def f():\n    from pkg.low import d\n",
            "pkg/domain/c.py": "",
            "pkg/low/__init__.py": "",
            "pkg/low/d.py": "",
        },
    )
    dot = module_graph.packages_to_dot(module_graph.build_graph(package))
    assert '"domain" [label="domain/ (3)"]' in dot  # its __init__ and two modules
    assert '"api" -> "domain" [label="2", style=solid]' in dot
    assert '"domain" -> "low" [label="1", style=dotted]' in dot
    assert "wiring" not in dot and "(root)" not in dot

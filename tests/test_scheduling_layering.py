"""The decision core stays pure and below what drives it: pedl.scheduling imports nothing from pedl.master (nor
from the simulator, the agent, the CLI or the library), and no database, cloud or HTTP client; the simulator
drives it as the master does, without importing pedl.master. Every kind of import counts: module-level, inside
a function, under TYPE_CHECKING. (Inside the master, tests/master/test_layering.py keeps cluster/ and
provisioner/ off the domain packages.)"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_cycles import SRC, module_graph

# package of pedl -> the packages of pedl it must not import
FORBIDDEN = {
    "scheduling": frozenset({"master", "sim", "agent", "cli", "core", "deploy", "launch", "webui"}),
    "sim": frozenset({"master"}),
}
# what pure decision code never imports: a database, a cloud, an HTTP stack
OUTSIDE = {"scheduling": frozenset({"sqlalchemy", "boto3", "botocore", "fastapi", "starlette", "httpx"})}


def violations(root: Path) -> list[str]:
    """'importer -> imported (kind)' for each import of a package (directly under `root`) that it must not make."""
    graph = module_graph.build_graph(root)
    found = [
        f"{source} -> {target} ({kind})"
        for (source, target), kind in graph.edges.items()
        if module_graph.layer_of(graph, target) in FORBIDDEN.get(module_graph.layer_of(graph, source), ())
    ]
    for package, names in OUTSIDE.items():
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                imported = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                found += [
                    f"{path.relative_to(root.parent)}:{node.lineno} -> {name}"
                    for name in imported
                    if name.split(".")[0] in names
                ]
    return sorted(found)


def test_the_decision_core_and_the_simulator_import_no_master() -> None:
    found = violations(SRC)
    assert not found, (
        "pedl.scheduling decides from state it is given, and pedl.sim drives it without a master: "
        "pass what a decision needs in, or move the code that reads it to the master:\n" + "\n".join(found)
    )


def test_the_check_catches(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/master/__init__.py": "",
        "pkg/master/lifecycle/__init__.py": "",
        "pkg/master/lifecycle/states.py": "",
        "pkg/master/experiments/__init__.py": "",
        "pkg/master/experiments/service.py": "from pkg.scheduling import decider\n",
        "pkg/scheduling/__init__.py": "",
        "pkg/scheduling/decider.py": "def f():\n    from pkg.master.lifecycle import states\n",
        "pkg/scheduling/snapshot.py": "import sqlalchemy.orm\nfrom pkg.scheduling import decider\n",
        "pkg/scheduling/searcher/__init__.py": "",
        "pkg/scheduling/searcher/base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from pkg.master.experiments import service\n",
        "pkg/sim/__init__.py": "",
        "pkg/sim/replay.py": "from pkg.scheduling import decider\nfrom pkg.master.lifecycle.states import X\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert violations(tmp_path / "pkg") == [
        "pkg.scheduling.decider -> pkg.master.lifecycle.states (lazy)",
        "pkg.scheduling.searcher.base -> pkg.master.experiments.service (typing)",
        "pkg.sim.replay -> pkg.master.lifecycle.states (runtime)",
        "pkg/scheduling/snapshot.py:1 -> sqlalchemy.orm",
    ]

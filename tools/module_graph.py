"""Module dependency graph of a Python package, from its import statements (stdlib ast only).

Prints Graphviz DOT on stdout and reports import cycles on stderr; `--cycles` prints only cycles;
`--layers` counts the imports between the directory's packages (api, cluster, experiments, ...), and
`--packages` draws them.

    python tools/module_graph.py src/pedl/master | dot -Tsvg > master-modules.svg
    python tools/module_graph.py --packages src/pedl/master | dot -Tsvg > docs/images/master-packages.svg
    python tools/module_graph.py --cycles src/pedl
    python tools/module_graph.py --layers src/pedl/master

Edges are import statements between modules under the given directory. An import inside
`if TYPE_CHECKING:` is drawn dashed, one inside a function (a lazy import) dotted, a module-level
one solid. All three count as edges when looking for cycles: a cycle that only exists through a
TYPE_CHECKING import is still two modules that cannot be understood, or moved, apart.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

RUNTIME = "runtime"  # a module-level import
LAZY = "lazy"  # an import inside a function or method body
TYPING = "typing"  # an import inside `if TYPE_CHECKING:`

# When one module imports another in several ways, the edge takes the strongest kind.
_STRENGTH = {TYPING: 0, LAZY: 1, RUNTIME: 2}


@dataclass
class ModuleGraph:
    """Modules (dotted names) under one directory and the imports between them."""

    root: str  # dotted name of the directory's package, e.g. "pedl.master"
    modules: set[str] = field(default_factory=set)
    edges: dict[tuple[str, str], str] = field(default_factory=dict)  # (importer, imported) -> kind

    def add_edge(self, source: str, target: str, kind: str) -> None:
        old = self.edges.get((source, target))
        if old is None or _STRENGTH[kind] > _STRENGTH[old]:
            self.edges[(source, target)] = kind

    def cycles(self) -> list[tuple[str, ...]]:
        """Strongly connected components with more than one module (or a module importing itself),
        each as a sorted tuple, the list sorted."""
        successors: dict[str, list[str]] = {m: [] for m in self.modules}
        for source, target in self.edges:
            successors[source].append(target)
        found = [
            tuple(sorted(component))
            for component in _strongly_connected(successors)
            if len(component) > 1 or (component[0], component[0]) in self.edges
        ]
        return sorted(found)

    def cycle_edges(self, cycle: Iterable[str]) -> list[tuple[str, str, str]]:
        """The edges inside one cycle, as (importer, imported, kind)."""
        members = set(cycle)
        return sorted(
            (source, target, kind)
            for (source, target), kind in self.edges.items()
            if source in members and target in members
        )


def _package_root(directory: Path) -> Path:
    """The directory holding the top-level package that `directory` belongs to."""
    top = directory
    while (top.parent / "__init__.py").exists():
        top = top.parent
    return top.parent


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement in a module, with its kind."""

    def walk(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for statement in child.body:
                    yield from walk(ast.Module(body=[statement], type_ignores=[]), TYPING)
                for statement in child.orelse:
                    yield from walk(ast.Module(body=[statement], type_ignores=[]), kind)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, TYPING if kind == TYPING else LAZY)
            else:
                yield from walk(child, kind)

    yield from walk(tree, RUNTIME)


def _targets(statement: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> Iterator[str]:
    """The known modules one import statement names."""
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            yield from _longest_known(alias.name, known)
        return
    if statement.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(statement.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{statement.module}" if statement.module else package
    else:
        base = statement.module or ""
    for alias in statement.names:
        candidate = f"{base}.{alias.name}"
        if candidate in known:
            yield candidate
        else:
            yield from _longest_known(base, known)


def _longest_known(name: str, known: set[str]) -> Iterator[str]:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in known:
            yield prefix
            return


def build_graph(directory: str | Path) -> ModuleGraph:
    """The import graph between the modules under `directory` (a package directory)."""
    directory = Path(directory).resolve()
    base = _package_root(directory)
    files = {
        _module_name(path, base): path for path in sorted((base / directory.relative_to(base).parts[0]).rglob("*.py"))
    }
    graph = ModuleGraph(root=_module_name(directory / "__init__.py", base))
    known = set(files)
    inside = {name for name, path in files.items() if path.is_relative_to(directory)}
    graph.modules = set(inside)
    for name in sorted(inside):
        path = files[name]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for statement, kind in _imports(tree):
            for target in _targets(statement, name, path.name == "__init__.py", known):
                if target in inside and target != name:
                    graph.add_edge(name, target, kind)
    return graph


def _strongly_connected(successors: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative so deep graphs do not hit the recursion limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(successors):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(successors[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _short(graph: ModuleGraph, module: str) -> str:
    if module == graph.root:
        return "__init__"
    return module.removeprefix(graph.root + ".")


def to_dot(graph: ModuleGraph) -> str:
    """Graphviz DOT: one box per module, grouped by subpackage; cycle edges in red."""
    in_cycle = {(source, target) for cycle in graph.cycles() for source, target, _ in graph.cycle_edges(cycle)}
    packages = {m.removeprefix(graph.root + ".") for m in graph.modules if m != graph.root}
    groups: dict[str, list[str]] = {}
    for module in sorted(graph.modules):
        short = _short(graph, module)
        head = short.split(".")[0]
        group = head if ("." in short or any(p.startswith(head + ".") for p in packages)) else ""
        groups.setdefault(group, []).append(module)
    lines = [
        "digraph modules {",
        f'  label="{graph.root}: solid = import, dotted = import inside a function, '
        'dashed = TYPE_CHECKING only, red = part of an import cycle";',
        '  labelloc="t"; rankdir="LR"; compound=true; newrank=true;',
        '  node [shape=box, fontname="Helvetica", fontsize=10, style=filled, fillcolor=white];',
        '  edge [color="#555555", arrowsize=0.6];',
    ]
    for group, members in sorted(groups.items()):
        indent = "  "
        if group:
            lines.append(f'  subgraph "cluster_{group}" {{')
            lines.append(f'    label="{group}/"; style="rounded,filled"; fillcolor="#eef2f8";')
            indent = "    "
        for module in members:
            label = _short(graph, module).removeprefix(group + ".") if group else _short(graph, module)
            lines.append(f'{indent}"{module}" [label="{"__init__" if label == group else label}"];')
        if group:
            lines.append("  }")
    styles = {RUNTIME: "solid", LAZY: "dotted", TYPING: "dashed"}
    for (source, target), kind in sorted(graph.edges.items()):
        attributes = [f"style={styles[kind]}"]
        if (source, target) in in_cycle:
            attributes += ['color="#cc0000"', "penwidth=1.6"]
        lines.append(f'  "{source}" -> "{target}" [{", ".join(attributes)}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def layer_of(graph: ModuleGraph, module: str) -> str:
    """The package of the graph's directory that holds `module`, or "(root)" for the directory's own modules."""
    short = _short(graph, module)
    return short.split(".")[0] if "." in short or any(m.startswith(module + ".") for m in graph.modules) else "(root)"


def layer_edges(graph: ModuleGraph) -> dict[tuple[str, str], dict[str, int]]:
    """(importing package, imported package) -> {kind: number of module-to-module imports}, for each pair of
    different packages (see `layer_of`)."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for (source, target), kind in graph.edges.items():
        pair = (layer_of(graph, source), layer_of(graph, target))
        if pair[0] != pair[1]:
            by_kind = counts.setdefault(pair, {RUNTIME: 0, LAZY: 0, TYPING: 0})
            by_kind[kind] += 1
    return counts


def describe_layers(graph: ModuleGraph) -> str:
    """One line per pair of packages with imports between them: the count, and how many are lazy or typing."""
    lines = []
    for (source, target), by_kind in sorted(layer_edges(graph).items()):
        extra = ", ".join(f"{by_kind[kind]} {kind}" for kind in (LAZY, TYPING) if by_kind[kind])
        lines.append(f"{source} -> {target}: {sum(by_kind.values())}" + (f" ({extra})" if extra else ""))
    return "\n".join(lines)


def packages_to_dot(graph: ModuleGraph) -> str:
    """Graphviz DOT: one box per package (its modules counted), one arrow per pair of packages with imports
    between them, labelled with their number; dotted where all of them are lazy, dashed where all are
    TYPE_CHECKING only. The directory's own modules (the wiring, which holds everything) are left out."""
    sizes: dict[str, int] = {}
    for module in graph.modules:
        layer = layer_of(graph, module)
        if module != graph.root and layer != "(root)":
            sizes[layer] = sizes.get(layer, 0) + 1
    lines = [
        "digraph packages {",
        f'  label="{graph.root}: its packages (modules), and the imports between them (solid: some at module level, '
        'dotted: all inside functions, dashed: all TYPE_CHECKING only)";',
        '  labelloc="t"; rankdir="TB";',
        '  node [shape=box, fontname="Helvetica", fontsize=11, style="rounded,filled", fillcolor="#eef2f8"];',
        '  edge [color="#555555", arrowsize=0.6, fontname="Helvetica", fontsize=9];',
    ]
    for layer, count in sorted(sizes.items()):
        lines.append(f'  "{layer}" [label="{layer}/ ({count})"];')
    for (source, target), by_kind in sorted(layer_edges(graph).items()):
        if source not in sizes or target not in sizes:
            continue
        total = sum(by_kind.values())
        style = "dotted" if by_kind[LAZY] == total else "dashed" if by_kind[TYPING] == total else "solid"
        lines.append(f'  "{source}" -> "{target}" [label="{total}", style={style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def describe_cycles(graph: ModuleGraph) -> str:
    """One paragraph per cycle: its modules and the imports that close it."""
    paragraphs = []
    for cycle in graph.cycles():
        edges = "\n".join(f"    {source} -> {target} ({kind})" for source, target, kind in graph.cycle_edges(cycle))
        paragraphs.append(f"cycle: {', '.join(cycle)}\n{edges}")
    return "\n".join(paragraphs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="a package directory, e.g. src/pedl/master")
    parser.add_argument("--cycles", action="store_true", help="print only the import cycles; exit 1 if any")
    parser.add_argument("--layers", action="store_true", help="print the number of imports between its packages")
    parser.add_argument("--packages", action="store_true", help="DOT of its packages and the imports between them")
    arguments = parser.parse_args(argv)
    graph = build_graph(arguments.directory)
    if arguments.layers:
        print(describe_layers(graph))
        return 0
    if arguments.packages:
        sys.stdout.write(packages_to_dot(graph))
        return 0
    report = describe_cycles(graph)
    if arguments.cycles:
        print(report or "no import cycles")
        return 1 if report else 0
    sys.stdout.write(to_dot(graph))
    if report:
        print(report, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

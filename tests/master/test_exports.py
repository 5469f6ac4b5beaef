"""A domain package's public names (master/exports.py): each resolves to its module's own object, none is
imported with the package, the package's TYPE_CHECKING imports name the same objects, and a module of the
package is still reached by its name."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from pedl.master.exports import lazy_exports

PACKAGES = (
    "agents",
    "checkpoints",
    "experiments",
    "identity",
    "metrics",
    "model_registry",
    "tasks",
    "trials",
    "workspaces",
)


@pytest.mark.parametrize("package", PACKAGES)
def test_each_public_name_is_its_modules_own(package: str) -> None:
    pkg = importlib.import_module(f"pedl.master.{package}")
    assert pkg.__all__, f"{package} names no public function"
    for name in pkg.__all__:
        value = getattr(pkg, name)
        assert any(
            getattr(module, name, None) is value
            for module_name, module in sys.modules.items()
            if module_name.startswith(f"pedl.master.{package}.")
        ), name


def _type_checking_imports(init: Path) -> dict[str, list[str]]:
    """The names each `from module import ...` under the package's `if TYPE_CHECKING:` gives."""
    found: dict[str, list[str]] = {}
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.unparse(stmt)
                found.setdefault(stmt.module, []).extend(a.asname or a.name for a in stmt.names)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_type_checkers_see_the_same_public_names(package: str) -> None:
    pkg = importlib.import_module(f"pedl.master.{package}")
    assert pkg.__file__
    imported = _type_checking_imports(Path(pkg.__file__))
    assert sorted(n for names in imported.values() for n in names) == sorted(pkg.__all__)
    for module_name, names in imported.items():
        module = importlib.import_module(module_name)
        for name in names:
            assert getattr(pkg, name) is getattr(module, name), f"{package}.{name} is not {module_name}.{name}"


def test_importing_the_packages_imports_none_of_their_modules() -> None:
    code = (
        "import sys\n"
        f"for p in {PACKAGES!r}:\n"
        "    __import__('pedl.master.' + p)\n"
        f"print(sorted(m for m in sys.modules if m.count('.') == 3 and m.split('.')[2] in {PACKAGES!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error_and_a_module_is_still_imported_by_name() -> None:
    getattr_, names = lazy_exports("pedl.master.experiments", {"edits": ["patch"]})
    assert names == ["patch"]
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        getattr_("nothing")
    from pedl.master.experiments import edits, patch

    assert patch is edits.patch

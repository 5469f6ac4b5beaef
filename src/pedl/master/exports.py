"""The public names of a domain package, imported from their modules on first use (a module
`__getattr__`, PEP 562), so that importing one module of a package imports none of the others.

The domain packages reach into each other (deleting a workspace deletes its experiments; an experiment
belongs to a project), so an `__init__` that imported its modules would, on the first import of any
one module, run the modules of every package, and an import could meet a module of its own package
half initialized. A package's `__init__` names each public name with the module that holds it instead;
a name that several of its modules define (`create`, `get`) is reached through its module. The same names
are imported under `if TYPE_CHECKING:` in the `__init__`, so that type checkers know what each one is
(tests/master/test_exports.py checks that the two lists agree)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], list[str]]:
    """`__getattr__` and `__all__` for `package`: `modules` maps each of its modules (by its name in the
    package) to the public names it gives the package."""
    where = {name: f"{package}.{module}" for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__, sorted(where)

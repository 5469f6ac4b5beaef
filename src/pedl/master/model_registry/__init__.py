"""The model registry: its models (service), their versions (versions), and both as the API sends them
(to_wire)."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.model_registry.service import (
        NAME_MAX,
        PAGE_MAX,
        ModelPage,
        ModelQuery,
        check_labels,
        check_metadata,
        check_text,
        create,
        find,
        label_counts,
        set_archived,
        view,
    )
    from pedl.master.model_registry.versions import (
        VersionPage,
        find_version,
        is_registered,
        register,
        registered_in_experiment,
    )

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "service": [
            "ModelPage",
            "ModelQuery",
            "NAME_MAX",
            "PAGE_MAX",
            "check_labels",
            "check_metadata",
            "check_text",
            "create",
            "find",
            "label_counts",
            "set_archived",
            "view",
        ],
        "versions": ["VersionPage", "find_version", "is_registered", "register", "registered_in_experiment"],
    },
)

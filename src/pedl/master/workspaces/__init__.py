"""Workspaces, projects and templates: reading each (workspaces, projects, templates) and showing them as
v1Workspace, v1Project and v1Template (to_wire), what a creator or an admin changes (workspace_edits,
project_edits), a workspace's checkpoint storage (workspace_storage) and a project's experiment table
(project_columns)."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.workspaces.project_columns import columns, metric_ranges
    from pedl.master.workspaces.project_edits import move, set_notes
    from pedl.master.workspaces.projects import (
        Placement,
        ProjectQuery,
        checked_key,
        for_experiment,
        in_workspace,
        placements,
    )
    from pedl.master.workspaces.templates import TemplateQuery, apply, merged, set_config, usable
    from pedl.master.workspaces.workspace_edits import pin
    from pedl.master.workspaces.workspace_storage import base_for, checked_storage, of_project
    from pedl.master.workspaces.workspaces import (
        DEFAULT_ID,
        DEFAULT_NAME,
        MAX_NAME,
        WorkspaceQuery,
        by_name,
        checked_name,
        ensure_defaults,
        is_descending,
        name_key,
        page_limit,
        sort_key,
    )

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "project_columns": ["columns", "metric_ranges"],
        "project_edits": ["move", "set_notes"],
        "projects": ["Placement", "ProjectQuery", "checked_key", "for_experiment", "in_workspace", "placements"],
        "templates": ["TemplateQuery", "apply", "merged", "set_config", "usable"],
        "workspace_edits": ["pin"],
        "workspace_storage": ["base_for", "checked_storage", "of_project"],
        "workspaces": [
            "DEFAULT_ID",
            "DEFAULT_NAME",
            "MAX_NAME",
            "WorkspaceQuery",
            "by_name",
            "checked_name",
            "ensure_defaults",
            "is_descending",
            "name_key",
            "page_limit",
            "sort_key",
        ],
    },
)

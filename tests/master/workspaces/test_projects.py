"""Projects: the project a new experiment goes into (projectId, the config's workspace and project
names, or project 1) and project keys."""

from __future__ import annotations

import pytest

from pedl.errors import InvalidArgument, NotFound
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.workspaces.projects import checked_key, for_experiment, placements
from pedl.master.workspaces.workspaces import ensure_defaults


@pytest.fixture
def vision(database: Database) -> Database:
    """Workspace "Vision" (2) with projects "Detection" (2) and "Segmentation" (3)."""
    with database.session() as s:
        ensure_defaults(s, 1.0)
        s.add(models.Workspace(id=2, name="Vision", name_key="vision", created_at=1.0))
        s.flush()
        for pid, name in ((2, "Detection"), (3, "Segmentation")):
            s.add(
                models.Project(
                    id=pid, workspace_id=2, name=name, name_key=name.casefold(), key=name[:5].upper(), created_at=1.0
                )
            )
    return database


def test_the_default_is_project_1(vision: Database) -> None:
    with vision.session() as s:
        assert for_experiment(s, None, None, None) == 1
        assert for_experiment(s, 0, None, None) == 1  # det's "no --project_id"


def test_project_id_and_config_names_choose_the_project(vision: Database) -> None:
    with vision.session() as s:
        assert for_experiment(s, 3, None, None) == 3
        assert for_experiment(s, None, "vision", "DETECTION") == 2  # names whatever their case
        assert for_experiment(s, 2, "Vision", "Detection") == 2
        assert for_experiment(s, None, "Uncategorized", "Uncategorized") == 1


@pytest.mark.parametrize(
    ("project_id", "workspace", "project", "field"),
    [
        (None, "Vision", None, "project"),
        (None, None, "Detection", "workspace"),
        (None, "Audio", "Detection", "workspace"),
        (None, "Vision", "Tracking", "project"),
        (3, "Vision", "Detection", "projectId"),
    ],
)
def test_bad_config_names_are_a_400_naming_the_field(
    vision: Database, project_id: int | None, workspace: str | None, project: str | None, field: str
) -> None:
    with vision.session() as s, pytest.raises(InvalidArgument) as refused:
        for_experiment(s, project_id, workspace, project)
    assert refused.value.fields[0]["field"] == field and refused.value.message.startswith(field)


def test_an_unknown_project_id_is_a_404_naming_it(vision: Database) -> None:
    with vision.session() as s, pytest.raises(NotFound, match="projectId: project 99 not found"):
        for_experiment(s, 99, None, None)


def test_placements_name_project_and_workspace(vision: Database) -> None:
    with vision.session() as s:
        got = placements(s, {1, 3, 99})
    assert set(got) == {1, 3}
    assert (got[3].project_name, got[3].workspace_id, got[3].workspace_name) == ("Segmentation", 2, "Vision")
    assert got[1].workspace_name == "Uncategorized"


def test_project_keys() -> None:
    assert checked_key(None, "my project 2") == "MYPRO"
    assert checked_key("", "éé") == "PROJ"
    assert checked_key("ab1", "whatever") == "AB1"
    for bad in ("toolong", "a-b", "é"):
        with pytest.raises(InvalidArgument, match="key"):
            checked_key(bad, "x")

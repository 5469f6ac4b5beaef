"""Workspace, project and template rows as v1Workspace, v1Project and v1Template, exactly: the keys det
and the WebUI read, an owner the migration left unset as user 0, stored notes as notes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.db import models
from pedl.master.workspaces import to_wire


def test_a_workspace_with_storage_of_its_own() -> None:
    row = models.Workspace(
        id=2,
        name="Vision",
        owner_id=3,
        immutable=False,
        archived=True,
        created_at=0.0,
        checkpoint_storage={"type": "shared_fs", "host_path": "/data/ws"},
    )
    shown = to_wire.workspace(row, username="alice", num_projects=2, num_experiments=5, pinned=True)
    assert shown.model_dump(exclude_unset=True) == {
        "id": 2,
        "name": "Vision",
        "archived": True,
        "immutable": False,
        "errorMessage": "",
        "numExperiments": 5,
        "numProjects": 2,
        "pinned": True,
        "state": "WORKSPACE_STATE_UNSPECIFIED",
        "userId": 3,
        "username": "alice",
        "checkpointStorageConfig": {"type": "shared_fs", "host_path": "/data/ws"},
    }


def test_the_default_workspace_without_owner_or_storage() -> None:
    row = models.Workspace(id=1, name="Uncategorized", owner_id=None, immutable=True, archived=False, created_at=0.0)
    shown = to_wire.workspace(row, username="", num_projects=1, num_experiments=0, pinned=False).model_dump()
    assert shown["userId"] == 0 and shown["immutable"] is True
    assert shown["checkpointStorageConfig"] is None  # {} as stored is none too
    row.checkpoint_storage = {}
    assert (
        to_wire.workspace(row, username="", num_projects=1, num_experiments=0, pinned=False).checkpointStorageConfig
        is None
    )


def test_a_project_with_notes_and_experiments() -> None:
    row = models.Project(
        id=4,
        workspace_id=2,
        name="Cats",
        description="small",
        key="CATS",
        owner_id=3,
        immutable=False,
        archived=False,
        created_at=0.0,
        notes=[{"name": "n", "contents": "c"}],
    )
    shown = to_wire.project(
        row,
        workspace_name="Vision",
        username="alice",
        num_experiments=3,
        num_active_experiments=1,
        num_runs=7,
        last_experiment_started_at=1_700_000_000.5,
        archived=True,
    )
    assert shown.model_dump(exclude_unset=True) == {
        "id": 4,
        "name": "Cats",
        "workspaceId": 2,
        "workspaceName": "Vision",
        "description": "small",
        "key": "CATS",
        "archived": True,
        "immutable": False,
        "errorMessage": "",
        "notes": [{"name": "n", "contents": "c"}],
        "numExperiments": 3,
        "numActiveExperiments": 1,
        "numRuns": 7,
        "lastExperimentStartedAt": "2023-11-14T22:13:20.500000Z",
        "state": "WORKSPACE_STATE_UNSPECIFIED",
        "userId": 3,
        "username": "alice",
    }


def test_a_project_without_notes_experiments_or_owner() -> None:
    row = models.Project(
        id=1, workspace_id=1, name="Uncategorized", description="", key="UNCAT", owner_id=None, immutable=True
    )
    shown = to_wire.project(
        row,
        workspace_name="Uncategorized",
        username="",
        num_experiments=0,
        num_active_experiments=0,
        num_runs=0,
        last_experiment_started_at=None,
        archived=False,
    ).model_dump()
    assert shown["notes"] == [] and shown["lastExperimentStartedAt"] is None and shown["userId"] == 0


def test_a_stored_note_with_a_key_of_no_note_is_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        to_wire.notes([{"name": "n", "contents": "c", "by": "x"}])


def test_a_template() -> None:
    row = models.Template(
        name="base", workspace_id=1, owner_id=3, config={"max_restarts": 2}, created_at=0.0, updated_at=0.0
    )
    assert to_wire.template(row, username="alice").model_dump(exclude_unset=True) == {
        "name": "base",
        "config": {"max_restarts": 2},
        "workspaceId": 1,
        "userId": 3,
        "username": "alice",
    }

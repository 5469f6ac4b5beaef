"""A workspace's checkpoint storage (Determined's checkpointStorageConfig): checked exactly as an
experiment's checkpoint_storage is (parsed by the same model, inside the master's storage roots), and
laid under the config of the experiments created in the workspace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.checkpoint_storage import merge_storage
from pedl.config.experiment_config import CheckpointStorageConfig
from pedl.errors import InvalidArgument
from pedl.master.checkpoints import storage_roots
from pedl.master.db import models

if TYPE_CHECKING:
    from pedl.config.master_config import MasterConfig

FIELD = "checkpointStorageConfig"
_STORAGE = TypeAdapter(CheckpointStorageConfig)


def checked_storage(master: MasterConfig, given: Any) -> dict[str, Any]:
    """A workspace's checkpoint storage as stored: parsed as an experiment's checkpoint_storage is, and
    (merged over the master's) inside the master's storage roots, exactly as an experiment's is checked."""
    if not isinstance(given, dict):
        raise InvalidArgument.at(FIELD, "must be an object (a checkpoint_storage section)")
    try:
        parsed = _STORAGE.validate_python(given)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if p not in ("shared_fs", "s3"))
        raise InvalidArgument(
            f"{FIELD}{'.' + where if where else ''}: {first['msg']}",
            fields=[{"field": f"{FIELD}.{where}" if where else FIELD, "message": first["msg"]}],
        ) from None
    stored = parsed.model_dump(mode="json", exclude_none=True)
    master_storage = master.effective_checkpoint_storage().model_dump(mode="json")
    problem = storage_roots.storage_problem(merge_storage(master_storage, stored), storage_roots.allowed_roots(master))
    if problem is not None:
        where, why = problem
        named = f"{FIELD}.{where.removeprefix('checkpoint_storage.')}"
        raise InvalidArgument(
            f"{named}: {why}; an operator may allow more under security.checkpoint_storage_roots in master.yaml",
            fields=[{"field": named, "message": why}],
        )
    return stored


def of_project(s: Session, project_id: int) -> dict[str, Any] | None:
    """The checkpoint storage of the project's workspace; None when it has none."""
    return s.scalar(
        select(models.Workspace.checkpoint_storage)
        .join(models.Project, models.Project.workspace_id == models.Workspace.id)
        .where(models.Project.id == project_id)
    )


def base_for(master: MasterConfig, workspace_storage: dict[str, Any] | None) -> dict[str, Any]:
    """What an experiment's own checkpoint_storage is merged over: the workspace's over the master's."""
    master_storage = master.effective_checkpoint_storage().model_dump(mode="json")
    return merge_storage(master_storage, workspace_storage) if workspace_storage else master_storage

"""The model registry's rows as Determined's v1Model and v1ModelVersion."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.master.wire.base import ts
from pedl.master.wire.checkpoint import Checkpoint
from pedl.master.wire.model import Model, ModelVersion

if TYPE_CHECKING:
    from pedl.master.db import models


def model(m: models.RegisteredModel, username: str, labels: list[str], num_versions: int) -> Model:
    """The model with its owner's name, its labels in order and how many versions it has."""
    return Model(
        id=m.id,
        name=m.name,
        description=m.description,
        notes=m.notes,
        metadata=m.meta or {},
        labels=labels,
        creationTime=ts(m.created_at) or "",
        lastUpdatedTime=ts(m.updated_at) or "",
        archived=m.archived,
        numVersions=num_versions,
        userId=m.owner_id,
        username=username,
        workspaceId=m.workspace_id,
    )


def version(r: models.ModelVersion, of: Model, username: str, checkpoint: Checkpoint) -> ModelVersion:
    """The version with its model, who registered it, and its checkpoint as the API sends it."""
    return ModelVersion(
        id=r.id,
        version=r.version,
        model=of,
        checkpoint=checkpoint,
        creationTime=ts(r.created_at) or "",
        lastUpdatedTime=ts(r.updated_at) or "",
        name=r.name,
        comment=r.comment,
        notes=r.notes,
        metadata=r.meta or {},
        labels=list(r.labels or []),
        userId=r.owner_id,
        username=username,
    )

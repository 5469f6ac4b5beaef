"""Determined's model registry messages: v1Model, v1ModelVersion (a model's checkpoint, in full) and
the answers of the /api/v1/models routes."""

from __future__ import annotations

from typing import Any

from pedl.master.wire.base import Pagination, WireModel
from pedl.master.wire.checkpoint import Checkpoint


class Model(WireModel):
    """v1Model."""

    id: int
    name: str
    description: str
    notes: str
    metadata: dict[str, Any]
    labels: list[str]
    creationTime: str
    lastUpdatedTime: str
    archived: bool
    numVersions: int
    userId: int
    username: str
    workspaceId: int


class ModelVersion(WireModel):
    """v1ModelVersion: its model and its checkpoint in full."""

    id: int
    version: int
    model: Model
    checkpoint: Checkpoint
    creationTime: str
    lastUpdatedTime: str
    name: str
    comment: str
    notes: str
    metadata: dict[str, Any]
    labels: list[str]
    userId: int
    username: str


class GetModelsResponse(WireModel):
    models: list[Model]
    pagination: Pagination


class PostModelResponse(WireModel):
    model: Model


class GetModelResponse(WireModel):
    model: Model


class PatchModelResponse(WireModel):
    model: Model


class DeleteModelResponse(WireModel):
    """Empty: the model and its versions are gone; their checkpoints stay."""


class ArchiveModelResponse(WireModel):
    """Empty."""


class UnarchiveModelResponse(WireModel):
    """Empty."""


class GetModelLabelsResponse(WireModel):
    labels: list[str]  # the most used first


class GetModelVersionsResponse(WireModel):
    model: Model
    modelVersions: list[ModelVersion]
    pagination: Pagination


class PostModelVersionResponse(WireModel):
    modelVersion: ModelVersion


class GetModelVersionResponse(WireModel):
    modelVersion: ModelVersion


class PatchModelVersionResponse(WireModel):
    modelVersion: ModelVersion


class DeleteModelVersionResponse(WireModel):
    """Empty: the version is gone; its checkpoint stays."""

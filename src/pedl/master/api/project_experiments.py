"""A project's experiments in bulk (Determined's kill, pause, activate, cancel, archive, unarchive,
delete, move of POST/DELETE /api/v1/projects/{id}/experiments/...), and its experiment table's columns
and metric ranges."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from pydantic import Field

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, IdPath, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts
from pedl.master.experiments import BulkFilters
from pedl.master.experiments import bulk as experiment_bulk
from pedl.master.wire.experiment import ExperimentActionsResponse
from pedl.master.workspaces import project_columns

router = APIRouter(prefix="/api/v1/projects")
INT32_MAX = 2**31 - 1
Id32 = Annotated[int, Field(ge=-INT32_MAX, le=INT32_MAX)]  # experiment and user ids are integer columns


class FiltersBody(Body):
    """Determined's v1BulkExperimentFilters."""

    name: str | None = Field(None, max_length=256)
    description: str | None = Field(None, max_length=256)
    labels: list[str] | None = Field(None, max_length=100)
    archived: bool | None = None
    states: list[str] | None = Field(None, max_length=20)
    userIds: list[Id32] | None = Field(None, max_length=1000)
    projectId: int | None = Field(None, ge=-1, le=INT32_MAX)
    excludedExperimentIds: list[Id32] | None = Field(None, max_length=experiment_bulk.MAX_IDS)


class BulkBody(Body):
    """Determined's v1{Kill,Pause,...}ExperimentsRequest; projectId -1 (as the SDK sends): any project."""

    experimentIds: list[Id32] = Field(default_factory=list)  # capped in the service, naming the field
    projectId: int | None = Field(None, ge=-1, le=INT64_MAX)
    filters: FiltersBody | None = None


class MoveBody(BulkBody):
    destinationProjectId: int = Field(..., ge=1, le=INT32_MAX)


def _filters(f: FiltersBody | None) -> BulkFilters | None:
    if f is None:
        return None
    return BulkFilters(
        name=f.name,
        description=f.description,
        labels=f.labels or [],
        archived=f.archived,
        states=f.states or [],
        user_ids=f.userIds or [],
        project_id=f.projectId,
        excluded_ids=f.excludedExperimentIds or [],
    )


def _run(
    action: str, project_id: int, request: Request, who: Caller, body: dict, model: type[BulkBody]
) -> ExperimentActionsResponse:
    req = parse(model, body)
    if req.projectId not in (None, project_id):
        raise InvalidArgument.at("projectId", f"{req.projectId} is not the project of the path ({project_id})")
    results = experiment_bulk.act(
        ctx_of(request),
        who,
        action,
        project_id,
        req.experimentIds,
        _filters(req.filters),
        destination=getattr(req, "destinationProjectId", 0),
        wake_deletion=request.app.state.experiment_deletion.request,
    )
    return ExperimentActionsResponse(results=results)


# projectId -1 (as the SDK sends it): experiments of any project
ProjectPath = Annotated[int, Path(ge=-1, le=INT64_MAX)]


def _bulk_route(action: str, model: type[BulkBody], method: str = "POST", doc: str | None = None) -> None:
    """One route of the bulk actions: POST (DELETE for delete) .../experiments/{action}."""

    @accepts(model)
    def endpoint(
        project_id: ProjectPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
    ) -> ExperimentActionsResponse:
        return _run(action, project_id, request, who, body, model)

    endpoint.__name__ = endpoint.__qualname__ = action
    endpoint.__doc__ = doc
    router.add_api_route(
        f"/{{project_id}}/experiments/{action}",
        endpoint,
        methods=[method],
        response_model=ExperimentActionsResponse,
        response_model_exclude_unset=True,
    )


for _action in ("kill", "cancel", "pause", "activate", "archive", "unarchive"):
    _bulk_route(_action, BulkBody)
_bulk_route(
    "delete",
    BulkBody,
    "DELETE",
    "Each experiment (ended) goes DELETING; the master's worker deletes it (as DELETE /experiments/{id}).",
)
_bulk_route("move", MoveBody)


TABLE_TYPES = ("TABLE_TYPE_UNSPECIFIED", "TABLE_TYPE_EXPERIMENT", "TABLE_TYPE_RUN")


@router.get("/{project_id}/columns")
def columns(project_id: IdPath, request: Request, _: Caller = Depends(caller), tableType: str | None = None) -> dict:
    """The experiment table's columns (a run is a trial: the run table has the same ones); pedl's own
    `truncated`: metric columns were left out, past limits.max_listing_bytes."""
    if tableType not in (None, *TABLE_TYPES):
        raise InvalidArgument.at("tableType", f"{tableType!r} is not one of {', '.join(TABLE_TYPES)}")
    listing = project_columns.columns(ctx_of(request), project_id)
    return {
        "columns": [
            {
                "column": c.column,
                "location": c.location,
                "type": c.type,
                **({"displayName": c.display_name} if c.display_name else {}),
            }
            for c in listing.items
        ],
        "truncated": listing.truncated,
    }


@router.get("/{project_id}/experiments/metric-ranges")
def metric_ranges(project_id: IdPath, request: Request, _: Caller = Depends(caller)) -> dict:
    """pedl's own `truncated`: some metrics' ranges were left out, past limits.max_listing_bytes."""
    listing = project_columns.metric_ranges(ctx_of(request), project_id)
    return {
        "ranges": [{"metricsName": name, "min": lo, "max": hi} for name, lo, hi in listing.items],
        "truncated": listing.truncated,
    }

"""Experiments: create, list, get, kill / pause / activate, move, their code, trials, checkpoints, events
and TensorBoard files."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NoReturn

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from pedl.errors import InvalidArgument
from pedl.master.api.checkpoint_query import checkpoint_order, checkpoint_states
from pedl.master.api.conditional import unless_changed
from pedl.master.api.deps import (
    INT64_MAX,
    Body,
    Caller,
    IdPath,
    caller,
    ctx_of,
    json_body,
    parse,
)
from pedl.master.api.openapi import accepts, answers
from pedl.master.experiments import ExperimentQuery, tensorboard_files
from pedl.master.experiments import code as experiment_code
from pedl.master.experiments import continuation as experiment_continuation
from pedl.master.experiments import deletion as experiment_deletion
from pedl.master.experiments import edits as experiment_edits
from pedl.master.experiments import moves as experiment_moves
from pedl.master.experiments import service as experiments_service
from pedl.master.experiments import to_wire as experiments_to_wire
from pedl.master.tasks import model_definitions
from pedl.master.wire.base import Pagination
from pedl.master.wire.checkpoint import GetExperimentCheckpointsResponse
from pedl.master.wire.experiment import (
    CreateExperimentResponse,
    ExperimentResponse,
    GetExperimentEventsResponse,
    GetExperimentResponse,
    GetExperimentsResponse,
    GetExperimentTrialsResponse,
    JobSummary,
)

INT32_MAX = 2**31 - 1

router = APIRouter(prefix="/api/v1/experiments")


class CreateExperimentBody(Body):
    config: str
    modelDefinition: list[Any] | None = None
    activate: bool | None = True
    validateOnly: bool | None = False
    parentId: int | None = Field(None, ge=0, le=INT32_MAX)  # integer columns on both databases
    projectId: int | None = Field(None, ge=0, le=INT32_MAX)
    template: str | None = Field(None, max_length=255)  # a template's name (det template set)


def upload_slot(request: Request, who: Caller = Depends(caller)) -> Iterator[None]:
    """One of the model uploads the master reads at once, taken before the body is read (a 429 past
    limits.max_concurrent_uploads_per_user or limits.max_concurrent_uploads), held until the answer."""
    with model_definitions.upload_slot(ctx_of(request), who.user.id).held():
        yield


@router.post("", response_model=CreateExperimentResponse, response_model_exclude_unset=True)
@accepts(CreateExperimentBody, errors=(404, 413, 429))  # an unknown projectId or template; the user's bounds
def create(
    request: Request, who: Caller = Depends(caller), _: None = Depends(upload_slot), body: dict = Depends(json_body)
) -> CreateExperimentResponse:
    req = parse(CreateExperimentBody, body)
    done = experiments_service.submit(
        ctx_of(request),
        who,
        config_text=req.config,
        files=req.modelDefinition,
        activate=req.activate is not False,
        validate_only=bool(req.validateOnly),
        parent_id=req.parentId,
        project_id=req.projectId,
        template=req.template,
    )
    # det prints its own text for the enum; pedl's CLI prints warningMessages, which say what and where
    return CreateExperimentResponse(
        experiment=done.experiment or experiments_to_wire.validated_only(),
        config=done.config,
        warnings=["LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED"] if done.warnings else [],
        warningMessages=done.warnings,
    )


# the tables a listed or described experiment shows (an active one's state is its allocations', its
# checkpointCount and checkpointSize its checkpoints')
EXPERIMENT_VIEW = ("experiments", "trials", "users", "allocations", "checkpoints")


@router.get("", response_model=GetExperimentsResponse, response_model_exclude_unset=True)
def list_experiments(
    request: Request,
    _: Caller = Depends(unless_changed(*EXPERIMENT_VIEW)),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    archived: bool | None = None,
    users: list[str] = Query(default_factory=list),
    states: list[str] = Query(default_factory=list),
    name: str = "",
    labels: list[str] = Query(default_factory=list),
    sortBy: str = "SORT_BY_ID",
    orderBy: str | None = None,
    projectId: int = Query(0, ge=0, le=INT64_MAX),
) -> GetExperimentsResponse:
    query = ExperimentQuery(
        offset=offset,
        limit=limit,
        archived=archived,
        usernames=users,
        states=states,
        name=name,
        labels=labels,
        sort_by=sortBy,
        newest_first=orderBy == "ORDER_BY_DESC",
        project_id=projectId,
    )
    page = experiments_service.listing(ctx_of(request), query)
    return GetExperimentsResponse(
        experiments=page.items, pagination=Pagination.of(offset, limit, page.total, len(page.items))
    )


class ContinueExperimentBody(Body):
    id: int = Field(..., ge=1, le=INT32_MAX)
    overrideConfig: str | None = None  # YAML text: det's --config k=v and --config-file


@router.post("/continue", response_model=ExperimentResponse, response_model_exclude_unset=True)
@accepts(ContinueExperimentBody, errors=(404,))  # an unknown experiment id
def continue_experiment(
    request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> ExperimentResponse:
    """det e continue: an ended single-trial experiment trains on, its override config applied."""
    req = parse(ContinueExperimentBody, body)
    experiment_continuation.continue_by(ctx_of(request), who, req.id, req.overrideConfig)
    return ExperimentResponse(experiment=experiments_service.describe(ctx_of(request), req.id))


def _other_methods(_request: Request) -> NoReturn:
    raise StarletteHTTPException(405)  # not /{experiment_id} with an id of "continue" or /{id}/{action}


router.add_route(
    f"{router.prefix}/continue", _other_methods, methods=["GET", "PATCH", "DELETE"], include_in_schema=False
)
# a GET of api/metrics_streams.py; POST /{experiment_id}/{action} would answer any other method with a 400
router.add_route(
    f"{router.prefix}/metrics-stream/metric-names",
    _other_methods,
    methods=["POST", "PUT", "PATCH", "DELETE"],
    include_in_schema=False,
)


@router.delete("/{experiment_id}")
def delete_experiment(experiment_id: IdPath, request: Request, who: Caller = Depends(caller)) -> dict:
    """det e delete: DELETING now; a worker of the master deletes its checkpoints, then its rows."""
    experiment_deletion.request_deletion(
        ctx_of(request), who, experiment_id, request.app.state.experiment_deletion.request
    )
    return {}


@router.get("/{experiment_id}", response_model=GetExperimentResponse, response_model_exclude_unset=True)
def get_experiment(
    experiment_id: IdPath, request: Request, _: Caller = Depends(unless_changed(*EXPERIMENT_VIEW))
) -> GetExperimentResponse:
    shown = experiments_service.describe(ctx_of(request), experiment_id)
    return GetExperimentResponse(
        experiment=shown, config=shown.config or {}, jobSummary=JobSummary(jobsAhead=0, state="STATE_SCHEDULED")
    )


class MoveExperimentBody(Body):
    destinationProjectId: int = Field(..., ge=1, le=INT32_MAX)
    experimentId: int | None = Field(None, ge=1, le=INT32_MAX)  # det repeats the path's


@router.post("/{experiment_id}/move")  # before /{experiment_id}/{action}, which would take it
@accepts(MoveExperimentBody)
def move(
    experiment_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    """det e move, the SDK's move_to_project: the experiment goes into project destinationProjectId."""
    req = parse(MoveExperimentBody, body)
    if req.experimentId not in (None, experiment_id):
        raise InvalidArgument.at(
            "experimentId", f"{req.experimentId} is not the experiment of the path ({experiment_id})"
        )
    experiment_moves.move(ctx_of(request), who, experiment_id, req.destinationProjectId)
    return {}


@router.get("/{experiment_id}/model_def")
def model_def(experiment_id: IdPath, request: Request, who: Caller = Depends(caller)) -> dict:
    """det e download-model-def, the SDK's download_code: the model directory as a base64 .tar.gz."""
    return {"b64Tgz": experiment_code.model_definition_b64(ctx_of(request), who, experiment_id)}


@router.delete("/{experiment_id}/tensorboard-files")
@answers(503)  # the storage failed
def delete_tensorboard_files(experiment_id: IdPath, request: Request, who: Caller = Depends(caller)) -> dict:
    """det e delete-tb-files, the SDK's delete_tensorboard_files."""
    tensorboard_files.delete(ctx_of(request), who, experiment_id)
    return {}


@router.post("/{experiment_id}/{action}")
@answers(409)
def act(
    experiment_id: IdPath, action: str, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:  # det sends no body; a malformed one is a 400
    from pedl.errors import NotFound

    if action in ("archive", "unarchive"):
        experiment_edits.set_archived(ctx_of(request), who, experiment_id, action == "archive")
        return {}
    if action not in ("kill", "pause", "activate", "cancel"):
        raise NotFound(f"unknown experiment action {action!r}")
    experiments_service.act(ctx_of(request), who, experiment_id, "kill" if action == "cancel" else action)
    return {}


class PatchResources(Body):
    priority: int | None = None
    weight: float | None = None
    maxSlots: int | None = None


class PatchExperimentBody(Body):
    name: str | None = None
    description: str | None = None
    notes: str | None = None
    labels: list[str] | None = None
    resources: PatchResources | None = None


@router.patch("/{experiment_id}", response_model=ExperimentResponse, response_model_exclude_unset=True)
@accepts(PatchExperimentBody)
def patch(
    experiment_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> ExperimentResponse:
    req = parse(PatchExperimentBody, body)
    res = req.resources or PatchResources()
    experiment_edits.patch(
        ctx_of(request),
        who,
        experiment_id,
        name=req.name,
        description=req.description,
        notes=req.notes,
        labels=req.labels,
        priority=res.priority,
        weight=res.weight,
        max_slots=res.maxSlots if "maxSlots" in res.model_fields_set else ...,
    )
    return ExperimentResponse(experiment=experiments_service.describe(ctx_of(request), experiment_id))


@router.put("/{experiment_id}/labels/{label}")
def put_label(experiment_id: IdPath, label: str, request: Request, who: Caller = Depends(caller)) -> dict:
    """Determined's SDK's experiment.add_label."""
    return {"labels": experiment_edits.change_label(ctx_of(request), who, experiment_id, label, True)}


@router.delete("/{experiment_id}/labels/{label}")
def delete_label(experiment_id: IdPath, label: str, request: Request, who: Caller = Depends(caller)) -> dict:
    """Determined's SDK's experiment.remove_label."""
    return {"labels": experiment_edits.change_label(ctx_of(request), who, experiment_id, label, False)}


@router.get("/{experiment_id}/trials", response_model=GetExperimentTrialsResponse, response_model_exclude_unset=True)
def trials(
    experiment_id: IdPath,
    request: Request,
    _: Caller = Depends(unless_changed("trials", "allocations", "checkpoints")),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
) -> GetExperimentTrialsResponse:
    page = experiments_service.trials_page(ctx_of(request), experiment_id, offset, limit)
    return GetExperimentTrialsResponse(
        trials=page.items, pagination=Pagination.of(offset, limit, page.total, len(page.items))
    )


@router.get(
    "/{experiment_id}/checkpoints", response_model=GetExperimentCheckpointsResponse, response_model_exclude_unset=True
)
def checkpoints(
    experiment_id: IdPath,
    request: Request,
    _: Caller = Depends(unless_changed("checkpoints", "trials", "metrics")),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    sortByAttr: str | None = None,
    orderBy: str | None = None,
    sortByMetric: str | None = Query(None, max_length=255),
    states: list[str] = Query(default_factory=list),
) -> GetExperimentCheckpointsResponse:
    sort, descending = checkpoint_order(sortByAttr, orderBy)
    page = experiments_service.checkpoints(
        ctx_of(request),
        experiment_id,
        limit=limit,
        offset=offset,
        sort=sort,
        descending=descending,
        metric=sortByMetric or None,
        states=checkpoint_states(states),
    )
    return GetExperimentCheckpointsResponse(
        checkpoints=page.items, pagination=Pagination.of(offset, limit, page.total, len(page.items))
    )


@router.get("/{experiment_id}/events", response_model=GetExperimentEventsResponse, response_model_exclude_unset=True)
def events(
    experiment_id: IdPath, request: Request, _: Caller = Depends(caller), after: int = Query(0, ge=0, le=INT64_MAX)
) -> GetExperimentEventsResponse:
    return GetExperimentEventsResponse(events=experiments_service.events_of(ctx_of(request), experiment_id, after))


@router.get("/{experiment_id}/searcher/best_searcher_validation_metric")
def best_metric(experiment_id: IdPath, request: Request, _: Caller = Depends(caller)) -> dict:
    return {"metric": experiments_service.best_validation_metric(ctx_of(request), experiment_id)}

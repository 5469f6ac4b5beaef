"""Commands, notebooks, shells and TensorBoards in Determined's dialect: POST /api/v1/{kinds} launches
one, GET lists the live ones or describes one, POST .../kill and .../set_priority act on one (its owner
or an admin). The same five routes for each kind, made by `_routes`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from pedl.master.api.deps import INT64_MAX, Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts, answers
from pedl.master.tasks import LaunchRequest
from pedl.master.tasks import service as generic_tasks
from pedl.master.wire.base import WireModel
from pedl.master.wire.generic_task import ANSWERS

INT32_MAX = 2**31 - 1
MAX_IDS = 1000

router = APIRouter(prefix="/api/v1")


class LaunchBody(Body):
    config: dict[str, Any] | None = None
    files: list[Any] | None = None
    templateName: str | None = Field(None, max_length=255)
    template_name: str | None = Field(None, max_length=255)  # det's launch_command sends this spelling
    workspaceId: int | None = Field(None, ge=0, le=INT32_MAX)
    data: str | None = None  # Determined's base64 JSON for its own use; pedl has none
    preview: bool | None = False


class TensorboardBody(LaunchBody):
    # det tensorboard start sends null for the list it was not given
    experimentIds: list[int] | None = Field(None, max_length=MAX_IDS)
    trialIds: list[int] | None = Field(None, max_length=MAX_IDS)
    filters: dict[str, Any] | None = None  # Determined's bulk filters: not taken (say the ids)


class PriorityBody(Body):
    priority: int = Field(..., ge=1, le=99)


def _routes(kind: str, plural: str) -> None:
    one = kind
    answers_of = ANSWERS[kind]

    @router.post(
        f"/{plural}", name=f"launch_{kind}", response_model=answers_of.launch, response_model_exclude_unset=True
    )
    @accepts(TensorboardBody if kind == "tensorboard" else LaunchBody, errors=(404,))
    def launch(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> WireModel:
        req = parse(TensorboardBody if kind == "tensorboard" else LaunchBody, body)
        launched = generic_tasks.launch(
            ctx_of(request),
            who,
            kind,
            LaunchRequest(
                config=req.config,
                files=req.files,
                template=req.templateName or req.template_name,
                workspace_id=req.workspaceId,
                experiment_ids=tuple(getattr(req, "experimentIds", None) or ()),
                trial_ids=tuple(getattr(req, "trialIds", None) or ()),
            ),
        )
        return answers_of.launch.model_validate({one: launched.task, "config": launched.config, "warnings": []})

    @router.get(
        f"/{plural}", name=f"list_{plural}", response_model=answers_of.listing, response_model_exclude_unset=True
    )
    @answers(404)  # a workspaceId that does not exist
    def listing(
        request: Request,
        who: Caller = Depends(caller),
        users: list[str] = Query(default_factory=list),
        userIds: list[int] = Query(default_factory=list),
        workspaceId: int = Query(0, ge=0, le=INT64_MAX),
    ) -> WireModel:
        rows = generic_tasks.listing(
            ctx_of(request),
            who,
            kind,
            usernames=users[:MAX_IDS],
            user_ids=userIds[:MAX_IDS],
            workspace_id=workspaceId or None,
        )
        return answers_of.listing.model_validate({plural: rows})

    @router.get(
        f"/{plural}/{{task_id}}", name=f"get_{kind}", response_model=answers_of.get, response_model_exclude_unset=True
    )
    def describe(task_id: str, request: Request, who: Caller = Depends(caller)) -> WireModel:
        found = generic_tasks.describe(ctx_of(request), who, kind, task_id)
        return answers_of.get.model_validate({one: found.task, "config": found.config})

    @router.post(
        f"/{plural}/{{task_id}}/kill",
        name=f"kill_{kind}",
        response_model=answers_of.one,
        response_model_exclude_unset=True,
    )
    def kill(task_id: str, request: Request, who: Caller = Depends(caller)) -> WireModel:
        return answers_of.one.model_validate({one: generic_tasks.kill(ctx_of(request), who, kind, task_id)})

    @router.post(
        f"/{plural}/{{task_id}}/set_priority",
        name=f"set_{kind}_priority",
        response_model=answers_of.one,
        response_model_exclude_unset=True,
    )
    @accepts(PriorityBody, errors=(409,))  # the task has ended
    def set_priority(
        task_id: str, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
    ) -> WireModel:
        priority = parse(PriorityBody, body).priority
        return answers_of.one.model_validate(
            {one: generic_tasks.set_priority(ctx_of(request), who, kind, task_id, priority)}
        )


for _kind, _plural in (
    ("command", "commands"),
    ("notebook", "notebooks"),
    ("shell", "shells"),
    ("tensorboard", "tensorboards"),
):
    _routes(_kind, _plural)

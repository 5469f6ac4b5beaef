"""Commands, notebooks, shells and TensorBoards in Determined's dialect: POST /api/v1/{kinds} launches
one, GET lists the live ones or describes one, POST .../kill and .../set_priority act on one (its owner
or an admin). The same five routes for each kind, made by `_routes`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from pedl.master.api.deps import INT64_MAX, Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts, answers
from pedl.master.lifecycle import shell_tasks, task_kinds
from pedl.master.tasks import LaunchRequest, Shown
from pedl.master.tasks import service as generic_tasks
from pedl.master.tasks.to_wire import TASK_STATE
from pedl.master.wire.base import ts

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


def shown(item: Shown, who: Caller | None = None) -> dict[str, Any]:
    """Determined's v1Command / v1Notebook / v1Shell / v1Tensorboard."""
    t, a = item.task, item.alloc
    out: dict[str, Any] = {
        "id": t.id,
        "description": t.description,
        "jobId": t.id,
        "resourcePool": a.resource_pool if a else "",
        "startTime": ts(t.start_time),
        "state": TASK_STATE[a.state] if a else "STATE_QUEUED",
        "username": item.username,
        "userId": t.owner_id,
        "displayName": item.username,
        "workspaceId": t.workspace_id,
        "exitStatus": (a.exit_reason or "") if a else "",
        "isReady": item.ready,
    }
    address = task_kinds.service_address(t.kind, t.id)
    if address is not None:
        out["serviceAddress"] = address
    if t.kind == "tensorboard":
        out.update(experimentIds=list(t.experiment_ids or []), trialIds=list(t.trial_ids or []))
    if t.kind == "shell":
        mine = who is not None and who.user is not None and (who.user.admin or who.user.id == t.owner_id)
        secrets = t.secrets or {}
        out.update(
            publicKey=secrets.get("public_key", ""),
            addresses=[],
            agentUserGroup=shell_tasks.login_user(item.run_as),
            **({"privateKey": secrets.get("private_key", "")} if mine else {}),
        )
    return out


def _routes(kind: str, plural: str) -> None:
    one = kind

    @router.post(f"/{plural}", name=f"launch_{kind}")
    @accepts(TensorboardBody if kind == "tensorboard" else LaunchBody, errors=(404,))
    def launch(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
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
        return {one: shown(launched, who), "config": launched.task.config, "warnings": []}

    @router.get(f"/{plural}", name=f"list_{plural}")
    @answers(404)  # a workspaceId that does not exist
    def listing(
        request: Request,
        who: Caller = Depends(caller),
        users: list[str] = Query(default_factory=list),
        userIds: list[int] = Query(default_factory=list),
        workspaceId: int = Query(0, ge=0, le=INT64_MAX),
    ) -> dict:
        rows = generic_tasks.listing(
            ctx_of(request),
            kind,
            usernames=users[:MAX_IDS],
            user_ids=userIds[:MAX_IDS],
            workspace_id=workspaceId or None,
        )
        return {plural: [shown(r, who) for r in rows]}

    @router.get(f"/{plural}/{{task_id}}", name=f"get_{kind}")
    def describe(task_id: str, request: Request, who: Caller = Depends(caller)) -> dict:
        item = generic_tasks.describe(ctx_of(request), kind, task_id)
        return {one: shown(item, who), "config": item.task.config}

    @router.post(f"/{plural}/{{task_id}}/kill", name=f"kill_{kind}")
    def kill(task_id: str, request: Request, who: Caller = Depends(caller)) -> dict:
        return {one: shown(generic_tasks.kill(ctx_of(request), who, kind, task_id), who)}

    @router.post(f"/{plural}/{{task_id}}/set_priority", name=f"set_{kind}_priority")
    @accepts(PriorityBody, errors=(409,))  # the task has ended
    def set_priority(
        task_id: str, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
    ) -> dict:
        priority = parse(PriorityBody, body).priority
        item = generic_tasks.set_priority(ctx_of(request), who, kind, task_id, priority)
        return {one: shown(item, who)}


for _kind, _plural in (
    ("command", "commands"),
    ("notebook", "notebooks"),
    ("shell", "shells"),
    ("tensorboard", "tensorboards"),
):
    _routes(_kind, _plural)

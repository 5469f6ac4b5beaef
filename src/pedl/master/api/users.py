"""Users: listing, lookup by id and by username, creation, edits (PATCH) and password changes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from pedl.errors import InvalidArgument
from pedl.master.api.deps import (
    INT64_MAX,
    Body,
    Caller,
    IdPath,
    bearer_token,
    caller,
    ctx_of,
    json_body,
    parse,
)
from pedl.master.api.openapi import accepts
from pedl.master.identity import user_edits, user_lookup
from pedl.master.identity import users as users_service
from pedl.master.lifecycle import agent_user_groups
from pedl.master.wire.base import Pagination
from pedl.master.wire.user import GetUserResponse, GetUsersResponse

router = APIRouter(prefix="/api/v1/users")


class AgentUserGroupBody(Body):
    agentUid: int | None = None
    agentGid: int | None = None
    agentUser: str | None = Field(None, max_length=255)
    agentGroup: str | None = Field(None, max_length=255)


class NewUser(Body):
    username: str
    admin: bool = False
    active: bool = True
    displayName: str | None = Field(None, max_length=255)
    agentUserGroup: AgentUserGroupBody | None = None


class PatchUserBody(Body):
    """Determined's v1PatchUser: the fields to change; absent or null ones stay."""

    username: str | None = Field(None, max_length=1024)
    displayName: str | None = Field(None, max_length=1024)
    active: bool | None = None
    admin: bool | None = None
    remote: bool | None = None
    password: str | None = Field(None, max_length=1024)
    isHashed: bool = False
    agentUserGroup: AgentUserGroupBody | None = None


class CreateUserBody(Body):
    user: NewUser
    password: str = ""
    isHashed: bool = False


class PasswordBody(Body):
    password: str = Field(...)
    isHashed: bool = False
    oldPassword: str | None = Field(
        None, description="needed to change your own password, unless you logged in within security.fresh_login_window"
    )


@router.get("", response_model=GetUsersResponse, response_model_exclude_unset=True)
def list_users(
    request: Request,
    active: bool | None = None,
    admin: bool | None = None,
    name: str = Query("", max_length=255),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    sortBy: str = Query("SORT_BY_UNSPECIFIED"),
    orderBy: str = Query("ORDER_BY_UNSPECIFIED"),
    _: Caller = Depends(caller),
) -> GetUsersResponse:
    """Determined's GetUsers: filtered by state, admin rights and name; sorted; limit 0 is no limit."""
    if sortBy not in users_service.SORT_KEYS:
        raise InvalidArgument.at("sortBy", f"one of {', '.join(users_service.SORT_KEYS)}")
    if orderBy not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise InvalidArgument.at("orderBy", "one of ORDER_BY_UNSPECIFIED, ORDER_BY_ASC, ORDER_BY_DESC")
    query = users_service.UserQuery(
        active=active,
        admin=admin,
        name=name,
        sort_by=sortBy,
        descending=orderBy == "ORDER_BY_DESC",
        offset=offset,
        limit=limit,
    )
    page = users_service.users_page(ctx_of(request), query)
    return GetUsersResponse(users=page.users, pagination=Pagination.of(offset, limit, page.total, len(page.users)))


@router.get("/{user_id}", response_model=GetUserResponse, response_model_exclude_unset=True)
def get_user(user_id: IdPath, request: Request, _: Caller = Depends(caller)) -> GetUserResponse:
    """Determined's GetUser (the SDK's get_user_by_id, User.reload)."""
    return GetUserResponse(user=users_service.user_by_id(ctx_of(request), user_id))


@router.patch("/{user_id}", response_model=GetUserResponse, response_model_exclude_unset=True)
@accepts(PatchUserBody, errors=(409,))
def patch_user(
    user_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> GetUserResponse:
    """Determined's PatchUser: `det user edit|rename|activate|deactivate|link-with-agent-user`,
    and the SDK's User methods."""
    req = parse(PatchUserBody, body)
    group = _group_body(req.agentUserGroup)
    edit = user_edits.UserEdit(
        username=req.username,
        display_name=req.displayName,
        active=req.active,
        admin=req.admin,
        remote=req.remote,
        password=req.password,
        is_hashed=req.isHashed,
        agent_user_group=group,
    )
    return GetUserResponse(user=user_edits.edit_user(ctx_of(request), who, user_id, edit, bearer_token(request) or ""))


def _group_body(group: AgentUserGroupBody | None) -> dict[str, Any] | None:
    return None if group is None else group.model_dump()


@router.get("/{username}/by-username", response_model=GetUserResponse, response_model_exclude_unset=True)
def get_by_username(
    request: Request, username: str = Path(..., min_length=1, max_length=255), who: Caller = Depends(caller)
) -> GetUserResponse:
    """Determined's SDK's client.get_user_by_name."""
    return GetUserResponse(user=user_lookup.by_username(ctx_of(request), who, username))


@router.post("", response_model=GetUserResponse, response_model_exclude_unset=True)
@accepts(CreateUserBody, errors=(409,))
def create_user(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> GetUserResponse:
    req = parse(CreateUserBody, body)
    group = agent_user_groups.parse(_group_body(req.user.agentUserGroup), "user.agentUserGroup")
    user = users_service.create_by(
        ctx_of(request),
        who,
        req.user.username,
        req.password,
        req.isHashed,
        admin=req.user.admin,
        active=req.user.active,
        display_name=req.user.displayName,
        agent_user_group=group,
    )
    return GetUserResponse(user=user)


@router.post("/{user_id}/password")
@accepts(PasswordBody, bare={"type": "string"})  # det: the hash alone
async def set_password(user_id: IdPath, request: Request, who: Caller = Depends(caller)) -> dict:
    # det sends the hashed password as a bare JSON string; pedl's CLI sends {password, isHashed}
    body = await json_body(request)  # within the limits: nesting depth, storable values
    old = None
    if isinstance(body, str):
        password, is_hashed = body, True
    else:
        req = parse(PasswordBody, body)
        password, is_hashed, old = req.password, req.isHashed, req.oldPassword
    ctx = ctx_of(request)
    token = bearer_token(request) or ""
    await run_in_threadpool(users_service.change_password, ctx, who, user_id, password, is_hashed, old, token)
    return {}

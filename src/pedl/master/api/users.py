"""Users: listing, lookup by id and by username, creation, edits (PATCH) and password changes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from pedl.errors import InvalidArgument
from pedl.master.api import shapes
from pedl.master.api.deps import (
    INT64_MAX,
    Body,
    Caller,
    IdPath,
    bearer_token,
    caller,
    ctx_of,
    json_body,
    pagination,
    parse,
)
from pedl.master.api.openapi import accepts
from pedl.master.identity import user_edits, user_lookup
from pedl.master.identity import users as users_service
from pedl.master.lifecycle import agent_user_groups

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
    oldPassword: str | None = Field(None, description="needed to change your own password, unless you "
                                                      "logged in within security.fresh_login_window")


SORT_KEYS = {
    "SORT_BY_UNSPECIFIED": lambda u: u.id, "SORT_BY_USER_NAME": lambda u: u.username,
    "SORT_BY_DISPLAY_NAME": lambda u: u.display_name or "", "SORT_BY_ADMIN": lambda u: u.admin,
    "SORT_BY_ACTIVE": lambda u: u.active, "SORT_BY_MODIFIED_TIME": lambda u: u.modified_at,
    "SORT_BY_NAME": lambda u: u.display_name or u.username, "SORT_BY_REMOTE": lambda u: False,
}


@router.get("")
def list_users(request: Request, active: bool | None = None, admin: bool | None = None,
               name: str = Query("", max_length=255), offset: int = Query(0, ge=0, le=INT64_MAX),
               limit: int = Query(0, ge=0, le=INT64_MAX), sortBy: str = Query("SORT_BY_UNSPECIFIED"),
               orderBy: str = Query("ORDER_BY_UNSPECIFIED"), _: Caller = Depends(caller)) -> dict:
    """Determined's GetUsers: filtered by state, admin rights and name; sorted; limit 0 is no limit."""
    if sortBy not in SORT_KEYS:
        raise InvalidArgument.at("sortBy", f"one of {', '.join(SORT_KEYS)}")
    if orderBy not in ("ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"):
        raise InvalidArgument.at("orderBy", "one of ORDER_BY_UNSPECIFIED, ORDER_BY_ASC, ORDER_BY_DESC")
    rows = users_service.all_users(ctx_of(request), active=active, admin=admin, name=name)
    key = SORT_KEYS[sortBy]
    rows.sort(key=lambda u: (key(u), u.id), reverse=orderBy == "ORDER_BY_DESC")
    page = rows[offset:offset + limit] if limit else rows[offset:]
    return {"users": [shapes.user(u) for u in page], "pagination": pagination(offset, limit, len(rows), len(page))}


@router.get("/{user_id}")
def get_user(user_id: IdPath, request: Request, _: Caller = Depends(caller)) -> dict:
    """Determined's GetUser (the SDK's get_user_by_id, User.reload)."""
    return {"user": shapes.user(users_service.user_by_id(ctx_of(request), user_id))}


@router.patch("/{user_id}")
@accepts(PatchUserBody, errors=(409,))
def patch_user(user_id: IdPath, request: Request, who: Caller = Depends(caller),
               body: dict = Depends(json_body)) -> dict:
    """Determined's PatchUser: `det user edit|rename|activate|deactivate|link-with-agent-user`,
    and the SDK's User methods."""
    req = parse(PatchUserBody, body)
    group = _group_body(req.agentUserGroup)
    edit = user_edits.UserEdit(username=req.username, display_name=req.displayName, active=req.active,
                               admin=req.admin, remote=req.remote, password=req.password, is_hashed=req.isHashed,
                               agent_user_group=group)
    user = user_edits.edit_user(ctx_of(request), who, user_id, edit, bearer_token(request) or "")
    return {"user": shapes.user(user)}


def _group_body(group: AgentUserGroupBody | None) -> dict[str, Any] | None:
    return None if group is None else group.model_dump()


@router.get("/{username}/by-username")
def get_by_username(request: Request, username: str = Path(..., min_length=1, max_length=255),
                    who: Caller = Depends(caller)) -> dict:
    """Determined's SDK's client.get_user_by_name."""
    return {"user": shapes.user(user_lookup.by_username(ctx_of(request), who, username))}


@router.post("")
@accepts(CreateUserBody, errors=(409,))
def create_user(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(CreateUserBody, body)
    group = agent_user_groups.parse(_group_body(req.user.agentUserGroup), "user.agentUserGroup")
    user = users_service.create_by(ctx_of(request), who, req.user.username, req.password, req.isHashed,
                                   admin=req.user.admin, active=req.user.active, display_name=req.user.displayName,
                                   agent_user_group=group)
    return {"user": shapes.user(user)}


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

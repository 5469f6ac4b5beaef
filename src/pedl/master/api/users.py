"""User listing, lookup by username, creation and password changes."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from pedl.master.api import shapes
from pedl.master.api.deps import (
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
from pedl.master.services import user_lookup
from pedl.master.services import users as users_service

router = APIRouter(prefix="/api/v1/users")


class NewUser(Body):
    username: str
    admin: bool = False
    active: bool = True
    displayName: str | None = Field(None, max_length=255)


class CreateUserBody(Body):
    user: NewUser
    password: str = ""
    isHashed: bool = False


class PasswordBody(Body):
    password: str = Field(...)
    isHashed: bool = False
    oldPassword: str | None = Field(None, description="needed to change your own password, unless you "
                                                      "logged in within security.fresh_login_window")


@router.get("")
def list_users(request: Request, _: Caller = Depends(caller)) -> dict:
    rows = users_service.all_users(ctx_of(request))
    return {"users": [shapes.user(u) for u in rows],
            "pagination": {"offset": 0, "limit": len(rows), "startIndex": 0, "endIndex": len(rows),
                           "total": len(rows)}}


@router.get("/{username}/by-username")
def get_by_username(request: Request, username: str = Path(..., min_length=1, max_length=255),
                    who: Caller = Depends(caller)) -> dict:
    """Determined's SDK's client.get_user_by_name."""
    return {"user": shapes.user(user_lookup.by_username(ctx_of(request), who, username))}


@router.post("")
@accepts(CreateUserBody, errors=(409,))
def create_user(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(CreateUserBody, body)
    user = users_service.create_by(ctx_of(request), who, req.user.username, req.password, req.isHashed,
                                   admin=req.user.admin, active=req.user.active, display_name=req.user.displayName)
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

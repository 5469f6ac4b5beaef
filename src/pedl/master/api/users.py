"""User listing, creation and password changes."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
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
from pedl.master.services import users as users_service
from pedl.master.services.authz import require_user

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
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        rows = users_service.list_users(s)
        return {"users": [shapes.user(u) for u in rows],
                "pagination": {"offset": 0, "limit": len(rows), "startIndex": 0, "endIndex": len(rows),
                               "total": len(rows)}}


@router.post("")
@accepts(CreateUserBody, errors=(409,))
def create_user(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(CreateUserBody, body)
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        actor = require_user(who, "create users")
        user = users_service.create_user(s, ctx.clock.now(), actor, req.user.username, req.password,
                                         req.isHashed, admin=req.user.admin, active=req.user.active,
                                         display_name=req.user.displayName)
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

    def work() -> dict:
        with ctx.db.session() as s:
            users_service.set_password(s, ctx.clock.now(), who, user_id, password, is_hashed, old_password=old,
                                       old_is_hashed=is_hashed, current_token=token,
                                       fresh_login_window=ctx.config.security.fresh_login_window)
        ctx.caller_cache.drop_user(user_id)  # after the commit: revoked sessions stop at once
        return {}

    return await run_in_threadpool(work)

"""User listing, creation and password changes."""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from pedl.errors import InvalidArgument
from pedl.master.api import shapes
from pedl.master.api.deps import Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.services import users as users_service

router = APIRouter(prefix="/api/v1/users")


class NewUser(Body):
    username: str
    admin: bool = False
    active: bool = True
    displayName: str | None = None


class CreateUserBody(Body):
    user: NewUser
    password: str = ""
    isHashed: bool = False


class PasswordBody(Body):
    password: str = Field(...)
    isHashed: bool = False


@router.get("")
def list_users(request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        rows = users_service.list_users(s)
        return {"users": [shapes.user(u) for u in rows],
                "pagination": {"offset": 0, "limit": len(rows), "startIndex": 0, "endIndex": len(rows),
                               "total": len(rows)}}


@router.post("")
def create_user(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(CreateUserBody, body)
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        user = users_service.create_user(s, ctx.clock.now(), who.user, req.user.username, req.password,
                                         req.isHashed, admin=req.user.admin, active=req.user.active,
                                         display_name=req.user.displayName)
        return {"user": shapes.user(user)}


@router.post("/{user_id}/password")
async def set_password(user_id: int, request: Request, who: Caller = Depends(caller)) -> dict:
    # det sends the hashed password as a bare JSON string; pedl's CLI sends {password, isHashed}
    raw = await request.body()
    try:
        body = json.loads(raw) if raw.strip() else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidArgument("body: malformed JSON", fields=[{"field": "body", "message": "malformed JSON"}]) from None
    if isinstance(body, str):
        password, is_hashed = body, True
    else:
        req = parse(PasswordBody, body)
        password, is_hashed = req.password, req.isHashed
    ctx = ctx_of(request)
    from starlette.concurrency import run_in_threadpool

    def work() -> dict:
        with ctx.db.session() as s:
            users_service.set_password(s, ctx.clock.now(), who.user, user_id, password, is_hashed)
        return {}

    return await run_in_threadpool(work)

"""Login, logout and the current user."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from pedl.master.api import shapes
from pedl.master.api.deps import (
    Body,
    Caller,
    bearer_token,
    caller,
    caller_cache,
    ctx_of,
    json_body,
    parse,
)
from pedl.master.api.openapi import accepts
from pedl.master.services import users as users_service
from pedl.master.services.authz import require_user

router = APIRouter(prefix="/api/v1")


class LoginBody(Body):
    username: str
    password: str = ""
    isHashed: bool = False


@router.post("/auth/login")
@accepts(LoginBody, errors=(403, 429))  # 403: wrong credentials, as det expects
def login(request: Request, body: dict = Depends(json_body)) -> dict:
    req = parse(LoginBody, body)
    ctx = ctx_of(request)
    address = request.client.host if request.client else ""
    with ctx.db.session() as s:
        token, user = users_service.login(s, ctx.clock.now(), ctx.config.session_ttl, req.username,
                                          req.password, req.isHashed, ctx.login_limiter, address)
        return {"token": token, "user": shapes.user(user)}


@router.post("/auth/logout")
def logout(request: Request, who: Caller = Depends(caller), _body: dict = Depends(json_body)) -> dict:
    require_user(who, "log out")
    ctx = ctx_of(request)
    token = bearer_token(request) or ""
    with ctx.db.session() as s:
        users_service.logout(s, token)
    caller_cache(request).drop(token)
    return {}


@router.get("/me")
def me(who: Caller = Depends(caller)) -> dict:
    return {"user": shapes.user(who.user)}

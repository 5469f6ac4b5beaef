"""Login, logout and the current user."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from pedl.master.api import shapes
from pedl.master.api.deps import Body, Caller, caller, caller_cache, ctx_of, json_body, parse
from pedl.master.services import users as users_service

router = APIRouter(prefix="/api/v1")


class LoginBody(Body):
    username: str
    password: str = ""
    isHashed: bool = False


@router.post("/auth/login")
def login(request: Request, body: dict = Depends(json_body)) -> dict:
    req = parse(LoginBody, body)
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        token, user = users_service.login(s, ctx.clock.now(), ctx.config.session_ttl, req.username,
                                          req.password, req.isHashed)
        return {"token": token, "user": shapes.user(user)}


@router.post("/auth/logout")
def logout(request: Request, _: Caller = Depends(caller), _body: dict = Depends(json_body)) -> dict:
    ctx = ctx_of(request)
    token = request.headers.get("authorization", "").partition(" ")[2].strip()
    with ctx.db.session() as s:
        users_service.logout(s, token)
    caller_cache(request).drop(token)
    return {}


@router.get("/me")
def me(who: Caller = Depends(caller)) -> dict:
    return {"user": shapes.user(who.user)}

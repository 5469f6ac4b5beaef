"""Login, logout and the current user."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from pedl.master.api import shapes
from pedl.master.api.deps import (
    Body,
    Caller,
    bearer_token,
    caller,
    ctx_of,
    json_body,
    parse,
)
from pedl.master.api.openapi import accepts
from pedl.master.services import users as users_service

router = APIRouter(prefix="/api/v1")


class LoginBody(Body):
    username: str
    password: str = ""
    isHashed: bool = False


@router.post("/auth/login")
@accepts(LoginBody, errors=(403, 429))  # 403: wrong credentials, as det expects
def login(request: Request, body: dict = Depends(json_body)) -> dict:
    req = parse(LoginBody, body)
    address = request.client.host if request.client else ""
    token, user = users_service.log_in(ctx_of(request), req.username, req.password, req.isHashed, address)
    return {"token": token, "user": shapes.user(user)}


@router.post("/auth/logout")
def logout(request: Request, who: Caller = Depends(caller), _body: dict = Depends(json_body)) -> dict:
    users_service.log_out(ctx_of(request), who, bearer_token(request) or "")
    return {}


@router.get("/me")
def me(who: Caller = Depends(caller)) -> dict:
    return {"user": shapes.user(who.user)}

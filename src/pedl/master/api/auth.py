"""Login, logout and the current user: tokens for the CLI, det and the SDK; a cookie session for the
WebUI (api/browser_session.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response

from pedl.errors import InvalidArgument
from pedl.master.api.browser_session import clear_session_cookies, set_session_cookies
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
from pedl.master.http_protocol import CONSOLE
from pedl.master.identity import to_wire
from pedl.master.identity import users as users_service
from pedl.master.wire.user import GetUserResponse, LoginResponse

router = APIRouter(prefix="/api/v1")


def client_address(request: Request) -> str:
    """The client's address: the connection's peer, or the client a security.trusted_proxies proxy names
    (app.py's ProxyHeadersMiddleware has put it in the scope)."""
    return request.client.host if request.client else ""


class LoginBody(Body):
    username: str
    password: str = ""
    isHashed: bool = False


@router.post("/auth/login", response_model=LoginResponse, response_model_exclude_unset=True)
@accepts(LoginBody, errors=(401, 403, 429))  # as Determined: 401 wrong credentials, 403 a deactivated user
def login(request: Request, body: dict = Depends(json_body)) -> LoginResponse:
    req = parse(LoginBody, body)
    return users_service.log_in(
        ctx_of(request),
        req.username,
        req.password,
        req.isHashed,
        client_address(request),
        console=bool(request.scope.get(CONSOLE)),
    )


@router.post("/auth/logout")
def logout(request: Request, who: Caller = Depends(caller), _body: dict = Depends(json_body)) -> dict:
    users_service.log_out(ctx_of(request), who, bearer_token(request) or "")
    return {}


@router.get("/me", response_model=GetUserResponse, response_model_exclude_unset=True)
def me(who: Caller = Depends(caller)) -> GetUserResponse:
    return GetUserResponse(user=to_wire.user(who.user))


class SessionBody(Body):
    username: str
    password: str = ""


@router.post("/auth/session", response_model=GetUserResponse, response_model_exclude_unset=True)
@accepts(SessionBody, errors=(401, 403, 429))
def open_session(request: Request, response: Response, body: dict = Depends(json_body)) -> GetUserResponse:
    """The WebUI's login: the token goes into cookies, never into the page's reach."""
    # a cross-site form cannot send JSON without a preflight, so a login cannot be forced on a browser
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise InvalidArgument("Content-Type: a browser session is opened with an application/json body")
    req = parse(SessionBody, body)
    logged_in = users_service.log_in(ctx_of(request), req.username, req.password, False, client_address(request))
    set_session_cookies(request, response, logged_in.token, max_age=int(ctx_of(request).config.session_ttl))
    return GetUserResponse(user=logged_in.user)


@router.delete("/auth/session")
def close_session(request: Request, response: Response, who: Caller = Depends(caller)) -> dict:
    users_service.log_out(ctx_of(request), who, bearer_token(request) or "")
    clear_session_cookies(response)
    return {}

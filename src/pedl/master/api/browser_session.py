"""The WebUI's login: the session token in an HttpOnly, SameSite=Strict cookie, and a CSRF token the
page echoes in a header on every request that changes state. The CSRF token is a hash of the session
token: a page can read it, nobody can turn it back into the token, and it survives master restarts.
Clients with `Authorization: Bearer` (CLI, det, SDK, tasks) never meet any of this."""

from __future__ import annotations

import hashlib
import hmac

from fastapi import Request, Response

from pedl.errors import Forbidden

SESSION_COOKIE = "pedl_session"
CSRF_COOKIE = "pedl_csrf"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def csrf_for(token: str) -> str:
    return hashlib.sha256(b"pedl-csrf\0" + token.encode()).hexdigest()


def cookie_token(request: Request) -> str | None:
    """The session token of the request's cookie, None without one. A request that changes state must
    also carry the cookie's CSRF token in X-CSRF-Token: another site can make a browser send the
    cookie, but cannot read the CSRF token to put in the header."""
    token = request.cookies.get(SESSION_COOKIE, "").strip()
    if not token:
        return None
    if request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), csrf_for(token).encode()):
            raise Forbidden(
                f"{request.method} with the session cookie needs the header X-CSRF-Token with the "
                f"value of the {CSRF_COOKIE} cookie (a protection against cross-site requests)"
            )
    return token


def set_session_cookies(request: Request, response: Response, token: str, max_age: int) -> None:
    secure = request.url.scheme == "https"
    response.set_cookie(
        SESSION_COOKIE, token, max_age=max_age, path="/", httponly=True, samesite="strict", secure=secure
    )
    response.set_cookie(
        CSRF_COOKIE, csrf_for(token), max_age=max_age, path="/", httponly=False, samesite="strict", secure=secure
    )


def clear_session_cookies(response: Response) -> None:
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.delete_cookie(name, path="/", samesite="strict")

"""Who is calling through the master's proxy: a login token in Authorization (det, scripts), or the
WebUI's session cookie (a browser tab opening a notebook sends no header). With the cookie, a
request that changes state or opens a WebSocket must come from a page of the master itself
(Origin, or Sec-Fetch-Site), since the service's own pages cannot echo pedl's CSRF header."""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from pedl.errors import Forbidden, Unauthenticated
from pedl.master.api.browser_session import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, csrf_for
from pedl.master.api.deps import _token, ctx_of
from pedl.master.api.proxy_relays import ProxyRelays
from pedl.master.caller_cache import Caller
from pedl.master.identity import users as users_service
from pedl.master.tasks import UNAUTHENTICATED

CROSS_SITE = (
    "the WebUI's session cookie opens a task's service only from the master's own pages "
    "(the request's Origin is {origin!r}, not this master): log in here, or send "
    "'Authorization: Bearer <token>'"
)


def same_origin(conn: HTTPConnection, cookie: str) -> bool:
    headers = conn.headers
    if hmac.compare_digest(headers.get(CSRF_HEADER, "").encode(), csrf_for(cookie).encode()):
        return True
    origin = headers.get("origin")
    if origin:
        return urlsplit(origin).netloc.lower() == headers.get("host", "").lower()
    return headers.get("sec-fetch-site", "") == "same-origin"


def credentials(conn: HTTPConnection, *, websocket: bool) -> tuple[str, bool] | None:
    """(token, came as the session cookie); None: the caller sent neither."""
    token = _token(conn)
    if token:
        return token, False
    cookie = conn.cookies.get(SESSION_COOKIE, "").strip()
    if not cookie:
        return None
    if (websocket or conn.scope.get("method") not in SAFE_METHODS) and not same_origin(conn, cookie):
        raise Forbidden(CROSS_SITE.format(origin=conn.headers.get("origin", "")))
    return cookie, True


def proxy_caller(conn: HTTPConnection, *, websocket: bool = False) -> tuple[Caller, bool]:
    """The caller and whether it came with the session cookie. Not a task's contact: tasks are refused."""
    found = proxy_caller_or_none(conn, websocket=websocket)
    if found is None:
        raise Unauthenticated(UNAUTHENTICATED)
    return found


def proxy_caller_or_none(conn: HTTPConnection, *, websocket: bool = False) -> tuple[Caller, bool] | None:
    """As proxy_caller, but None for a caller who sent no credentials at all (a shell's tunnel may
    pass without: tasks/proxy_targets.py says why)."""
    found = credentials(conn, websocket=websocket)
    if found is None:
        return None
    token, browser = found
    ctx = ctx_of(conn)
    now = ctx.clock.now()
    who = ctx.caller_cache.get(token, now)
    if who is None:
        who = users_service.resolve_caller(ctx, token)
        ctx.caller_cache.put(token, who, now)
    return who, browser


def proxy_relays(conn: HTTPConnection) -> ProxyRelays:
    return conn.app.state.proxy_relays

"""Which headers cross the master's proxy, both ways (pure). Hop-by-hop headers stay on their hop,
pedl's own credentials never reach a task's service, and a service cannot set pedl's cookies."""

from __future__ import annotations

from collections.abc import Iterable
from http.cookies import SimpleCookie

from pedl.master.api.browser_session import CSRF_COOKIE, CSRF_HEADER, SESSION_COOKIE

# RFC 9110 7.6.1, plus those every proxy drops; `upgrade` is the WebSocket relay's own business
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-connection",
    }
)
# the caller's credentials for pedl: an admin opening a user's notebook must not hand the user's code a token
CREDENTIALS = frozenset({"authorization", "grpc-metadata-x-allocation-token", CSRF_HEADER})
PEDL_COOKIES = frozenset({SESSION_COOKIE, CSRF_COOKIE})
# set again by the master for the upstream (X-Forwarded-*), or by the WebSocket client library
REPLACED = frozenset({"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "forwarded"})
WEBSOCKET_HANDSHAKE = frozenset(
    {
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-extensions",
        "sec-websocket-protocol",
        "sec-websocket-accept",
    }
)

Headers = list[tuple[str, str]]


def _connection_named(headers: Iterable[tuple[str, str]]) -> set[str]:
    """Headers a `Connection:` header names are hop-by-hop for this message too."""
    named: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            named.update(part.strip().lower() for part in value.split(",") if part.strip())
    return named


def _without_pedl_cookies(value: str) -> str:
    kept = []
    for part in value.split(";"):
        name = part.split("=", 1)[0].strip()
        if name and name not in PEDL_COOKIES:
            kept.append(part.strip())
    return "; ".join(kept)


def request_headers(
    headers: Iterable[tuple[str, str]], *, client: str, scheme: str, websocket: bool = False
) -> Headers:
    """The headers the service gets: the browser's, less hop-by-hop headers and pedl's credentials,
    with X-Forwarded-For/-Proto/-Host saying who asked. Host is kept (as nginx's `Host $host`), so a
    service that compares Origin with Host (Jupyter) sees the names the browser used."""
    headers = list(headers)
    drop = HOP_BY_HOP | CREDENTIALS | REPLACED | _connection_named(headers)
    if websocket:
        drop = drop | WEBSOCKET_HANDSHAKE | {"host"}  # the client library writes its own handshake
    out: Headers = []
    host = ""
    for name, value in headers:
        lower = name.lower()
        if lower == "host":
            host = value
        if lower in drop:
            continue
        if lower == "cookie":
            value = _without_pedl_cookies(value)
            if not value:
                continue
        out.append((lower, value))
    out += [("x-forwarded-for", client), ("x-forwarded-proto", scheme)]
    if host:
        out.append(("x-forwarded-host", host))
    return out


def _sets_pedl_cookie(value: str) -> bool:
    try:
        cookie = SimpleCookie()
        cookie.load(value)
    except Exception:  # a cookie the parser refuses may still be read by a browser
        name = value.split("=", 1)[0].strip()
        return name in PEDL_COOKIES
    return bool(PEDL_COOKIES & set(cookie)) or value.split("=", 1)[0].strip() in PEDL_COOKIES


def response_headers(headers: Iterable[tuple[str, str]]) -> Headers:
    """The headers the browser gets from the service: less hop-by-hop headers and any Set-Cookie of
    pedl's own session cookies (a service must not log its visitor in as someone else)."""
    headers = list(headers)
    drop = HOP_BY_HOP | _connection_named(headers)
    out: Headers = []
    for name, value in headers:
        lower = name.lower()
        if lower in drop or (lower == "set-cookie" and _sets_pedl_cookie(value)):
            continue
        out.append((lower, value))
    return out


def header_bytes(headers: Iterable[tuple[str, str]]) -> int:
    return sum(len(name) + len(value) + 4 for name, value in headers)


def subprotocols(headers: Iterable[tuple[str, str]]) -> list[str]:
    """The WebSocket subprotocols the browser offers (Jupyter's kernel protocol, for one)."""
    offered: list[str] = []
    for name, value in headers:
        if name.lower() == "sec-websocket-protocol":
            offered += [p.strip() for p in value.split(",") if p.strip()]
    return offered

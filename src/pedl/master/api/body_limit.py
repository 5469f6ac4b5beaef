"""Bounds each HTTP request before a router reads it: a body over the master's limit gets a 413 (at
once by its Content-Length, else as soon as the bytes counted pass it), a URL with a NUL a 400."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pedl.errors import InvalidArgument, PayloadTooLarge, PedlError
from pedl.master.api.errors import error_response

if TYPE_CHECKING:
    from pedl.config.security_config import LimitsConfig

MODEL_UPLOAD = ("POST", "/api/v1/experiments")  # an experiment create, with its model definition
PROXY_PREFIX = "/proxy/"  # a task's service (api/proxy.py): streamed through, never held whole
# the routes that read a body before (or without) knowing who calls: anyone may send these, so their
# bodies are held to limits.max_anonymous_body_bytes. Every other route resolves its caller before it reads
# its body (tests/master/api/test_body_limit.py checks both for every route).
ANONYMOUS_BODY_ROUTES = frozenset({("POST", "/api/v1/auth/login"), ("POST", "/api/v1/auth/session")})


def is_model_upload(method: str, path: str) -> bool:
    return (method, path.rstrip("/")) == MODEL_UPLOAD


def body_limit(limits: LimitsConfig, method: str, path: str, proxy_body_bytes: int | None = None) -> tuple[int, str]:
    """The most bytes a request's body may have, and the setting that says so. A model upload is
    base64 (4/3 of the files) in JSON, with the config beside it and an ordinary body's allowance
    for the rest. A body for a task's service through the proxy has the proxy's own bound, and one
    anyone may send (a login) a small one."""
    if proxy_body_bytes is not None and path.startswith(PROXY_PREFIX):
        return proxy_body_bytes, "proxy.max_request_body_bytes"
    if (method, path.rstrip("/")) in ANONYMOUS_BODY_ROUTES:
        return limits.max_anonymous_body_bytes, "limits.max_anonymous_body_bytes"
    if is_model_upload(method, path):
        allowed = limits.max_model_definition_bytes * 4 // 3 + limits.max_config_bytes + limits.max_request_body_bytes
        return allowed, "limits.max_model_definition_bytes"
    return limits.max_request_body_bytes, "limits.max_request_body_bytes"


def _url_problem(scope: Scope) -> InvalidArgument | None:
    """PostgreSQL refuses a NUL in any text where SQLite stores it: refused here, for every route."""
    if "\x00" in scope.get("path", ""):
        return InvalidArgument(
            "path: the URL path contains a NUL character",
            fields=[{"field": "path", "message": "contains a NUL character"}],
        )
    query = scope.get("query_string", b"").decode("latin-1")
    if "%00" not in query and "\x00" not in query:
        return None
    bad = next(
        (name for name, value in parse_qsl(query, keep_blank_values=True) if "\x00" in name or "\x00" in value), "query"
    )
    field = bad.replace("\x00", "\\0")
    return InvalidArgument(
        f"{field}: contains a NUL character", fields=[{"field": field, "message": "contains a NUL character"}]
    )


class _TooLarge(Exception):
    """Raised into the app from receive(); the middleware answers instead of the app."""


class BodyLimit:
    def __init__(self, app: ASGIApp, limits: LimitsConfig, proxy_body_bytes: int | None = None) -> None:
        self.app = app
        self.limits = limits
        self.proxy_body_bytes = proxy_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = _url_problem(scope)
        if problem is not None:
            await _answer(problem, scope, receive, send)
            return
        limit, setting = body_limit(self.limits, scope["method"], scope["path"], self.proxy_body_bytes)
        too_large = PayloadTooLarge(
            f"body: the request body is larger than {limit} bytes ({setting})",
            fields=[{"field": "body", "message": f"larger than {limit} bytes"}],
        )
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                await _answer(
                    InvalidArgument(
                        "Content-Length: not a byte count", fields=[{"field": "Content-Length", "message": "invalid"}]
                    ),
                    scope,
                    receive,
                    send,
                )
                return
            if length > limit:
                await _answer(too_large, scope, receive, send)
                return
        received = 0
        exceeded = False
        started = False

        async def counted_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:  # a chunked body, or one longer than it said
                    exceeded = True
                    raise _TooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if exceeded:  # whatever the app makes of the aborted read, the answer is the 413
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except Exception:
            if not exceeded:
                raise
        if exceeded and not started:
            await _answer(too_large, scope, receive, send)


async def _answer(exc: PedlError, scope: Scope, receive: Receive, send: Send) -> None:
    await error_response(exc)(scope, receive, send)

"""Map errors to HTTP once: PedlError by its code, request validation to 400 naming the field,
anything unexpected to a logged 500 that says nothing internal."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from sqlalchemy.exc import DataError, OperationalError
from starlette._utils import get_route_path
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from pedl.config.loading import field_path
from pedl.errors import (
    GRPC_CODE,
    HTTP_STATUS,
    InvalidArgument,
    NotFound,
    PedlError,
    Unauthenticated,
    Unavailable,
)
from pedl.master.http_protocol import BODY_TIMED_OUT
from pedl.master.lifecycle.states import IllegalTransition

log = logging.getLogger(__name__)

CLIENT_CLOSED_REQUEST = 499  # nginx's status for a request whose client went away: a 4xx in /metrics


class ErrorJSONResponse(JSONResponse):
    """Errors echo what the client sent (field paths made of its keys, its values): escaped to
    ASCII, so that a lone surrogate the client sent cannot make the answer unencodable."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def error_response(exc: PedlError) -> JSONResponse:
    headers = None
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        headers = {"Retry-After": str(max(1, int(retry_after)))}
    return ErrorJSONResponse(exc.to_dict(), status_code=HTTP_STATUS[exc.code], headers=headers)


class NestedValueError(ValueError):
    """Raised by a field validator about a value inside the field: `subpath` goes on from the
    field's path ("[0].path", "key.inner"), so the 400 names exactly where the value is."""

    def __init__(self, subpath: str, message: str) -> None:
        super().__init__(message)
        self.subpath = subpath
        self.message = message


def validation_error(errors: Sequence[Mapping[str, Any]], prefix: str = "") -> InvalidArgument:
    problems = []
    for err in errors:
        loc = [p for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        path = field_path(tuple(loc)) if loc else "body"
        if prefix:
            path = f"{prefix}.{path}" if loc else prefix
        msg = "unknown key" if err.get("type") == "extra_forbidden" else err.get("msg", "invalid")
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, NestedValueError):
            sub = cause.subpath
            path, msg = (path + (sub if not sub or sub.startswith("[") else f".{sub}")), cause.message
        problems.append({"field": path, "message": msg})
    text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return InvalidArgument(f"invalid request: {text}", fields=problems)


def http_error(req: Request, exc: StarletteHTTPException) -> JSONResponse:
    """An HTTP error Starlette raises itself (a 405 above all): its real status and reason, in the
    shape of PedlError.to_dict. A 405's Allow names every method of the path, not only those of the
    route Starlette matched first (GET and POST of one path are separate routes)."""
    status = exc.status_code
    reason = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    headers = dict(exc.headers or {})
    message = str(exc.detail) if exc.detail else reason
    if status == 405:
        headers["Allow"] = ", ".join(allowed_methods(req)) or headers.get("Allow", "")
        message = f"method not allowed: {req.method} {req.url.path} accepts {headers['Allow']}"
    code = next((c for c, st in HTTP_STATUS.items() if st == status), None)  # 400, 413...: pedl's own code
    grpc = GRPC_CODE[code] if code else _GRPC_OF_HTTP.get(status, 2)  # 2: UNKNOWN
    pedl_code = str(code) if code else reason.lower().replace(" ", "_")
    body = {
        "code": grpc,
        "pedlCode": pedl_code,
        "message": message,
        "error": {"code": grpc, "reason": reason, "error": message, "message": message},
    }
    return JSONResponse(body, status_code=status, headers=headers)


# gRPC codes det expects for the statuses Starlette raises: 405 is UNIMPLEMENTED, as grpc-gateway says
_GRPC_OF_HTTP = {405: 12, 415: 3}


def allowed_methods(req: Request) -> list[str]:
    """The methods of the path's most literal templates: /experiments/1/trials is GET only, though
    /experiments/{id}/{action} (POST kill, pause...) matches it too."""
    path = get_route_path(req.scope)
    matches = [r for r in routes(req.app) if r.path_regex.match(path)]
    fewest = min((r.path_format.count("{") for r in matches), default=0)
    return sorted({m for r in matches if r.path_format.count("{") == fewest for m in r.methods or ()})


def routes(app: FastAPI) -> list[APIRoute]:
    """The app's API routes, each with path_format, path_regex, methods, endpoint and dependant.
    FastAPI 0.16x keeps included routers whole in app.routes; older versions flatten them."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:
        return [r for r in app.routes if isinstance(r, APIRoute)]
    # a RouteContext answers for its APIRoute (its __getattr__), with the path the app serves it at
    return [cast(APIRoute, c) for c in iter_route_contexts(app.routes) if isinstance(c.original_route, APIRoute)]


def install(app: FastAPI) -> None:
    @app.exception_handler(PedlError)
    async def _pedl(_req: Request, exc: PedlError) -> JSONResponse:
        return error_response(exc)

    # a bug in the master: log the edge (kind, id, from and to are in the message) and answer 500
    @app.exception_handler(IllegalTransition)
    async def _illegal_transition(req: Request, exc: IllegalTransition) -> JSONResponse:
        log.error("illegal transition on %s %s: %s", req.method, req.url.path, exc.message, exc_info=exc)
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_req: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(validation_error(list(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _http(req: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error_response(NotFound(f"no route: {exc.detail}" if exc.detail != "Not Found" else "not found"))
        if exc.status_code == 401:
            return error_response(Unauthenticated(str(exc.detail)))
        return http_error(req, exc)

    # A safety net: bodies, configs and URLs are validated before the database sees them (deps.Body,
    # bounded_json, body_limit, the config models). A value the database still refuses (an integer
    # beyond 64 bits in a path parameter, say) is the caller's mistake, not the master's; SQLite
    # refuses big integers with a bare OverflowError.
    @app.exception_handler(DataError)
    @app.exception_handler(OverflowError)
    async def _unstorable(req: Request, exc: Exception) -> JSONResponse:
        log.warning(
            "refused a value the database cannot store on %s %s: %s",
            req.method,
            req.url.path,
            str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
        )
        return error_response(
            InvalidArgument("a value in the request is out of range or contains characters that cannot be stored")
        )

    # The database went away (a PostgreSQL restart, a locked SQLite file past its timeout): the
    # request may succeed later, so say so with 503, which pedl.core and det retry.
    @app.exception_handler(OperationalError)
    async def _database_down(req: Request, exc: OperationalError) -> JSONResponse:
        log.warning(
            "database unavailable on %s %s: %s",
            req.method,
            req.url.path,
            str(exc.orig).splitlines()[0] if exc.orig else type(exc).__name__,
        )
        return error_response(Unavailable("the database is unavailable right now; retry shortly"))

    # The client hung up before its body arrived (a dropped connection, a killed client, a body read
    # timeout): one line, and the answer nobody reads is a 4xx, not a 500 with a traceback in the log
    # and in the 5xx count of /metrics.
    @app.exception_handler(ClientDisconnect)
    async def _client_gone(req: Request, _exc: ClientDisconnect) -> Response:
        timeout = req.scope.get(BODY_TIMED_OUT)
        why = (
            f"sent no body bytes for {timeout:g} s (server.body_read_timeout)"
            if timeout is not None
            else "went away before its request body arrived"
        )
        log.info("client %s %s: %s %s", req.client.host if req.client else "?", why, req.method, req.url.path)
        return Response(status_code=CLIENT_CLOSED_REQUEST)

    @app.exception_handler(Exception)
    async def _unexpected(req: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", req.method, req.url.path)
        return error_response(PedlError(f"internal error ({type(exc).__name__}); see the master log"))

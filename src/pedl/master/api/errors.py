"""Map errors to HTTP once: PedlError by its code, request validation to 400 naming the field,
anything unexpected to a logged 500 that says nothing internal."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException

from pedl.config.loading import field_path
from pedl.errors import HTTP_STATUS, InvalidArgument, NotFound, PedlError, Unauthenticated

log = logging.getLogger(__name__)


def error_response(exc: PedlError) -> JSONResponse:
    return JSONResponse(exc.to_dict(), status_code=HTTP_STATUS[exc.code])


def validation_error(errors: list[dict], prefix: str = "") -> InvalidArgument:
    problems = []
    for err in errors:
        loc = [p for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        path = field_path(tuple(loc)) if loc else "body"
        if prefix:
            path = f"{prefix}.{path}" if loc else prefix
        msg = "unknown key" if err.get("type") == "extra_forbidden" else err.get("msg", "invalid")
        problems.append({"field": path, "message": msg})
    text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return InvalidArgument(f"invalid request: {text}", fields=problems)


def install(app: FastAPI) -> None:
    @app.exception_handler(PedlError)
    async def _pedl(_req: Request, exc: PedlError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_req: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(validation_error(list(exc.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error_response(NotFound(f"no route: {exc.detail}" if exc.detail != "Not Found" else "not found"))
        if exc.status_code == 401:
            return error_response(Unauthenticated(str(exc.detail)))
        err = PedlError(str(exc.detail))
        body = err.to_dict()
        return JSONResponse(body, status_code=exc.status_code)

    # A value the database refuses (an integer beyond 64 bits, a NUL character on PostgreSQL) is
    # the caller's mistake, not the master's; SQLite refuses big integers with a bare OverflowError.
    @app.exception_handler(DataError)
    @app.exception_handler(OverflowError)
    async def _unstorable(req: Request, exc: Exception) -> JSONResponse:
        log.warning("refused a value the database cannot store on %s %s: %s", req.method, req.url.path,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return error_response(InvalidArgument(
            "a value in the request is out of range or contains characters that cannot be stored"))

    @app.exception_handler(Exception)
    async def _unexpected(req: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", req.method, req.url.path)
        return error_response(PedlError(f"internal error ({type(exc).__name__}); see the master log"))

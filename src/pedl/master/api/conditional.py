"""Conditional GETs for views that pages poll: the ETag is made from the change counters of the
tables the view reads (db/change_counters.py) and the caller, before any query runs, so an
unchanged view answers 304 Not Modified without touching the database."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, FastAPI, Request, Response

from pedl.master.api.deps import Caller, caller, ctx_of

CONDITIONAL_MARK = "_pedl_conditional"


class NotModified(Exception):
    def __init__(self, etag: str) -> None:
        super().__init__(etag)
        self.etag = etag


HEADERS = {"Cache-Control": "private, no-cache"}  # the browser may keep it, but must ask each time


def _matches(header: str, etag: str) -> bool:
    return any(tag.strip() in (etag, "*") for tag in header.split(",")) if header else False


def unless_changed(*tables: str) -> Callable[..., Caller]:
    """A dependency that authenticates the caller, then answers 304 when the request's If-None-Match
    holds the view's current ETag; otherwise the response carries it. Returns the caller."""

    def check(request: Request, response: Response, who: Caller = Depends(caller)) -> Caller:
        etag = ctx_of(request).db.changes.tag(tables, who.user.id, who.allocation_id or "")
        if _matches(request.headers.get("if-none-match", ""), etag):
            raise NotModified(etag)
        response.headers["ETag"] = etag
        response.headers.update(HEADERS)
        return who

    setattr(check, CONDITIONAL_MARK, True)  # the OpenAPI document lists its 304
    return check


def install(app: FastAPI) -> None:
    @app.exception_handler(NotModified)
    async def _not_modified(_req: Request, exc: NotModified) -> Response:
        return Response(status_code=304, headers={"ETag": exc.etag, **HEADERS})

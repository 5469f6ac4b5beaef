"""Request plumbing shared by routers: the master context, the caller, JSON bodies and pages."""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any, TypeVar

from fastapi import Path, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from starlette.requests import HTTPConnection

from pedl.config.storable_values import INT64_MAX, value_problems
from pedl.errors import InvalidArgument, Unauthenticated
from pedl.master.api.body_limit import is_model_upload
from pedl.master.api.bounded_json import parse_json
from pedl.master.api.browser_session import cookie_token
from pedl.master.api.errors import NestedValueError, validation_error
from pedl.master.caller_cache import Caller, CallerCache
from pedl.master.context import MasterContext
from pedl.master.identity import users as users_service

M = TypeVar("M", bound=BaseModel)

LARGE_BODY_BYTES = 256 * 1024  # a body this large is parsed while no other such body is

# ids in paths and counts in queries: a number past 64 bits is the caller's mistake, not the database's
IdPath = Annotated[int, Path(ge=0, le=INT64_MAX)]


class Body(BaseModel):
    """Base of request bodies: camelCase keys as det sends them; unknown keys are ignored the way
    Determined's gateway ignores them, so newer clients keep working. Every value must be one both
    databases store alike: floats finite, strings without NUL or lone surrogates, integers in 64 bits."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        problems = value_problems(value, limit=1)
        if problems:
            where, message = problems[0]
            raise NestedValueError("" if where == "<root>" else where, message)
        return value


class CheckedBody(BaseModel):
    """A body of many small items (a batch of metric reports), checked whole by `parse_checked`: one
    walk over the body instead of a validator call per field of every item."""

    model_config = Body.model_config


def parse_checked(model: type[M], data: Any) -> M:
    """`parse` for a CheckedBody model: Body's value checks, once over the whole body, first."""
    problems = value_problems(data, limit=1)
    if problems:
        where, message = problems[0]
        raise InvalidArgument.at(where, message)
    return parse(model, data)


def ctx_of(request: HTTPConnection) -> MasterContext:
    return request.app.state.ctx


def _token(request: HTTPConnection) -> str | None:
    for header in ("authorization", "grpc-metadata-x-allocation-token"):
        value = request.headers.get(header)
        if value:
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            raise Unauthenticated(f"{header} header must be 'Bearer <token>'")
    return None


def bearer_token(request: Request) -> str | None:
    """The token the request authenticates with (user or task; a header, else the WebUI's session
    cookie), None without one."""
    return _token(request) or cookie_token(request)


def caller_cache(request: Request) -> CallerCache:
    return ctx_of(request).caller_cache


def caller(request: Request) -> Caller:
    """The user or task behind the request. A task's call is noted as its contact with the master
    (lifecycle/task_contact.py): its trial then cannot be mistaken for one that ran off-cluster."""
    who = agent_fetch_caller(request)
    if who.allocation_id is not None:
        ctx = ctx_of(request)
        ctx.task_contact.note(ctx.db, who.allocation_id, ctx.clock.now())
    return who


def agent_fetch_caller(request: Request) -> Caller:
    """The caller, for a route the agent calls with the task's token before the task runs (the
    model definition download): not the task's own contact."""
    token = bearer_token(request)
    if token is None:
        raise Unauthenticated("authentication required: log in and send 'Authorization: Bearer <token>'")
    ctx = ctx_of(request)
    cache = caller_cache(request)
    now = ctx.clock.now()
    who = cache.get(token, now)
    if who is None:
        who = users_service.resolve_caller(ctx, token)
        cache.put(token, who, now)
    return who


async def json_body(request: Request) -> Any:
    """det sends JSON without a Content-Type header, and no body at all for empty requests. Parsed
    within the master's limits (bounded_json), in a worker thread: on the event loop, every other
    request would wait for it. A parser holds the GIL for the whole of its C call, so large bodies are
    parsed one at a time: the event loop waits for one such call at most, not for a queue of them. A
    model upload's file contents and config text are long strings with limits of their own."""
    raw = await request.body()
    if not raw.strip():
        return {}
    parse = functools.partial(
        parse_json,
        raw,
        ctx_of(request).config.limits,
        check_string_length=not is_model_upload(request.method, request.url.path),
    )
    if len(raw) < LARGE_BODY_BYTES:
        return await run_in_threadpool(parse)
    async with large_body_turn(request.app):
        return await run_in_threadpool(parse)


def large_body_turn(app: Any) -> asyncio.Semaphore:
    """The app's one turn at parsing a large body or agent message, on this event loop (a test may run an
    app on several)."""
    state, loop = app.state, asyncio.get_running_loop()
    held = getattr(state, "large_body_turn", None)
    if held is None or held[0] is not loop:
        held = state.large_body_turn = (loop, asyncio.Semaphore(1))
    return held[1]


async def raw_body(request: Request) -> bytes:
    """The body's bytes, for a route that parses its own (the metric batch's lean path)."""
    return await request.body()


def parse(model: type[M], data: Any) -> M:
    if not isinstance(data, dict):
        raise InvalidArgument("body: must be a JSON object", fields=[{"field": "body", "message": "must be an object"}])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(list(exc.errors())) from None

"""The OpenAPI document told true: request bodies from the models handlers parse with, the bearer and
task-token security schemes, and the error statuses the master really answers (400, never 422)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, TypeVar

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel

from pedl.errors import ErrorCode
from pedl.master.api import deps
from pedl.master.api.conditional import CONDITIONAL_MARK
from pedl.master.api.errors import routes

F = TypeVar("F", bound=Callable[..., Any])

# Attributes the decorators below leave on a handler; build() reads them off the app's routes.
_BODY = "__pedl_openapi_body__"
_MEDIA = "__pedl_openapi_media__"
_ERRORS = "__pedl_openapi_errors__"
_AGENT_TOKEN = "__pedl_openapi_agent_token__"

ERROR_SCHEMA = "Error"
SECURITY = [{"bearer": []}, {"allocationToken": []}]

# Query and path values the handlers act on by name; others are ignored (det's own values).
_ENUMS: dict[str, list[str]] = {
    "orderBy": ["ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC"],
    "sortByAttr": [
        "SORT_BY_UNSPECIFIED",
        "SORT_BY_UUID",
        "SORT_BY_TRIAL_ID",
        "SORT_BY_BATCH_NUMBER",
        "SORT_BY_END_TIME",
        "SORT_BY_STATE",
        "SORT_BY_SEARCHER_METRIC",
    ],
    "levels": [
        "LOG_LEVEL_UNSPECIFIED",
        "LOG_LEVEL_TRACE",
        "LOG_LEVEL_DEBUG",
        "LOG_LEVEL_INFO",
        "LOG_LEVEL_WARNING",
        "LOG_LEVEL_ERROR",
        "LOG_LEVEL_CRITICAL",
    ],
}
_PATH_ENUMS: dict[tuple[str, str], list[str]] = {
    ("/api/v1/experiments/{experiment_id}/{action}", "action"): ["kill", "pause", "activate", "cancel"],
}

# Bodies read without a pydantic model (the handler checks them by hand).
TASK_LOGS: dict[str, Any] = {
    "type": "object",
    "required": ["logs"],
    "properties": {
        "logs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["taskId"],
                "properties": {
                    "taskId": {"type": "string", "minLength": 1},
                    "log": {"type": "string"},
                    "level": {"type": "string"},
                },
            },
        }
    },
}
EARLY_EXIT: dict[str, Any] = {"type": "object", "properties": {"reason": {"type": "string"}}}


def accepts(
    body: type[BaseModel] | dict[str, Any], *, bare: dict[str, Any] | None = None, errors: Iterable[int] = ()
) -> Callable[[F], F]:
    """Declare the body a handler reads itself (det sends JSON without a Content-Type, so FastAPI
    cannot see it): the model it hands to `parse()`, or a JSON schema. `bare` is the schema of a
    bare JSON value det sends in place of the object (a hashed password, a progress number).
    `errors` adds statuses beyond the usual ones (409 conflict, 429 rate limit, 404 of a lookup)."""

    def mark(fn: F) -> F:
        setattr(fn, _BODY, (body, bare))
        setattr(fn, _ERRORS, tuple(errors))
        return fn

    return mark


def produces(media_type: str, *, errors: Iterable[int] = ()) -> Callable[[F], F]:
    """Declare that a handler streams `media_type` (NDJSON logs, a tar) instead of a JSON object."""

    def mark(fn: F) -> F:
        setattr(fn, _MEDIA, media_type)
        setattr(fn, _ERRORS, tuple(errors))
        return fn

    return mark


def agent_token_too(fn: F) -> F:
    """Declare a handler that checks its caller itself: the agent token (X-Pedl-Agent-Token), or else
    a user's or task's bearer token."""
    setattr(fn, _AGENT_TOKEN, True)
    return fn


def answers(*statuses: int) -> Callable[[F], F]:
    """Declare statuses a handler without a body may answer beyond the usual ones (409 of an
    illegal state change, 404 of a lookup that is not in the path)."""

    def mark(fn: F) -> F:
        setattr(fn, _ERRORS, statuses)
        return fn

    return mark


def error_schema() -> dict[str, Any]:
    """The body of every error (pedl.errors.PedlError.to_dict, and the 404/405 of an unknown route)."""
    field = {
        "type": "object",
        "required": ["field", "message"],
        "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
    }
    return {
        "type": "object",
        "required": ["code", "pedlCode", "message", "error"],
        "description": "`code` is the gRPC code det expects, `pedlCode` pedl's stable code.",
        "properties": {
            "code": {"type": "integer"},
            "pedlCode": {"type": "string", "examples": [str(c) for c in ErrorCode]},
            "message": {"type": "string"},
            "error": {
                "type": "object",
                "required": ["code", "reason", "error", "message"],
                "properties": {
                    "code": {"type": "integer"},
                    "reason": {"type": "string"},
                    "error": {"type": "string"},
                    "message": {"type": "string"},
                },
            },
            "fields": {"type": "array", "items": field},
        },
    }


def install(app: FastAPI) -> None:
    """Replace app.openapi() with one that corrects FastAPI's document (built once, then cached)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build(app)
        return app.openapi_schema

    app.openapi = openapi


def build(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(
        title=app.title,
        version=app.version,
        openapi_version=app.openapi_version,
        description=app.description,
        routes=app.routes,
    )
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas[ERROR_SCHEMA] = error_schema()
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "A user's session token from POST /api/v1/auth/login, or a task's token.",
        },
        "allocationToken": {
            "type": "apiKey",
            "in": "header",
            "name": "Grpc-Metadata-x-allocation-token",
            "description": "A task's token, as `Bearer <token>` (what det's harness sends).",
        },
        "agentToken": {
            "type": "apiKey",
            "in": "header",
            "name": "X-Pedl-Agent-Token",
            "description": "The master's agent token (data_dir/agent_token), as agents present it.",
        },
    }
    for route in routes(app):
        if not route.include_in_schema:
            continue
        for method in route.methods or ():
            op = doc["paths"][route.path_format].get(method.lower())
            if op is not None:
                _correct(op, route, schemas)
    for unused in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422 body: never sent
        schemas.pop(unused, None)
    return doc


def _correct(op: dict[str, Any], route: APIRoute, schemas: dict[str, Any]) -> None:
    fn = route.endpoint
    responses = op.setdefault("responses", {})
    responses.pop("422", None)
    has_path = "{" in route.path_format
    has_query = any(p.get("in") == "query" for p in op.get("parameters", []))
    agent_token = getattr(fn, _AGENT_TOKEN, False)
    authenticated = agent_token or any(_uses(route.dependant, dep) for dep in (deps.caller, deps.agent_fetch_caller))
    body = getattr(fn, _BODY, None)
    if body is not None:
        op["requestBody"] = _request_body(*body, schemas=schemas)
    media = getattr(fn, _MEDIA, None)
    if media is not None:
        responses["200"]["content"] = {media: {"schema": {"type": "string", "format": "binary"}}}
    for param in op.get("parameters", []):
        values = _PATH_ENUMS.get((route.path_format, param["name"])) or _ENUMS.get(param["name"])
        if values:
            _restrict(param["schema"], values)
        if param.get("in") == "path" and param["schema"].get("type") == "integer":
            param.setdefault("example", 1)  # ids start at 1: the first experiment, trial or user
    statuses: set[int] = set(getattr(fn, _ERRORS, ()))
    if has_path or has_query or body is not None:
        statuses.add(400)
    if authenticated:
        statuses |= {401, 403}
        op["security"] = copy.deepcopy(SECURITY) + ([{"agentToken": []}] if agent_token else [])
    if has_path:
        statuses.add(404)
    if _conditional(route.dependant):
        responses["304"] = {
            "description": "Not Modified: nothing the view shows changed since the ETag sent in If-None-Match"
        }
    if body is not None or _uses(route.dependant, deps.json_body):
        statuses |= {400, 413}  # a malformed or oversized body, whether or not the handler reads it
    for status in sorted(statuses):
        responses[str(status)] = _error_response(status)


def _restrict(schema: dict[str, Any], values: list[str]) -> None:
    if schema.get("type") == "array":
        schema["items"] = {"type": "string", "enum": values}
    elif "anyOf" in schema:  # `str | None`
        for alt in schema["anyOf"]:
            if alt.get("type") == "string":
                alt["enum"] = values
    else:
        schema["enum"] = values


def _uses(dependant: Dependant, call: Callable[..., Any]) -> bool:
    return dependant.call is call or any(_uses(d, call) for d in dependant.dependencies)


def _conditional(dependant: Dependant) -> bool:
    return getattr(dependant.call, CONDITIONAL_MARK, False) or any(_conditional(d) for d in dependant.dependencies)


def _request_body(
    body: type[BaseModel] | dict[str, Any], bare: dict[str, Any] | None, *, schemas: dict[str, Any]
) -> dict[str, Any]:
    if isinstance(body, dict):
        schema, required = copy.deepcopy(body), bool(body.get("required"))
    else:
        schema = {"$ref": f"#/components/schemas/{_register(body, schemas)}"}
        required = any(f.is_required() for f in body.model_fields.values())
    if bare is not None:
        schema = {"oneOf": [schema, bare]}
        required = True
    # det omits the body of a request whose fields are all optional; the handler reads that as {}
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _register(model: type[BaseModel], schemas: dict[str, Any]) -> str:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, sub in {**schema.pop("$defs", {}), model.__name__: schema}.items():
        if schemas.setdefault(name, sub) != sub:
            raise RuntimeError(f"two request models are named {name}: rename one")
    return model.__name__


def _error_response(status: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": _DESCRIPTIONS.get(status, HTTPStatus(status).phrase),
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}}},
    }
    if status == 429:
        out["headers"] = {
            "Retry-After": {
                "description": "Seconds to wait before trying again.",
                "schema": {"type": "integer", "minimum": 1},
            }
        }
    return out


_DESCRIPTIONS = {
    400: "Invalid request: the body or a parameter is malformed or out of range; `fields` names each.",
    401: "No token, a malformed Authorization header, or a token that expired or was revoked.",
    403: "The caller may not do this (not the owner or an admin, or the wrong task token).",
    404: "No such resource.",
    409: "Conflicts with the current state: the resource already exists, or cannot change state that way.",
    413: "The request body is larger than the master accepts.",
    429: "Too many attempts; try again after `Retry-After` seconds.",
}

"""Experiments: create, list, get, kill / pause / activate, their trials, checkpoints and events."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field
from sqlalchemy import func, select

from pedl.master.api import shapes
from pedl.master.api.deps import (
    INT64_MAX,
    Body,
    Caller,
    IdPath,
    caller,
    ctx_of,
    json_body,
    pagination,
    parse,
)
from pedl.master.api.openapi import accepts, answers
from pedl.master.db import models
from pedl.master.services import checkpoints as checkpoints_service
from pedl.master.services import experiments as experiments_service
from pedl.master.services.authz import require_user

INT32_MAX = 2**31 - 1

router = APIRouter(prefix="/api/v1/experiments")


class CreateExperimentBody(Body):
    config: str
    modelDefinition: list[Any] | None = None
    activate: bool | None = True
    validateOnly: bool | None = False
    parentId: int | None = Field(None, ge=0, le=INT32_MAX)  # integer columns on both databases
    projectId: int | None = Field(None, ge=0, le=INT32_MAX)
    template: str | None = None


def _username(s, user_id: int) -> str:
    u = s.get(models.User, user_id)
    return u.username if u else ""


def _exp_json(s, exp: models.Experiment, counts: dict[int, int] | None = None) -> dict:
    n = (counts or experiments_service.trial_counts(s, [exp.id])).get(exp.id, 0)
    return shapes.experiment(exp, _username(s, exp.owner_id), n)


@router.post("")
@accepts(CreateExperimentBody)
def create(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(CreateExperimentBody, body)
    owner = require_user(who, "create experiments")
    ctl = ctx_of(request).controller

    def work(s) -> dict:
        result = experiments_service.create(ctl, s, owner, config_text=req.config, files=req.modelDefinition,
                                            activate=req.activate is not False, validate_only=bool(req.validateOnly),
                                            parent_id=req.parentId, project_id=req.projectId)
        if isinstance(result, dict):  # validate only
            return {"experiment": None, "config": result}
        return {"experiment": _exp_json(s, result), "config": result.config}

    out = ctl.run(work)
    ctl.wake()
    return out


@router.get("")
def list_experiments(request: Request, _: Caller = Depends(caller), offset: int = Query(0, ge=0, le=INT64_MAX),
                     limit: int = Query(0, ge=0, le=INT64_MAX), archived: bool | None = None,
                     users: list[str] = Query(default_factory=list), states: list[str] = Query(default_factory=list),
                     orderBy: str | None = None) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        rows, total = experiments_service.list_page(s, offset=offset, limit=limit, archived=archived,
                                                    usernames=users, states=states,
                                                    newest_first=orderBy == "ORDER_BY_DESC")
        counts = experiments_service.trial_counts(s, [e.id for e in rows])
        return {"experiments": [_exp_json(s, e, counts) for e in rows],
                "pagination": pagination(offset, limit, total, len(rows))}


@router.get("/{experiment_id}")
def get_experiment(experiment_id: IdPath, request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        exp = experiments_service.get(s, experiment_id)
        return {"experiment": _exp_json(s, exp), "config": exp.config,
                "jobSummary": {"jobsAhead": 0, "state": "STATE_SCHEDULED"}}


@router.post("/{experiment_id}/{action}")
@answers(409)
def act(experiment_id: IdPath, action: str, request: Request, who: Caller = Depends(caller),
        _body: Any = Depends(json_body)) -> dict:  # det sends no body; a malformed one is a 400
    from pedl.errors import NotFound

    if action not in ("kill", "pause", "activate", "cancel"):
        raise NotFound(f"unknown experiment action {action!r}")
    experiments_service.act(ctx_of(request).controller, who, experiment_id, "kill" if action == "cancel" else action)
    return {}


@router.get("/{experiment_id}/trials")
def trials(experiment_id: IdPath, request: Request, _: Caller = Depends(caller), offset: int = Query(0, ge=0, le=INT64_MAX),
           limit: int = Query(0, ge=0, le=INT64_MAX)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        experiments_service.get(s, experiment_id)
        q = select(models.Trial).where(models.Trial.experiment_id == experiment_id)
        total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
        rows = list(s.scalars(q.order_by(models.Trial.id).offset(offset).limit(limit or None)))
        return {"trials": [shapes.trial(t) for t in rows], "pagination": pagination(offset, limit, total, len(rows))}


@router.get("/{experiment_id}/checkpoints")
def checkpoints(experiment_id: IdPath, request: Request, _: Caller = Depends(caller), limit: int = Query(0, ge=0, le=INT64_MAX),
                sortByAttr: str | None = None, orderBy: str | None = None) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        exp = experiments_service.get(s, experiment_id)
        rows = checkpoints_service.for_experiment(s, experiment_id)
        trials_by_id = {t.id: t for t in s.scalars(select(models.Trial).where(models.Trial.experiment_id == exp.id))}
        out = [shapes.checkpoint(c, exp, trials_by_id.get(c.trial_id),
                                 checkpoints_service.validation_metrics_at(s, c.trial_id, c.steps_completed)
                                 if c.trial_id else None) for c in rows]
        if sortByAttr == "SORT_BY_SEARCHER_METRIC":
            smaller = exp.config.get("searcher", {}).get("smaller_is_better", True)
            with_metric = [c for c in out if "searcherMetric" in c["training"]]
            with_metric.sort(key=lambda c: c["training"]["searcherMetric"], reverse=not smaller)
            out = with_metric + [c for c in out if "searcherMetric" not in c["training"]]
        elif orderBy == "ORDER_BY_DESC":
            out.reverse()
        if limit:
            out = out[:limit]
        return {"checkpoints": out, "pagination": pagination(0, limit, len(out), len(out))}


@router.get("/{experiment_id}/events")
def events(experiment_id: IdPath, request: Request, _: Caller = Depends(caller), after: int = Query(0, ge=0, le=INT64_MAX)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        exp = experiments_service.get(s, experiment_id)
        return {"events": [shapes.event(e) for e in experiments_service.events(s, exp, after)]}


@router.get("/{experiment_id}/searcher/best_searcher_validation_metric")
def best_metric(experiment_id: IdPath, request: Request, _: Caller = Depends(caller)) -> dict:
    from pedl.errors import NotFound

    ctx = ctx_of(request)
    with ctx.db.session() as s:
        exp = experiments_service.get(s, experiment_id)
        smaller = exp.config.get("searcher", {}).get("smaller_is_better", True)
        agg = func.min if smaller else func.max
        value = s.scalar(select(agg(models.Trial.best_metric)).where(models.Trial.experiment_id == exp.id))
        if value is None:
            raise NotFound("no validation metric reported yet")
        return {"metric": value}

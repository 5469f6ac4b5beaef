"""Metric series for the WebUI's charts: a trial's, or every trial's of an experiment, each
series downsampled on the server to at most maxPoints points, its buckets' minima and maxima kept so
spikes stay visible (metrics/series.py, metrics/downsample.py). Pages poll them: an
unchanged view answers 304."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request, Response

from pedl.master.api.conditional import unless_changed
from pedl.master.api.deps import Caller, IdPath, ctx_of
from pedl.master.api.json_body import json_body
from pedl.master.metrics import DEFAULT_POINTS, MAX_POINTS, MIN_POINTS
from pedl.master.metrics import series as metric_series

router = APIRouter(prefix="/api/v1")

GROUP = Query(min_length=1, max_length=64, description="the metric group: training, validation or another")
NAMES = Query(
    default_factory=list,
    description="metric names (repeat the parameter); none: every numeric name "
    f"seen, at most {metric_series.MAX_NAMES}",
)
MAX_POINTS_QUERY = Query(DEFAULT_POINTS, ge=MIN_POINTS, le=MAX_POINTS, description="the most points per series")


def _shape(answer: metric_series.Answer) -> dict:
    return {
        "group": answer.group,
        "maxPoints": answer.max_points,
        "names": answer.names,
        "series": [
            {
                "trialId": s.trial_id,
                "name": s.name,
                "steps": s.steps,
                "values": s.values,
                "total": s.total,
                "downsampled": s.downsampled,
            }
            for s in answer.series
        ],
    }


@router.get("/trials/{trial_id}/metric-series", response_model=dict)
def trial_metric_series(
    trial_id: IdPath,
    request: Request,
    response: Response,
    group: str = GROUP,
    names: list[str] = NAMES,
    maxPoints: int = MAX_POINTS_QUERY,
    _: Caller = Depends(unless_changed("metrics", "trials")),
) -> Response:
    answer = metric_series.for_trial(ctx_of(request), trial_id, group=group, names=names, max_points=maxPoints)
    return json_body(request, _shape(answer), response.headers)


@router.get("/experiments/{experiment_id}/metric-series", response_model=dict)
def experiment_metric_series(
    experiment_id: IdPath,
    request: Request,
    response: Response,
    group: str = GROUP,
    names: list[str] = NAMES,
    maxPoints: int = MAX_POINTS_QUERY,
    _: Caller = Depends(unless_changed("metrics", "trials", "experiments")),
) -> Response:
    """Every trial's series, of the experiment's first MAX_TRIALS trials by id: trialCount says how
    many it has, truncated whether some were left out."""
    answer = metric_series.for_experiment(
        ctx_of(request), experiment_id, group=group, names=names, max_points=maxPoints
    )
    return json_body(
        request, {**_shape(answer), "trialCount": answer.trial_count, "truncated": answer.truncated}, response.headers
    )

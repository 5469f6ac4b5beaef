"""Determined's CompareTrials (GET /api/v1/trials/time-series): for each trial asked, its metric
series by group, each downsampled (metric_series.read_series) and merged into points of a step with
every asked name's value there and the report's time."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from pedl.errors import InvalidArgument, NotFound
from pedl.master.db import models
from pedl.master.metrics import series as metric_series
from pedl.master.trials import to_wire
from pedl.master.wire.base import ts
from pedl.master.wire.trial import ComparableTrial, DataPoint, DownsampledMetrics, MetricType

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_TRIALS = 100
MAX_METRIC_IDS = metric_series.MAX_NAMES


@dataclass(frozen=True)
class GroupPoints:
    group: str
    points: list[tuple[int, float, dict[str, Any]]]  # (step, report time, {name: value})


def parse_metric_ids(metric_ids: list[str]) -> dict[str, list[str]]:
    """ "group.name" ids -> {group: [names]}, in the order given; the name may itself hold dots."""
    if len(metric_ids) > MAX_METRIC_IDS:
        raise InvalidArgument.at("metricIds", f"at most {MAX_METRIC_IDS}")
    groups: dict[str, list[str]] = {}
    for metric_id in dict.fromkeys(metric_ids):
        group, dot, name = metric_id.partition(".")
        if not dot or not group or not name:
            raise InvalidArgument.at("metricIds", f"{metric_id[:80]!r} is not of the form group.metric_name")
        groups.setdefault(group, []).append(name)
    for names in groups.values():
        metric_series.check_names(names)
    return groups


def compare(
    ctx: MasterContext,
    trial_ids: list[int],
    groups: dict[str, list[str]],
    *,
    max_points: int,
    start_batches: int | None = None,
    end_batches: int | None = None,
) -> list[ComparableTrial]:
    """Each trial asked (in the order asked, once) with the series of each group's names."""
    if not trial_ids:
        raise InvalidArgument.at("trialIds", "at least one trial id")
    if len(trial_ids) > MAX_TRIALS:
        raise InvalidArgument.at("trialIds", f"at most {MAX_TRIALS} trials")
    trial_ids = list(dict.fromkeys(trial_ids))
    out: list[ComparableTrial] = []
    with ctx.db.read_session() as s:
        trials = {t.id: t for t in s.scalars(select(models.Trial).where(models.Trial.id.in_(trial_ids)))}
        missing = [t for t in trial_ids if t not in trials]
        if missing:
            raise NotFound(f"trial {missing[0]} not found")
        for trial_id in trial_ids:
            per_group = []
            for group, names in groups.items():
                merged: dict[int, dict[str, Any]] = defaultdict(dict)
                for series in metric_series.read_series(s, [trial_id], group, names, max_points):
                    for step, value in zip(series.steps, series.values, strict=True):
                        if (start_batches is None or step >= start_batches) and (
                            end_batches is None or step <= end_batches
                        ):
                            merged[step][series.name] = value
                times = _report_times(s, trial_id, group, sorted(merged))
                per_group.append(
                    GroupPoints(group, [(step, times.get(step, 0.0), merged[step]) for step in sorted(merged)])
                )
            out.append(
                ComparableTrial(trial=to_wire.trial(trials[trial_id]), metrics=[_downsampled(g) for g in per_group])
            )
    return out


METRIC_TYPES: dict[str, MetricType] = {
    "training": "METRIC_TYPE_TRAINING",
    "validation": "METRIC_TYPE_VALIDATION",
    "profiling": "METRIC_TYPE_PROFILING",
}


def _downsampled(g: GroupPoints) -> DownsampledMetrics:
    return DownsampledMetrics(
        group=g.group,
        type=METRIC_TYPES.get(g.group, "METRIC_TYPE_UNSPECIFIED"),
        data=[DataPoint(batches=step, time=ts(when), values=values, epoch=None) for step, when, values in g.points],
    )


def _report_times(s: Any, trial_id: int, group: str, steps: list[int]) -> dict[int, float]:
    M = models.Metric
    times: dict[int, float] = {}
    for i in range(0, len(steps), 1000):
        chunk = steps[i : i + 1000]
        for step, when in s.execute(
            select(M.steps_completed, M.report_time).where(
                M.trial_id == trial_id, M.group == group, M.steps_completed.in_(chunk)
            )
        ):
            times[step] = when
    return times

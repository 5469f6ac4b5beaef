"""Training and validation metrics reported by trials."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.db import models
from pedl.master.metrics import digests as metric_digests
from pedl.master.metrics import summaries as metric_summaries

GROUPS = ("training", "validation")
# levels of lists and objects a metric value may nest: what every store of it can encode (orjson stops at
# 254 levels, the stdlib's encoder of the JSON columns at the interpreter's recursion limit), with room
MAX_VALUE_DEPTH = 64


def _num(v: Any) -> Any:
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    return v


def clean_metrics(raw: Any, field: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InvalidArgument(
            f"{field}: must be an object of metric names to values",
            fields=[{"field": field, "message": "must be an object"}],
        )
    for name, value in raw.items():
        if isinstance(value, list | dict) and _nested_past(value, MAX_VALUE_DEPTH):
            where = f"{field}.{name}"
            raise InvalidArgument(
                f"{where}: nested more than {MAX_VALUE_DEPTH} levels deep",
                fields=[{"field": where, "message": f"nested more than {MAX_VALUE_DEPTH} levels"}],
            )
    return {str(k): _num(v) for k, v in raw.items()}


def _nested_past(value: Any, limit: int) -> bool:
    """Whether lists and objects nest in `value` more than `limit` levels (a list of numbers is one)."""
    level = [value]
    for _ in range(limit):
        level = [
            item for v in level for item in (v.values() if isinstance(v, dict) else v) if isinstance(item, list | dict)
        ]
        if not level:
            return False
    return True


def json_safe(metrics: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in metrics.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        out[k] = v
    return out


def record(
    s: Session,
    trial: models.Trial,
    *,
    group: str,
    steps_completed: int,
    trial_run_id: int,
    report_time: float,
    metrics: dict[str, Any],
) -> models.Metric:
    """Store one report. A report for steps already reported (a restarted trial replaying steps after
    its checkpoint, or a retried POST) replaces the old one, so nothing is counted twice."""
    before = metric_digests.reached_step(trial.summary_metrics, group)
    reached = metric_digests.note_report(s, trial, group, steps_completed)
    s.execute(
        delete(models.Metric).where(
            models.Metric.trial_id == trial.id,
            models.Metric.group == group,
            models.Metric.steps_completed == steps_completed,
        )
    )
    row = models.Metric(
        trial_id=trial.id,
        trial_run_id=trial_run_id,
        group=group,
        steps_completed=steps_completed,
        report_time=report_time,
        metrics=json_safe(metrics),
    )
    s.add(row)
    if steps_completed > trial.total_batches:
        trial.total_batches = steps_completed
    summary = dict(trial.summary_metrics or {})
    summary[f"latest_{group}"] = {
        "steps_completed": steps_completed,
        "metrics": json_safe(metrics),
        "max_steps_completed": reached,
    }
    key = metric_summaries.key(group)
    if before is not None and (steps_completed <= before or key not in summary):
        s.flush()  # a replaced step, or reports from before the aggregates were kept: from the rows
        summary[key] = metric_summaries.rebuild(s, trial.id, group)
    else:
        summary[key] = metric_summaries.fold(summary.get(key), row.metrics)
    trial.summary_metrics = summary
    return row


def update_best(
    trial: models.Trial, metric_name: str, smaller_is_better: bool, metrics: dict[str, Any]
) -> float | None:
    value = metrics.get(metric_name)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    if trial.best_metric is None or (value < trial.best_metric if smaller_is_better else value > trial.best_metric):
        trial.best_metric = float(value)
    return float(value)


def list_metrics(s: Session, trial_id: int, group: str | None = None) -> list[models.Metric]:
    q = select(models.Metric).where(models.Metric.trial_id == trial_id)
    if group:
        q = q.where(models.Metric.group == group)
    return list(s.scalars(q.order_by(models.Metric.steps_completed, models.Metric.id)))

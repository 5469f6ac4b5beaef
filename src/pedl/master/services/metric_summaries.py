"""A trial's per-metric aggregates as Determined keeps them in summaryMetrics: under `avg_metrics`
(training), `validation_metrics` and each custom group's own name, {metric: {count, sum, min, max,
mean, last, type}}. Folded in as each report is stored (pure `fold`); a report that replaces a step
already reported (a restarted trial replaying steps, a retried POST) rebuilds its group from its rows."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.master.db import models

Aggregates = dict[str, dict[str, Any]]


def key(group: str) -> str:
    """The summaryMetrics key of a group's aggregates, as Determined names them."""
    return {"training": "avg_metrics", "validation": "validation_metrics"}.get(group, group)


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):  # stored JSON-safe
        return float(value.replace("Infinity", "inf"))
    return None


def _type(value: Any) -> str:
    """The type of a value that is not a number (those take the arithmetic path)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "object"


def _json(value: float | int) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def fold(aggregates: Aggregates | None, metrics: dict[str, Any]) -> Aggregates:
    """`aggregates` with one more report in it (a new dict; the old one is left as it was)."""
    out = dict(aggregates or {})
    for name, value in metrics.items():
        old = out.get(name)
        num = _number(value)
        if num is None:  # strings, booleans, null: counted, the last kept, no arithmetic
            out[name] = {"count": (old or {}).get("count", 0) + 1, "last": value, "type": _type(value)}
            continue
        if old is None or old.get("type") != "number":
            agg = {"count": 1, "sum": num, "min": num, "max": num}
        else:
            prev = {k: _number(old[k]) for k in ("sum", "min", "max")}
            agg = {"count": old["count"] + 1, "sum": prev["sum"] + num,
                   "min": num if num < prev["min"] or math.isnan(num) else prev["min"],
                   "max": num if num > prev["max"] or math.isnan(num) else prev["max"]}
        agg["mean"] = agg["sum"] / agg["count"]
        out[name] = {**{k: _json(v) for k, v in agg.items()}, "last": _json(num), "type": "number"}
    return out


def fold_all(reports: Iterable[dict[str, Any]], aggregates: Aggregates | None = None) -> Aggregates:
    aggregates = dict(aggregates or {})
    for metrics in reports:
        aggregates = fold(aggregates, metrics)
    return aggregates


def rebuild(s: Session, trial_id: int, group: str) -> Aggregates:
    """The group's aggregates from its stored reports, in step order (after a replaced step)."""
    M = models.Metric
    return fold_all(s.scalars(select(M.metrics).where(M.trial_id == trial_id, M.group == group)
                              .order_by(M.steps_completed, M.id)))

"""A trial's per-metric aggregates as Determined keeps them in summaryMetrics: under `avg_metrics`
(training), `validation_metrics` and each custom group's own name, {metric: {count, sum, min, max,
mean, last, type}}. Folded in as each report is stored (pure `fold`); a report that replaces a step
already reported (a restarted trial replaying steps, a retried POST) rebuilds its group from its rows."""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import reduce
from operator import add
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
    """`aggregates` with `reports` folded in, in order: what `fold` gives report by report (property tests
    hold them equal), but a numeric metric's aggregates are kept as plain numbers while the reports
    fold and put in their JSON form once (a batch of a thousand reports: `fold`'s dicts per report and
    metric were most of the master's CPU while it stored them). A batch whose reports all have the same
    metrics, all finite numbers (the common one), folds a metric at a time."""
    reports = reports if isinstance(reports, list) else list(reports)
    uniform = _fold_uniform(reports, aggregates)
    return uniform if uniform is not None else _fold_general(reports, aggregates)


def _fold_uniform(reports: list[dict[str, Any]], aggregates: Aggregates | None) -> Aggregates | None:
    """`fold_all` for reports of the same names with finite numbers only; None for any other."""
    if not reports or type(reports[0]) is not dict:
        return None
    names = reports[0].keys()
    if not all(type(m) is dict and m.keys() == names for m in reports):
        return None
    out = dict(aggregates or {})
    for name in names:
        values = [m[name] for m in reports]
        if not all(type(v) is float or type(v) is int for v in values):
            return None
        old = out.get(name)
        if old is None or old.get("type") != "number":
            count, total, low, high = len(values), reduce(add, values), min(values), max(values)
        else:  # (min and max keep the first of equals, as `fold`'s strict comparisons do; a NaN held stays)
            count, total = old["count"] + len(values), reduce(add, values, _number(old["sum"]))
            low, high = _number(old["min"]), _number(old["max"])
            low = low if low != low else min(low, min(values))
            high = high if high != high else max(high, max(values))
        if not math.isfinite(total):  # a non-finite value among them (or an overflow): the general fold
            return None
        out[name] = {"count": count, "sum": total, "min": _json(low), "max": _json(high), "mean": total / count,
                     "last": values[-1], "type": "number"}
    return out


def _fold_general(reports: list[dict[str, Any]], aggregates: Aggregates | None) -> Aggregates:
    out = dict(aggregates or {})
    running: dict[str, list[Any]] = {}  # a numeric metric's [count, sum, min, max, last] as this batch folds it
    for metrics in reports:
        for name, value in metrics.items():
            num = value if type(value) is float or type(value) is int else _number(value)
            r = running.get(name)
            if r is not None and num is not None:
                r[0] += 1
                r[1] += num
                if num < r[2] or num != num:  # (num != num: NaN, which min and max keep, as `fold` does)
                    r[2] = num
                if num > r[3] or num != num:
                    r[3] = num
                r[4] = num
                continue
            if r is not None:  # a value that is no number, after numbers
                out[name] = _finished(running.pop(name))
            old = out.get(name)
            if num is None:
                out[name] = fold({name: old} if old is not None else None, {name: value})[name]
            elif old is None or old.get("type") != "number":
                running[name] = [1, num, num, num, num]
                out[name] = None  # its place among the metrics, as `fold` gives it; filled in below
            else:
                low, high = _number(old["min"]), _number(old["max"])
                running[name] = [old["count"] + 1, _number(old["sum"]) + num, num if num < low or num != num else low,
                                 num if num > high or num != num else high, num]
    for name, r in running.items():
        out[name] = _finished(r)
    return out


def _finished(r: list[Any]) -> dict[str, Any]:
    count, total, low, high, last = r
    return {"count": count, "sum": _json(total), "min": _json(low), "max": _json(high), "mean": _json(total / count),
            "last": _json(last), "type": "number"}


def rebuild(s: Session, trial_id: int, group: str) -> Aggregates:
    """The group's aggregates from its stored reports, in step order (after a replaced step)."""
    M = models.Metric
    return fold_all(s.scalars(select(M.metrics).where(M.trial_id == trial_id, M.group == group)
                              .order_by(M.steps_completed, M.id)))

"""A trial's per-metric aggregates as Determined keeps them in summaryMetrics: under `avg_metrics`
(training), `validation_metrics` and each custom group's own name, {metric: {count, sum, min, max,
mean, last, type}}. Folded in as each report is stored (pure `fold`); a report that replaces a step
already reported (a restarted trial replaying steps, a retried POST) rebuilds its group from its rows. The
names they hold bound how many distinct names a trial may report (`check_names`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import reduce
from operator import add
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.db import models
from pedl.master.metrics.columns import Columns, columns, numbers_only

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


def _held_number(value: Any) -> float | int:
    """A number an aggregate of type "number" holds (its sum, min or max, stored by `_json`)."""
    num = _number(value)
    if num is None:
        raise ValueError(f"a number's aggregate holds {value!r}")
    return num


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
            prev = {k: _held_number(old[k]) for k in ("sum", "min", "max")}
            agg = {
                "count": old["count"] + 1,
                "sum": prev["sum"] + num,
                "min": num if num < prev["min"] or math.isnan(num) else prev["min"],
                "max": num if num > prev["max"] or math.isnan(num) else prev["max"],
            }
        agg["mean"] = agg["sum"] / agg["count"]
        out[name] = {**{k: _json(v) for k, v in agg.items()}, "last": _json(num), "type": "number"}
    return out


def fold_all(reports: Iterable[dict[str, Any]], aggregates: Aggregates | None = None) -> Aggregates:
    """`aggregates` with `reports` folded in, in order: what `fold` gives report by report (property tests
    hold them equal). Reports of the same names in the same order (a training loop's batch) fold a metric
    at a time: one of finite numbers only by its count, sum, min and max at once (`fold`'s dicts per report
    and metric were most of a master's CPU while it stored a batch), any other value by value."""
    reports = reports if isinstance(reports, list) else list(reports)
    return fold_columns(reports, columns(reports), aggregates)


def fold_columns(
    reports: list[dict[str, Any]], by_name: Columns | None, aggregates: Aggregates | None = None
) -> Aggregates:
    """`fold_all`, given the reports' columns (`metric_columns.columns(reports)`, None where they have none)."""
    out = dict(aggregates or {})
    if by_name is None:
        for metrics in reports:
            out = fold(out, metrics)
        return out
    for name, values in zip(*by_name, strict=True):
        old = out.get(name)
        out[name] = _fold_numbers(old, values) or _fold_values(old, name, values)
    return out


def _fold_numbers(old: dict[str, Any] | None, values: list[Any]) -> dict[str, Any] | None:
    """A metric's aggregates with `values` in, where all are finite numbers; None otherwise."""
    if not numbers_only(values):
        return None
    if old is None or old.get("type") != "number":
        count, total, low, high = len(values), reduce(add, values), min(values), max(values)
    else:  # (min and max keep the first of equals, as `fold`'s strict comparisons do; a NaN held stays)
        count, total = old["count"] + len(values), reduce(add, values, _held_number(old["sum"]))
        low, high = _held_number(old["min"]), _held_number(old["max"])
        low = low if low != low else min(low, min(values))
        high = high if high != high else max(high, max(values))
    if not math.isfinite(total):  # a non-finite value among them (or an overflow)
        return None
    return {
        "count": count,
        "sum": total,
        "min": _json(low),
        "max": _json(high),
        "mean": total / count,
        "last": values[-1],
        "type": "number",
    }


def _fold_values(old: dict[str, Any] | None, name: str, values: list[Any]) -> dict[str, Any]:
    agg = fold({name: old} if old is not None else None, {name: values[0]})[name]
    for value in values[1:]:
        agg = fold({name: agg}, {name: value})[name]
    return agg


def held_names(summary: dict[str, Any] | None) -> dict[str, Aggregates]:
    """group -> its aggregates (one per name it reported), of each group the summary has."""
    summary = summary or {}
    return {g: summary.get(key(g)) or {} for k in summary if k.startswith("latest_") and (g := k[len("latest_") :])}


def check_names(
    trial_id: int,
    summary: dict[str, Any] | None,
    reports: Sequence[tuple[str, Collection[str]]],
    limit: int,
    field_of: Callable[[int], str],
) -> None:
    """Refuse `reports` ((group, its names) in order) when they would give the trial more than `limit`
    distinct metric names over its groups (limits.max_metric_names_per_trial), naming the field of the first
    report past it (`field_of(its index)`). The names held are the summary's aggregates, so the check costs
    a lookup per name reported, whatever the trial has stored."""
    held = held_names(summary)
    count = sum(map(len, held.values()))
    new: dict[str, set[str]] = {}
    for i, (group, names) in enumerate(reports):
        have = held.get(group, {})
        fresh = new.setdefault(group, set())
        before = len(fresh)
        fresh.update(n for n in names if n not in have)
        count += len(fresh) - before
        if count > limit:
            where = field_of(i)
            message = (
                f"{count} distinct metric names, more than the limit of {limit} per trial "
                f"(limits.max_metric_names_per_trial): trial {trial_id} has "
                f"{sum(map(len, held.values()))} over its groups"
            )
            raise InvalidArgument(f"{where}: {message}", fields=[{"field": where, "message": message}])


def rebuild(s: Session, trial_id: int, group: str) -> Aggregates:
    """The group's aggregates from its stored reports, in step order (after a replaced step)."""
    M = models.Metric
    return fold_all(
        s.scalars(select(M.metrics).where(M.trial_id == trial_id, M.group == group).order_by(M.steps_completed, M.id))
    )

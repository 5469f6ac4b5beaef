"""A project's experiment table, as Determined's WebUI asks for it: its columns (the general ones, a
column per hyperparameter `hp.<path>` and per metric `<group>.<name>.<min|max|last|mean>`) and the
range of each numeric metric. Read from the newest MAX_EXPERIMENTS experiments and their trials'
summaries (never the metric reports), newest trial first and a few at a time, and held to
limits.max_listing_bytes (past it the answer is cut and says so), so the work and the answer are bounded
whatever the project holds."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from pedl.master.db import models
from pedl.master.workspaces.projects import get

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_EXPERIMENTS = 1000
MAX_TRIALS = 5000
TEXT, NUMBER, DATE, ARRAY, UNSPECIFIED = (
    "COLUMN_TYPE_TEXT",
    "COLUMN_TYPE_NUMBER",
    "COLUMN_TYPE_DATE",
    "COLUMN_TYPE_ARRAY",
    "COLUMN_TYPE_UNSPECIFIED",
)
EXPERIMENT, HYPERPARAMETERS, VALIDATIONS, TRAINING, CUSTOM = (
    "LOCATION_TYPE_EXPERIMENT",
    "LOCATION_TYPE_HYPERPARAMETERS",
    "LOCATION_TYPE_VALIDATIONS",
    "LOCATION_TYPE_TRAINING",
    "LOCATION_TYPE_CUSTOM_METRIC",
)
GENERAL = (
    ("id", "ID", NUMBER),
    ("name", "Name", TEXT),
    ("description", "Description", TEXT),
    ("tags", "Tags", ARRAY),
    ("forkedFrom", "Forked", NUMBER),
    ("startTime", "Start time", DATE),
    ("endTime", "End time", DATE),
    ("duration", "Duration", NUMBER),
    ("state", "State", TEXT),
    ("searcherType", "Searcher", TEXT),
    ("resourcePool", "Resource pool", TEXT),
    ("progress", "Progress", NUMBER),
    ("archived", "Archived", UNSPECIFIED),
    ("numTrials", "Trials", NUMBER),
    ("user", "User", TEXT),
    ("projectId", "Project ID", NUMBER),
    ("checkpointCount", "Checkpoints", NUMBER),
    ("searcherMetric", "Searcher metric", TEXT),
    ("searcherMetricsVal", "Searcher metric value", NUMBER),
)
AGGREGATES = ("min", "max", "last", "mean")
_AGGREGATE_KEYS = {"validation": "validation_metrics", "training": "avg_metrics"}


@dataclass(frozen=True)
class Column:
    column: str
    location: str
    type: str
    display_name: str = ""


def _hp_leaves(hps: Any, prefix: str = "") -> dict[str, str]:
    """hp.<path> -> column type, for each hyperparameter of a config (an empty group has no leaf)."""
    out: dict[str, str] = {}
    if not isinstance(hps, dict):
        return out
    for name, spec in hps.items():
        path = f"{prefix}{name}"
        if isinstance(spec, dict) and "type" in spec and not isinstance(spec["type"], dict):
            out[f"hp.{path}"] = _hp_type(spec)
        elif isinstance(spec, dict):
            out.update(_hp_leaves(spec, f"{path}."))
        else:
            out[f"hp.{path}"] = NUMBER if _number(spec) else TEXT
    return out


def _hp_type(spec: dict[str, Any]) -> str:
    kind = spec.get("type")
    if kind in ("int", "double", "log"):
        return NUMBER
    values = [spec.get("val")] if kind == "const" else spec.get("vals") or []
    if values and all(_number(v) for v in values):
        return NUMBER
    return TEXT if values and all(isinstance(v, str) for v in values) else UNSPECIFIED


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _group_location(group: str) -> str:
    return {"validation": VALIDATIONS, "training": TRAINING}.get(group, CUSTOM)


def _trial_metrics(summary: dict[str, Any]) -> dict[tuple[str, str], tuple[float, float]]:
    """(group, name) -> (min, max) of one trial's numeric metrics: its aggregates where the summary has
    them, else its latest report's values."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for key, value in (summary or {}).items():
        if key.startswith("latest_") and isinstance(value, dict):
            group = key.removeprefix("latest_")
            for name, v in (value.get("metrics") or {}).items():
                if _number(v):
                    out[(group, name)] = (float(v), float(v))
    for group, key in _AGGREGATE_KEYS.items():
        for name, agg in ((summary or {}).get(key) or {}).items():
            if isinstance(agg, dict) and _number(agg.get("min")) and _number(agg.get("max")):
                out[(group, name)] = (float(agg["min"]), float(agg["max"]))
    return out


def _experiments(s: Any, project_id: int) -> list[models.Experiment]:
    E = models.Experiment
    return list(s.scalars(select(E).where(E.project_id == project_id).order_by(E.id.desc()).limit(MAX_EXPERIMENTS)))


def _summaries(s: Any, experiment_ids: list[int]) -> Iterator[dict[str, Any]]:
    """The trials' summaries, newest trial first, read a few at a time (never all held at once)."""
    T = models.Trial
    yield from s.scalars(
        select(T.summary_metrics)
        .where(T.experiment_id.in_(experiment_ids))
        .order_by(T.id.desc())
        .limit(MAX_TRIALS)
        .execution_options(yield_per=50)
    )


# what a column or a range adds to its answer's JSON besides its names (the keys, quotes and a number or two)
COLUMN_BYTES, RANGE_BYTES = 96, 96


@dataclass(frozen=True)
class Listing:
    """A listing bounded in bytes (limits.max_listing_bytes): `truncated` when some entries were left out."""

    items: list[Any]
    truncated: bool = False


def _metrics(
    s: Any, exps: list[models.Experiment], budget: int, size: Callable[[str, str], int]
) -> tuple[dict[tuple[str, str], tuple[float, float]], bool]:
    """(group, name) -> (min, max) over the trials' summaries; metrics are taken newest trial first while
    their entries' `size` fits in `budget` bytes, and those taken range over every trial read; -> the ranges
    and whether some metrics were left out."""
    ranges: dict[tuple[str, str], tuple[float, float]] = {}
    used, truncated = 0, False
    for summary in _summaries(s, [e.id for e in exps]):
        for key, (lo, hi) in _trial_metrics(summary).items():
            old = ranges.get(key)
            if old is not None:
                ranges[key] = (min(old[0], lo), max(old[1], hi))
            elif used + size(*key) <= budget:
                used += size(*key)
                ranges[key] = (lo, hi)
            else:
                truncated = True
    return ranges, truncated


def columns(ctx: MasterContext, project_id: int) -> Listing:
    """The project's columns: the general ones, its hyperparameters', and its metrics' (newest trials
    first) within limits.max_listing_bytes; `truncated` when metric columns were left out."""
    budget = ctx.config.limits.max_listing_bytes
    with ctx.db.read_session() as s:
        get(s, project_id)
        exps = _experiments(s, project_id)
        hps: dict[str, str] = {}
        for exp in exps:
            for column, kind in _hp_leaves((exp.config or {}).get("hyperparameters")).items():
                hps.setdefault(column, kind)
        out = [Column(c, EXPERIMENT, kind, name) for c, name, kind in GENERAL]
        out += [Column(c, HYPERPARAMETERS, kind) for c, kind in sorted(hps.items())]
        budget -= sum(COLUMN_BYTES + len(c.column) + len(c.display_name) for c in out)
        found, truncated = _metrics(
            s,
            exps,
            budget,
            lambda group, name: len(AGGREGATES) * (COLUMN_BYTES + len(group) + len(name) + len(".max.")),
        )
    out += [
        Column(f"{group}.{name}.{agg}", _group_location(group), NUMBER)
        for group, name in sorted(found)
        for agg in AGGREGATES
    ]
    return Listing(out, truncated)


def metric_ranges(ctx: MasterContext, project_id: int) -> Listing:
    """(<group>.<name>, min, max) for each numeric metric of the project's trials (newest trials first,
    within limits.max_listing_bytes; `truncated` when some were left out)."""
    with ctx.db.read_session() as s:
        get(s, project_id)
        found, truncated = _metrics(
            s,
            _experiments(s, project_id),
            ctx.config.limits.max_listing_bytes,
            lambda group, name: RANGE_BYTES + len(group) + len(name),
        )
    return Listing([(f"{group}.{name}", lo, hi) for (group, name), (lo, hi) in sorted(found.items())], truncated)

"""The database reads behind the metric streams (streams.py decides what of it is new): one
bounded read per message, and whether the experiments had ended before it began."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Text, case, cast, func, or_, select
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.experiments import service as experiments_service
from pedl.master.lifecycle.states import TERMINAL_EXPERIMENT
from pedl.master.metrics import series as metric_series
from pedl.master.metrics.downsample import MIN_POINTS
from pedl.master.metrics.streams import (
    REREAD_SECONDS,
    BatchesSent,
    NamesSent,
    Point,
    SampleSent,
    SnapshotRow,
    SnapshotSent,
    Window,
    sample_by_length,
    thin,
)
from pedl.master.metrics.summaries import key as summary_key

if TYPE_CHECKING:
    from pedl.clock import Clock
    from pedl.master.context import MasterContext

MAX_ROWS = 10_000  # batches or snapshot rows one read returns


@dataclass(frozen=True)
class Searcher:
    name: str
    metric: str
    smaller_is_better: bool


def searcher_of(exp: models.Experiment) -> Searcher:
    cfg = exp.config.get("searcher") or {}
    return Searcher(str(cfg.get("name", "")), str(cfg.get("metric", "")), bool(cfg.get("smaller_is_better", True)))


def _ended(s: Session, ids: Sequence[int]) -> bool:
    """Whether every experiment has ended (NotFound for one that is not there, or no longer)."""
    return all(experiments_service.get(s, i).state in TERMINAL_EXPERIMENT for i in ids)


def searchers(ctx: MasterContext, ids: Sequence[int]) -> list[Searcher]:
    """The experiments' searchers, in order: NotFound names the first unknown id."""
    with ctx.db.read_session() as s:
        return [searcher_of(experiments_service.get(s, i)) for i in ids]


# ---- metric names

_GROUPS = {"avg_metrics": "training", "validation_metrics": "validation"}


def _groups(summary: Any) -> list[tuple[str, str]]:
    """(group, name) of every name a trial's summaryMetrics aggregates (summaries.py's keys)."""
    if not isinstance(summary, dict):
        return []
    out = []
    for k, names in summary.items():
        if not isinstance(k, str) or k.startswith("latest_") or not isinstance(names, dict):
            continue
        group = _GROUPS.get(k, k)
        if summary_key(group) != k:
            continue
        out += [(group, n) for n in names]
    return out


def metric_names(ctx: MasterContext, ids: Sequence[int], since: float | None) -> tuple[set[tuple[str, str]], bool]:
    """(group, name) of the experiments' trials that had not ended by `since` (None: every trial), and
    whether the experiments had all ended before the read."""
    T = models.Trial
    q = select(T.summary_metrics).where(T.experiment_id.in_(ids))
    if since is not None:  # a trial ended before then had its names read then
        q = q.where(or_(T.end_time.is_(None), T.end_time >= since))
    with ctx.db.read_session() as s:
        ended = _ended(s, ids)
        found = {pair for summary in s.scalars(q) for pair in _groups(summary)}
    return found, ended


# ---- a metric's values in the reports

_PLAIN_NAME = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII but " and \: a JSON path can name it
_SQLITE_NUMBERS = ("integer", "real")


def _value(dialect: str, name: str) -> ColumnElement[Any]:
    """The name's value in a report: SQLite, the number or NULL; PostgreSQL, its JSON text (_number)."""
    M = models.Metric
    if dialect != "sqlite":
        return cast(M.metrics[name], Text)
    if _PLAIN_NAME.fullmatch(name):
        path = f'$."{name}"'
        return case((func.json_type(M.metrics, path).in_(_SQLITE_NUMBERS), func.json_extract(M.metrics, path)))
    each = func.json_each(M.metrics).table_valued("key", "value", "type").alias("e")
    return select(each.c.value).where(each.c.key == name, each.c.type.in_(_SQLITE_NUMBERS)).scalar_subquery()


def _number(raw: Any) -> float | None:
    """A value _value read as a finite float, or None (a string such as "NaN", a boolean, an object...)."""
    if isinstance(raw, str):
        if raw[:1] not in "-0123456789" or not raw:
            return None
        raw = float(raw)
    if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
        return float(raw)
    return None


def _reports(s: Session, experiment_id: int, group: str, since: float | None):  # a Select
    M, T = models.Metric, models.Trial
    q = select(M).join(T, T.id == M.trial_id).where(T.experiment_id == experiment_id, M.group == group)
    return q if since is None else q.where(M.report_time >= since)


def metric_batches(
    ctx: MasterContext, experiment_id: int, group: str, name: str, since: float | None
) -> tuple[list[int], bool]:
    """The batches at which the experiment's trials reported a number for the metric (reports stored
    since `since`; None: all), at most MAX_ROWS of them, and whether it had ended before the read."""
    M = models.Metric
    with ctx.db.read_session() as s:
        ended = _ended(s, [experiment_id])
        value = _value(s.get_bind().dialect.name, name)
        base = (
            _reports(s, experiment_id, group, since)
            .with_only_columns(M.steps_completed.label("steps"), value.label("v"))
            .subquery()
        )
        q = select(base.c.steps).distinct().where(base.c.v.is_not(None)).order_by(base.c.steps).limit(MAX_ROWS)
        batches = [int(b) for b in s.scalars(q)]
    return batches, ended


def trials_snapshot(
    ctx: MasterContext, experiment_id: int, group: str, name: str, window: Window, since: float | None
) -> tuple[list[SnapshotRow], bool]:
    """The reports of the metric at batches in the window (stored since `since`), oldest first, at
    most MAX_ROWS, and whether the experiment had ended before the read."""
    M, T = models.Metric, models.Trial
    with ctx.db.read_session() as s:
        ended = _ended(s, [experiment_id])
        value = _value(s.get_bind().dialect.name, name)
        q = (
            _reports(s, experiment_id, group, since)
            .with_only_columns(M.trial_id, M.steps_completed, value, T.hparams)
            .where(M.steps_completed >= window.low, M.steps_completed <= window.high)
            .order_by(M.report_time, M.id)
            .limit(MAX_ROWS)
        )
        rows = []
        for trial_id, steps, raw, hparams in s.execute(q):
            number = _number(raw)
            if number is not None:
                rows.append(SnapshotRow(trial_id, int(steps), number, dict(hparams or {})))
    return rows, ended


# ---- trials-sample


def top_trials(s: Session, experiment_id: int, searcher: Searcher, most: int) -> list[int]:
    """Determined's ranking: the ASHA family's trials that have validated, furthest first; the others'
    trials by their best searcher metric (none last). Ties: the best metric, then the id."""
    T, M = models.Trial, models.Metric
    best = T.best_metric.asc() if searcher.smaller_is_better else T.best_metric.desc()
    if sample_by_length(searcher.name):
        reached = (
            select(M.trial_id, func.max(M.steps_completed).label("reached"))
            .where(M.group == "validation")
            .group_by(M.trial_id)
            .subquery()
        )
        q = (
            select(T.id)
            .join(reached, reached.c.trial_id == T.id)
            .where(T.experiment_id == experiment_id)
            .order_by(reached.c.reached.desc(), best.nulls_last(), T.id)
        )
    else:
        q = select(T.id).where(T.experiment_id == experiment_id).order_by(best.nulls_last(), T.id)
    return list(s.scalars(q.limit(most)))


@dataclass(frozen=True)
class Sample:
    top: list[int]
    hparams: dict[int, dict[str, Any]]  # of the trials promoted
    points: dict[int, list[Point]]
    ended: bool


def _rfc3339(t: float | None) -> str:
    return "" if t is None else datetime.fromtimestamp(t, tz=UTC).isoformat().replace("+00:00", "Z")


def _times(s: Session, trial_id: int, group: str, steps: Sequence[int]) -> dict[int, float]:
    M = models.Metric
    q = select(M.steps_completed, M.report_time).where(
        M.trial_id == trial_id, M.group == group, M.steps_completed.in_(list(steps))
    )
    return {int(step): t for step, t in s.execute(q)}


def _history(s: Session, trial_id: int, group: str, name: str, low: int, high: int, most: int) -> list[Point]:
    """A promoted trial's points so far: its series downsampled as the charts' (series.py), then
    at most `most`."""
    [series] = metric_series.read_series(s, [trial_id], group, [name], max(most, MIN_POINTS)) or [None]
    if series is None:
        return []
    kept = sorted({st: v for st, v in zip(series.steps, series.values, strict=True) if low <= st <= high}.items())
    times = _times(s, trial_id, group, [st for st, _ in kept])
    return thin([Point(st, v, _rfc3339(times.get(st))) for st, v in kept], most)


def _after(s: Session, trial_id: int, group: str, name: str, after: int, high: int, most: int) -> list[Point]:
    """A trial's points past batches `after` (up to `high`), the first `most` of them."""
    M = models.Metric
    value = _value(s.get_bind().dialect.name, name)
    q = (
        select(M.steps_completed, value, M.report_time)
        .where(M.trial_id == trial_id, M.group == group, M.steps_completed > after, M.steps_completed <= high)
        .order_by(M.steps_completed, M.id.desc())
    )
    points: dict[int, Point] = {}
    for steps, raw, when in s.execute(q.limit(most * 2)):  # a replayed step is stored at most twice (the later first)
        number = _number(raw)
        if number is not None and int(steps) not in points:
            points[int(steps)] = Point(int(steps), number, _rfc3339(when))
    return sorted(points.values(), key=lambda p: p.batches)[:most]


def trials_sample(
    ctx: MasterContext,
    experiment_id: int,
    searcher: Searcher,
    group: str,
    name: str,
    *,
    most_trials: int,
    most_points: int,
    low: int,
    high: int,
    sent: dict[int, int],
) -> Sample:
    """The top trials now, and the points of each past `sent[trial]` (every point, downsampled, for a
    trial not in `sent`): at most `most_points` per trial."""
    T = models.Trial
    with ctx.db.read_session() as s:
        ended = _ended(s, [experiment_id])
        top = top_trials(s, experiment_id, searcher, most_trials)
        joined = [t for t in top if t not in sent]
        hparams = (
            {t: dict(h or {}) for t, h in s.execute(select(T.id, T.hparams).where(T.id.in_(joined)))} if joined else {}
        )
        points = {
            t: (
                _after(s, t, group, name, max(sent[t], low - 1), high, most_points)
                if t in sent
                else _history(s, t, group, name, low, high, most_points)
            )
            for t in top
        }
    return Sample(top, hparams, points, ended)


# ---- the streams: each poll reads what may be new and returns (its message, whether the stream ends)

Poll = Callable[[], tuple[dict[str, Any], bool]]


@dataclass
class Since:
    """The report time each read looks back to: the start of the read before it, less REREAD_SECONDS
    (None at first: everything)."""

    clock: Clock
    at: float | None = None

    def take(self) -> float | None:
        at, self.at = self.at, self.clock.now() - REREAD_SECONDS
        return at


def metric_names_poll(ctx: MasterContext, ids: Sequence[int]) -> Poll:
    sent = NamesSent([sr.metric for sr in searchers(ctx, ids) if sr.metric])
    since = Since(ctx.clock)

    def poll() -> tuple[dict[str, Any], bool]:
        found, ended = metric_names(ctx, ids, since.take())
        return sent.message(found), ended

    return poll


def batches_poll(ctx: MasterContext, experiment_id: int, group: str, name: str) -> Poll:
    searchers(ctx, [experiment_id])
    sent, since = BatchesSent(), Since(ctx.clock)

    def poll() -> tuple[dict[str, Any], bool]:
        found, ended = metric_batches(ctx, experiment_id, group, name, since.take())
        return sent.message(found), ended

    return poll


def snapshot_poll(ctx: MasterContext, experiment_id: int, group: str, name: str, window: Window) -> Poll:
    searchers(ctx, [experiment_id])
    sent, since = SnapshotSent(), Since(ctx.clock)

    def poll() -> tuple[dict[str, Any], bool]:
        found, ended = trials_snapshot(ctx, experiment_id, group, name, window, since.take())
        return sent.message(found), ended

    return poll


def sample_poll(
    ctx: MasterContext,
    experiment_id: int,
    group: str,
    name: str,
    *,
    most_trials: int,
    most_points: int,
    low: int,
    high: int,
) -> Poll:
    [searcher] = searchers(ctx, [experiment_id])
    sent = SampleSent(name)

    def poll() -> tuple[dict[str, Any], bool]:
        got = trials_sample(
            ctx,
            experiment_id,
            searcher,
            group,
            name,
            most_trials=most_trials,
            most_points=most_points,
            low=low,
            high=high,
            sent=dict(sent.last),
        )
        return sent.message(got.top, got.hparams, got.points), got.ended

    return poll

"""Metric series for the WebUI's charts: each (trial, metric name) series of one group, downsampled
so that an answer stays small however long the training ran.

Most series are answered from their digest (digests.py, series_digest.py: each bucket's
minimum and maximum, kept behind the reports) and the few reports after it. What a digest cannot
answer is read from the reports themselves and downsampled by downsample.py, as follows.

The database finds the reports and takes the values out of their JSON: one query per batch of trials,
through the index ix_metrics_trial_group_steps and in its order (trial, step), one row per report with
a column per name asked for, NULL where the value is not a JSON number (strings such as "NaN",
booleans, nulls, objects and arrays are skipped). Python then downsamples each series in one pass.
Measured, this beats bucketing in SQL with window functions on both databases: the windows sort every
point two or three times, while the rows come already ordered from the index, and extracting the
JSON, which both ways must do, is most of the cost.

A step has one report per trial and group: metrics.record replaces the report of a step reported
again (a trial restarted from a checkpoint, a retried POST). Should two ever be stored anyway (two
reports of one step racing on PostgreSQL), the later one (the larger id) is the one read, whole, by
the same rule. Reports of steps a restarted trial did not replay are kept, as metrics.record keeps
them."""

from __future__ import annotations

import math
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Select, Text, and_, case, cast, func, select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.db import models
from pedl.master.experiments import service as experiments_service
from pedl.master.metrics import digests as metric_digests
from pedl.master.metrics.downsample import DEFAULT_POINTS, downsample
from pedl.master.metrics.series_digest import DIGEST_POINTS, Digest, answer, decode, encode, fold, points_of
from pedl.master.trials import service as trials_service

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_NAMES = 50  # series names per request, asked for or picked
MAX_NAME_LENGTH = 255
MAX_TRIALS = 1000  # an experiment's first trials by id
MAX_LISTED_NAMES = 1000
NAME_SAMPLE = 500  # reports read from each end of the group for the names listing
BATCH_VALUES = 500_000  # values (reports x names) read in one query


@dataclass(frozen=True)
class Series:
    trial_id: int
    name: str
    steps: list[int]
    values: list[float]
    total: int  # numeric points stored
    downsampled: bool


@dataclass(frozen=True)
class Answer:
    group: str
    max_points: int
    names: list[str]  # every name seen in the group (see names_seen)
    series: list[Series]
    trial_count: int = 1  # the experiment's trials, all of them
    truncated: bool = False  # only its first MAX_TRIALS were read


def check_names(names: Iterable[str]) -> list[str]:
    """The names asked for, without repeats, in the order given."""
    out = list(dict.fromkeys(names))
    if len(out) > MAX_NAMES:
        raise InvalidArgument.at("names", f"{len(out)} names, more than the limit of {MAX_NAMES}")
    for name in out:
        if not name or len(name) > MAX_NAME_LENGTH:
            raise InvalidArgument.at("names", f"each name must be 1 to {MAX_NAME_LENGTH} characters long")
    return out


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _latest_report(summary: Any, group: str) -> Any:
    latest = summary.get(f"latest_{group}") if isinstance(summary, dict) else None  # metrics.record keeps it
    return latest.get("metrics") if isinstance(latest, dict) else None


def names_seen(s: Session, trial_ids: list[int], group: str) -> tuple[list[str], list[str]]:
    """(every name, the numeric ones) of the group's reports: each trial's latest report (kept in
    its summary), the names of its digests, and, for trials not digested yet, the first and last
    NAME_SAMPLE reports in index order. Cheap however many reports there are; a name reported only in
    the middle of a run of a trial not digested yet can be missing here, and is still charted when
    asked for by name."""
    reports = [
        _latest_report(summary, group)
        for summary in s.scalars(select(models.Trial.summary_metrics).where(models.Trial.id.in_(trial_ids)))
    ]
    K, D = models.MetricDigestMark, models.MetricDigest
    digested = set(s.scalars(select(K.trial_id).where(K.trial_id.in_(trial_ids), K.group == group)))
    numeric = (
        set(
            s.scalars(
                select(D.name).where(D.trial_id.in_(digested), D.group == group).distinct().limit(MAX_LISTED_NAMES)
            )
        )
        if digested
        else set()
    )
    sampled = [t for t in trial_ids if t not in digested]
    for direction in ("asc", "desc") if sampled else ():
        order = [getattr(c, direction)() for c in (models.Metric.trial_id, models.Metric.steps_completed)]
        reports += s.scalars(
            select(models.Metric.metrics)
            .where(models.Metric.trial_id.in_(sampled), models.Metric.group == group)
            .order_by(*order)
            .limit(NAME_SAMPLE)
        )
    every = set(numeric)
    for report in reports:
        if isinstance(report, dict):
            every.update(report)
            numeric.update(k for k, v in report.items() if _numeric(v))
    return sorted(every)[:MAX_LISTED_NAMES], sorted(numeric)[:MAX_NAMES]


_PLAIN_NAME = re.compile(r"[ !#-\[\]-~]*")  # printable ASCII but " and \: stored as written, found by a path


def _sqlite_value(name: str) -> ColumnElement[Any]:
    """The name's value when it is a JSON number, else NULL. SQLite compares a path's key with the
    stored text, where SQLAlchemy escaped every non-ASCII character (and " and \\): json_each
    compares decoded keys, so names of other characters are looked up that (slower) way."""
    if _PLAIN_NAME.fullmatch(name):
        path = f'$."{name}"'
        return case(
            (
                func.json_type(models.Metric.metrics, path).in_(_SQLITE_NUMBERS),
                func.json_extract(models.Metric.metrics, path),
            )
        )
    each = func.json_each(models.Metric.metrics).table_valued("key", "value", "type").alias("e")
    return select(each.c.value).where(each.c.key == name, each.c.type.in_(_SQLITE_NUMBERS)).scalar_subquery()


_SQLITE_NUMBERS = ("integer", "real")


def _postgres_number(text: str | None) -> float | None:
    """A JSON value's text as PostgreSQL's -> gives it: a number, or None for a string ("NaN"
    included), a boolean, a null, an object or an array."""
    if text is None or text[:1] not in _NUMBER_STARTS:
        return None
    number = float(text)
    return number if math.isfinite(number) else None


_NUMBER_STARTS = frozenset("-0123456789")


def _postgres_numbers(texts: Sequence[Any]) -> Sequence[float | None]:
    """A column of JSON texts (str, or None for NULL) -> their numbers (`_postgres_number`)."""
    try:  # the common case, numbers only, converted at C speed: JSON text float() takes is a number
        values = list(map(float, texts))
    except (TypeError, ValueError):
        return [_postgres_number(text) for text in texts]
    return values if all(map(math.isfinite, values)) else [_postgres_number(text) for text in texts]


def _sqlite_numbers(values: Sequence[Any]) -> Sequence[float | None]:
    """The query let numbers through only (json_type 'integer' or 'real'), the rest as NULL."""
    if None not in values:
        return list(map(float, values))
    return [None if v is None else float(v) for v in values]


def _values(dialect: str, names: list[str]) -> list[ColumnElement[Any]]:
    """A column per name: its value when a number (SQLite), or its JSON text, told apart in Python
    (PostgreSQL: cheaper than asking json_typeof)."""
    if dialect == "sqlite":
        return [_sqlite_value(name) for name in names]
    return [cast(models.Metric.metrics[name], Text) for name in names]


def _points(dialect: str, names: list[str]) -> Select:
    m = models.Metric
    return select(m.id, m.trial_id, m.steps_completed, *_values(dialect, names)).order_by(m.trial_id, m.steps_completed)


def points_query(dialect: str, trial_ids: list[int], group: str, names: list[str]) -> Select:
    """One row per report of the trials' group, in the index's order (trial, step): its id, trial,
    step and a value (or NULL) per name."""
    m = models.Metric
    return _points(dialect, names).where(m.trial_id.in_(trial_ids), m.group == group)


def latest_per_step(reports: list[Any]) -> list[Any]:
    """One report per step, in step order: of two of one step the later (larger id) wins."""
    if len({r[2] for r in reports}) == len(reports):
        return reports
    latest: dict[int, Any] = {}
    for r in reports:
        if r[2] not in latest or r[0] > latest[r[2]][0]:
            latest[r[2]] = r
    return list(latest.values())


def collect(
    reports: Iterable[Sequence[Any]], names: list[str], numbers: Callable[[Sequence[Any]], Sequence[float | None]]
) -> dict[str, tuple[list[int], list[float]]]:
    """One trial's rows of points_query (in step order) -> each name's series (steps, values), for
    the names with a number."""
    rows = latest_per_step(list(reports))
    if not rows:
        return {}
    columns = list(zip(*rows, strict=True))  # id, trial, step, then a value per name
    steps = columns[2]
    found = {}
    for name, column in zip(names, columns[3:], strict=True):
        values = numbers(column)
        if None in values:
            kept = [(step, v) for step, v in zip(steps, values, strict=True) if v is not None]
            if not kept:
                continue
            found[name] = ([step for step, _ in kept], [v for _, v in kept])
        else:
            found[name] = (list(steps), values)
    return found


def batches(counts: list[tuple[int, int]], per_report: int, budget: int = BATCH_VALUES) -> list[list[int]]:
    """(trial, reports) in trial order -> runs of trials of at most `budget` values (reports times
    `per_report`) each; a trial of more has a batch of its own."""
    out: list[list[int]] = []
    size = 0
    for trial_id, reports in counts:
        if not out or size + reports * per_report > budget:
            out.append([])
            size = 0
        out[-1].append(trial_id)
        size += reports * per_report
    return out


def _read_reports(s: Session, trial_ids: list[int], group: str, names: list[str], max_points: int) -> list[Series]:
    """The series read from the reports themselves. The trials are read in batches of a bounded
    number of values (their reports counted on the index alone), and each batch is downsampled before
    the next is read: memory holds a batch's points, not the experiment's."""
    m = models.Metric
    counts = s.execute(
        select(m.trial_id, func.count())
        .where(m.trial_id.in_(trial_ids), m.group == group)
        .group_by(m.trial_id)
        .order_by(m.trial_id)
    ).all()
    dialect = s.get_bind().dialect.name
    numbers = _sqlite_numbers if dialect == "sqlite" else _postgres_numbers
    out = []
    for batch in batches([(trial_id, n) for trial_id, n in counts], len(names)):
        rows = s.connection().execute(points_query(dialect, batch, group, names)).all()  # Core rows: no ORM
        for trial_id, reports in groupby(rows, key=itemgetter(1)):
            for name, (steps, values) in collect(reports, names, numbers).items():
                kept_steps, kept_values = downsample(steps, values, max_points)
                out.append(Series(trial_id, name, kept_steps, kept_values, len(steps), len(steps) > max_points))
    return out


TAIL_TRIALS = 500  # trials whose tails one query reads


def tail_query(dialect: str, trial_ids: list[int], group: str, names: list[str]) -> Select:
    """The trials' reports after their marks: points_query's columns, then the mark's step, and a row
    of NULLs but the trial and the mark for a trial with none (so every mark read here is seen). Both
    databases run it as one index range of metrics per mark."""
    m, k = models.Metric, models.MetricDigestMark
    after = and_(m.trial_id == k.trial_id, m.group == k.group, m.steps_completed > k.through_step)
    return (
        select(m.id, k.trial_id, m.steps_completed, *_values(dialect, names), k.through_step)
        .select_from(k)
        .outerjoin(m, after)
        .where(k.trial_id.in_(trial_ids), k.group == group)
        .order_by(k.trial_id, m.steps_completed)
    )


Tail = dict[str, tuple[list[int], list[float]]]


def _tails(s: Session, marks: metric_digests.Marks, group: str, names: list[str]) -> Iterator[tuple[int, Tail | None]]:
    """Each digested trial's reports after its mark, as collect gives them; None for a trial whose
    mark moved since `marks` was read (the digester committed in between: read it from the reports)."""
    dialect = s.get_bind().dialect.name
    numbers = _sqlite_numbers if dialect == "sqlite" else _postgres_numbers
    ids = sorted(marks)
    for lo in range(0, len(ids), TAIL_TRIALS):
        chunk = ids[lo : lo + TAIL_TRIALS]
        found: dict[int, Tail | None] = {}
        for trial_id, rows in groupby(
            s.connection().execute(tail_query(dialect, chunk, group, names)), key=itemgetter(1)
        ):
            rows = list(rows)
            if rows[0][-1] != marks[trial_id][0]:
                found[trial_id] = None
            else:
                found[trial_id] = collect((r[:-1] for r in rows if r[0] is not None), names, numbers)
        for trial_id in chunk:
            yield trial_id, found.get(trial_id)  # no row at all: the mark is gone (a reset rebuilt it)


ANSWERS_KEPT = 1024  # digest answers kept, each at most DIGEST_POINTS points
EMPTY_DIGEST = encode(Digest())
_answers: OrderedDict[tuple[int, int, int], tuple[array, array]] = OrderedDict()
_answers_lock = threading.Lock()


def _digest_answer(
    data: bytes, tail: tuple[list[int], list[float]] | None, max_points: int
) -> tuple[list[int], list[float], int] | None:
    """(steps, values, points in the series) from a stored digest and the points after it, or None
    where the digest cannot answer. The answer of a digest with no points after it is kept (by the
    digest's content) for the next poll: a finished trial's series are computed once."""
    key = (hash(data), len(data), max_points)
    settled = not tail or not tail[0]
    if settled:
        with _answers_lock:
            kept = _answers.get(key)
            if kept is not None:
                _answers.move_to_end(key)
        if kept is not None:
            return kept[0].tolist(), kept[1].tolist(), points_of(data)
    digest = decode(data)
    if tail:
        fold(digest, zip(*tail, strict=True))  # steps after the mark: after the digest's
    got = answer(digest, max_points)
    if got is None:
        return None
    if settled:
        with _answers_lock:
            _answers[key] = (array("q", got[0]), array("d", got[1]))
            while len(_answers) > ANSWERS_KEPT:
                _answers.popitem(last=False)
    return got[0], got[1], digest.points


def read_series(s: Session, trial_ids: list[int], group: str, names: list[str], max_points: int) -> list[Series]:
    """The series of each trial and name with a number, by trial id, then in `names` order: from the
    digests and the reports after them (digests.py) where the digests can answer, from the
    reports themselves where they cannot (no valid mark yet, a name left out of the digests, a short
    series the digest no longer holds whole, or more points asked than a digest keeps)."""
    if not trial_ids or not names:
        return []
    out: list[Series] = []
    from_reports: dict[tuple[str, ...], list[int]] = {}
    if max_points > DIGEST_POINTS:
        from_reports[tuple(names)] = trial_ids
    else:
        marks = metric_digests.load(s, trial_ids, group, names)
        undigested = [t for t in trial_ids if t not in marks]
        if undigested:
            from_reports[tuple(names)] = undigested
        for trial_id, tail in _tails(s, marks, group, names):
            _, complete, stored = marks[trial_id]
            if tail is None:
                from_reports.setdefault(tuple(names), []).append(trial_id)
                continue
            missing = []
            for name in names:
                data = stored.get(name)
                if data is None and not complete:
                    missing.append(name)
                    continue
                if data is None:
                    data = EMPTY_DIGEST
                got = _digest_answer(data, tail.get(name), max_points)
                if got is None:
                    missing.append(name)
                elif got[2]:
                    out.append(Series(trial_id, name, got[0], got[1], got[2], got[2] > max_points))
            if missing:
                from_reports.setdefault(tuple(missing), []).append(trial_id)
    for asked, trials in from_reports.items():
        out += _read_reports(s, sorted(trials), group, list(asked), max_points)
    order = {name: i for i, name in enumerate(names)}
    out.sort(key=lambda series: (series.trial_id, order[series.name]))
    return out


def _answer(
    s: Session, trial_ids: list[int], group: str, names: list[str] | None, max_points: int
) -> tuple[list[str], list[Series]]:
    wanted = check_names(names or [])
    listed, numeric = names_seen(s, trial_ids, group)
    return listed, read_series(s, trial_ids, group, wanted or numeric, max_points)


def for_trial(
    ctx: MasterContext, trial_id: int, *, group: str, names: list[str] | None = None, max_points: int = DEFAULT_POINTS
) -> Answer:
    with ctx.db.read_session() as s:
        trials_service.get(s, trial_id)
        listed, series = _answer(s, [trial_id], group, names, max_points)
    return Answer(group, max_points, listed, series)


def for_experiment(
    ctx: MasterContext,
    experiment_id: int,
    *,
    group: str,
    names: list[str] | None = None,
    max_points: int = DEFAULT_POINTS,
) -> Answer:
    with ctx.db.read_session() as s:
        experiments_service.get(s, experiment_id)
        trial_ids = list(
            s.scalars(
                select(models.Trial.id)
                .where(models.Trial.experiment_id == experiment_id)
                .order_by(models.Trial.id)
                .limit(MAX_TRIALS + 1)
            )
        )
        truncated = len(trial_ids) > MAX_TRIALS
        count = len(trial_ids)
        if truncated:
            trial_ids = trial_ids[:MAX_TRIALS]
            count = s.scalar(select(func.count()).where(models.Trial.experiment_id == experiment_id)) or 0
        listed, series = _answer(s, trial_ids, group, names, max_points)
    return Answer(group, max_points, listed, series, trial_count=count, truncated=truncated)

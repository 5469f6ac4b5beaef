"""A batch of one trial's metric reports, as pedl.core's background sender coalesces what it has
queued: checked whole, then stored in one transaction with one bulk insert.

A report's identity is (trial, group, steps_completed), and the master stores each at most once: a
report for steps already stored (a retried batch after a timeout, a master killed in the middle of
one, a trial restarted from its checkpoint replaying steps) replaces the stored one, and a batch that
names the same steps twice keeps the last. The transaction makes a batch all or nothing, so a retry
neither loses nor doubles a report. The summary, the digests' marks and the searcher see the reports
as if they had come one by one, in the batch's order."""

from __future__ import annotations

from collections.abc import Collection
from itertools import chain, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import orjson
from sqlalchemy import delete
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.lifecycle import progression as experiment_progression
from pedl.master.lifecycle import search_progress
from pedl.master.lifecycle.states import TERMINAL_TRIAL
from pedl.master.metrics import digest_queue
from pedl.master.metrics import digests as metric_digests
from pedl.master.metrics import service as metrics
from pedl.master.metrics import summaries as metric_summaries
from pedl.master.metrics.columns import Columns, columns
from pedl.master.trials.reports import trial_for_report

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_REPORTS = 4000  # reports per batch: the sender sends at most this many at once (one transaction each)


class Report(NamedTuple):
    """One report of a batch; `values` as stored: JSON, a non-finite float as "NaN", "Infinity" or
    "-Infinity" (the strings trials send). (A tuple: a frozen dataclass's __init__ took 7% of a master
    storing 60,000 reports a second.)"""

    group: str
    steps_completed: int
    trial_run_id: int
    values: dict[str, Any]


def check_size(count: int) -> None:
    if count == 0:
        raise InvalidArgument.at("reports", "the batch is empty: give at least one report")
    if count > MAX_REPORTS:
        raise InvalidArgument.at("reports", f"{count} reports, more than the limit of {MAX_REPORTS} per batch")


def store(ctx: MasterContext, who: Caller, trial_id: int, reports: list[Report]) -> int:
    """Store the batch; -> how many distinct reports it held. Validation reports move the searcher,
    so a batch with any runs under the cluster lock; a training-only batch does not take it."""
    check_size(len(reports))
    unique = reports if len(set(map(_identity, reports))) == len(reports) else _last_of_each(reports)

    by_group: dict[str, list[Report]] = {}
    if len(groups := set(map(_GROUP, unique))) == 1:  # (a training loop's batch)
        by_group[groups.pop()] = unique
    else:
        for r in unique:
            by_group.setdefault(r.group, []).append(r)

    # what needs no database, before the transaction (SQLite's writers queue for one write lock): each
    # group's reports as columns, for its summary and for the digester
    values_of = {group: list(map(_VALUES, rows)) for group, rows in by_group.items()}
    columns_of = {group: (values, columns(values)) for group, values in values_of.items()}
    blocks = {
        group: digest_queue.block_of(list(map(_STEPS, rows)), *columns_of[group]) for group, rows in by_group.items()
    }
    names_of = [(group, _names(*columns_of[group])) for group in by_group]
    limit = ctx.config.limits.max_metric_names_per_trial

    def run(s: Session) -> search_progress.Nudge | None:
        trial = trial_for_report(s, who, trial_id)
        _check_names(trial, reports, names_of, limit)
        before = search_progress.before_report(trial)
        _insert(s, trial, unique, by_group, ctx.clock.now(), columns_of)
        moved = _validations(ctx, s, trial, by_group.get("validation", []))
        return None if moved else search_progress.measure(s, trial, before)

    if "validation" in by_group:
        nudge = cast("search_progress.Nudge | None", ctx.controller.run(run))
    else:
        with ctx.db.session() as s:
            nudge = run(s)
    for group, rows in by_group.items():  # stored: counted, and handed to the digester as they are
        ctx.metrics.metric_report(group, len(rows))
        ctx.digest_queue.feed(trial_id, group, blocks[group])
    search_progress.apply(ctx.db, nudge)
    return len(unique)


# a Report's fields, for C-level loops (map, zip) over a batch's reports instead of Python ones
_GROUP, _STEPS, _RUN, _VALUES = (itemgetter(i) for i in range(4))
_identity = itemgetter(0, 1)


def _names(values: list[dict[str, Any]], by_name: Columns | None) -> Collection[str]:
    """The names of a group's reports: its columns' (the same names in each), else every report's."""
    return by_name[0] if by_name is not None else dict.fromkeys(chain.from_iterable(values))


def _check_names(
    trial: models.Trial, reports: list[Report], names_of: list[tuple[str, Collection[str]]], limit: int
) -> None:
    """The batch's names, each group's at once, within the trial's limit of distinct names; past it, a
    report at a time, for the refusal to name the first report that passes it."""
    try:
        metric_summaries.check_names(trial.id, trial.summary_metrics, names_of, limit, lambda _: "reports")
    except InvalidArgument:
        metric_summaries.check_names(
            trial.id,
            trial.summary_metrics,
            [(r.group, r.values) for r in reports],
            limit,
            lambda i: f"reports[{i}].metrics.avgMetrics",
        )
        raise


def _last_of_each(reports: list[Report]) -> list[Report]:
    """The last report of each (group, steps), at its last place in the batch."""
    latest: dict[tuple[str, int], Report] = {}
    for r in reports:
        latest.pop(_identity(r), None)
        latest[_identity(r)] = r
    return list(latest.values())


def _insert(
    s: Session,
    trial: models.Trial,
    reports: list[Report],
    by_group: dict[str, list[Report]],
    now: float,
    columns_of: dict[str, tuple[list[Any], Columns | None]],
) -> None:
    """Store `reports` (`by_group` holds the same reports by group, in batch order; `columns_of` a group's
    values and their columns)."""
    M = models.Metric
    summary = dict(trial.summary_metrics or {})
    rebuild = []  # groups whose aggregates are read back from their rows once these are stored
    for group, group_reports in by_group.items():
        steps = list(map(_STEPS, group_reports))
        before = metric_digests.reached_step(summary, group)
        key = metric_summaries.key(group)
        if before is not None and (min(steps) <= before or key not in summary):
            rebuild.append(group)
        else:
            summary[key] = metric_summaries.fold_columns(*columns_of[group], summary.get(key))
        reached = metric_digests.note_reports(s, trial, group, steps)
        if before is None or min(steps) <= before:  # past the group's largest step nothing is stored yet
            s.execute(delete(M).where(M.trial_id == trial.id, M.group == group, M.steps_completed.in_(steps)))
        last = group_reports[-1]
        summary[f"latest_{group}"] = {
            "steps_completed": last.steps_completed,
            "metrics": last.values,
            "max_steps_completed": reached,
        }
    connection = s.connection()
    if connection.dialect.name == "postgresql":  # COPY, the values already JSON text: neither the ORM's
        # per-row bookkeeping nor the JSON type's encoding
        texts = map(bytes.decode, map(orjson.dumps, map(_VALUES, reports)))
        driver = connection.connection.driver_connection  # psycopg's: None only once the connection is closed
        if driver is None:
            raise RuntimeError("the session's connection is closed")
        with driver.cursor() as cursor, cursor.copy(f"COPY metrics ({COLUMNS}) FROM STDIN") as copy:
            for row in zip(
                repeat(trial.id), map(_RUN, reports), map(_GROUP, reports), map(_STEPS, reports), repeat(now), texts
            ):
                copy.write_row(row)
    else:
        connection.exec_driver_sql(*_sqlite_insert(trial.id, now, reports))
    trial.total_batches = max(trial.total_batches, max(map(_STEPS, reports)))
    for group in rebuild:
        summary[metric_summaries.key(group)] = metric_summaries.rebuild(s, trial.id, group)
    trial.summary_metrics = summary


COLUMNS = "trial_id, trial_run_id, metric_group, steps_completed, report_time, metrics"


def _sqlite_insert(trial_id: int, now: float, reports: list[Report]) -> tuple[str, tuple[Any, ...]]:
    """The batch's INSERT on SQLite: one statement over the batch as one JSON array, which SQLite walks in
    C. (An executemany releases and retakes the GIL for every row, and each retake could wait for the
    threads parsing the next batches, up to the interpreter's switch interval: SQLite's write lock was held
    ~97% of the time by batches whose rows took ~3 us a report to store.) A training loop's batch (one
    group and run, its steps evenly spaced) sends only its values through JSON, and costs SQLite less than
    an executemany of the same rows (2.8 against 6.4 us a row); any other batch sends its rows whole."""
    n = len(reports)
    steps = list(map(_STEPS, reports))
    stride = steps[1] - steps[0] if n > 1 else 1
    first = reports[0]
    if (
        stride > 0
        and steps == list(range(steps[0], steps[0] + stride * n, stride))
        and len(set(map(_GROUP, reports))) == 1
        and len(set(map(_RUN, reports))) == 1
    ):
        values = orjson.dumps(list(map(_VALUES, reports))).decode()
        return SQLITE_INSERT_SPACED, (trial_id, first.trial_run_id, first.group, steps[0], stride, now, values)
    rows = orjson.dumps(
        list(zip(map(_RUN, reports), map(_GROUP, reports), steps, map(_VALUES, reports), strict=True))
    ).decode()
    return SQLITE_INSERT, (trial_id, now, rows)


SQLITE_INSERT_SPACED = f"INSERT INTO metrics ({COLUMNS}) SELECT ?, ?, ?, ? + key * ?, ?, value FROM json_each(?)"
SQLITE_INSERT = (
    f"INSERT INTO metrics ({COLUMNS}) "
    "SELECT ?, json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'), ?, "
    "json_extract(value, '$[3]') FROM json_each(?)"
)  # (json_extract, not ->>: SQLite before 3.38 too)


def _validations(ctx: MasterContext, s: Session, trial: models.Trial, reports: list[Report]) -> bool:
    """The searcher's metric of each validation report, in order; -> whether the searcher moved."""
    if not reports:
        return False
    exp = s.get(models.Experiment, trial.experiment_id)
    sc = (exp.config if exp is not None else {}).get("searcher", {})
    moved = False
    for r in reports:
        value = metrics.update_best(trial, sc.get("metric", ""), sc.get("smaller_is_better", True), r.values)
        if value is not None and trial.state not in TERMINAL_TRIAL:
            experiment_progression.on_validation(ctx.controller, s, trial, value, r.steps_completed, r.values)
            moved = True
    return moved

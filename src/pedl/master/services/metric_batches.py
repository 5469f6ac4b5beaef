"""A batch of one trial's metric reports, as pedl.core's background sender coalesces what it has
queued: checked whole, then stored in one transaction with one bulk insert.

A report's identity is (trial, group, steps_completed), and the master stores each at most once: a
report for steps already stored (a retried batch after a timeout, a master killed in the middle of
one, a trial restarted from its checkpoint replaying steps) replaces the stored one, and a batch that
names the same steps twice keeps the last. The transaction makes a batch all or nothing, so a retry
neither loses nor doubles a report. The summary, the digests' marks and the searcher see the reports
as if they had come one by one, in the batch's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, cast

import orjson
from sqlalchemy import delete
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.lifecycle import TERMINAL_TRIAL
from pedl.master.services import experiment_progression, metric_digests, metric_summaries, metrics, search_progress
from pedl.master.services.trial_reports import trial_for_report

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
    latest: dict[tuple[str, int], Report] = {}
    for r in reports:  # the last of a (group, steps) wins, at its last place in the batch
        latest.pop((r.group, r.steps_completed), None)
        latest[(r.group, r.steps_completed)] = r
    unique = list(latest.values()) if len(latest) < len(reports) else reports

    by_group: dict[str, list[Report]] = {}
    for r in unique:
        by_group.setdefault(r.group, []).append(r)

    def run(s: Session) -> search_progress.Nudge | None:
        trial = trial_for_report(s, who, trial_id)
        before = search_progress.before_report(trial)
        _insert(s, trial, unique, by_group, ctx.clock.now())
        moved = _validations(ctx, s, trial, by_group.get("validation", []))
        return None if moved else search_progress.measure(s, trial, before)

    if "validation" in by_group:
        nudge = cast("search_progress.Nudge | None", ctx.controller.run(run))
    else:
        with ctx.db.session() as s:
            nudge = run(s)
    for group, rows in by_group.items():  # stored: counted, and handed to the digester as they are
        ctx.metrics.metric_report(group, len(rows))
        ctx.digest_queue.feed(trial_id, group, [(r.steps_completed, r.values) for r in rows])
    search_progress.apply(ctx.db, nudge)
    return len(unique)


def _insert(s: Session, trial: models.Trial, reports: list[Report], by_group: dict[str, list[Report]],
            now: float) -> None:
    """Store `reports` (`by_group` holds the same reports by group, in batch order)."""
    M = models.Metric
    summary = dict(trial.summary_metrics or {})
    rebuild = []  # groups whose aggregates are read back from their rows once these are stored
    for group, group_reports in by_group.items():
        steps = [r.steps_completed for r in group_reports]
        before = metric_digests.reached_step(summary, group)
        key = metric_summaries.key(group)
        if before is not None and (min(steps) <= before or key not in summary):
            rebuild.append(group)
        else:
            summary[key] = metric_summaries.fold_all([r.values for r in group_reports], summary.get(key))
        reached = metric_digests.note_reports(s, trial, group, steps)
        if before is None or min(steps) <= before:  # past the group's largest step nothing is stored yet
            s.execute(delete(M).where(M.trial_id == trial.id, M.group == group, M.steps_completed.in_(steps)))
        last = group_reports[-1]
        summary[f"latest_{group}"] = {"steps_completed": last.steps_completed, "metrics": last.values,
                                      "max_steps_completed": reached}
    # the values already JSON text, in the driver's fastest bulk form (COPY on PostgreSQL, one
    # executemany on SQLite): neither the ORM's per-row bookkeeping nor the JSON type's encoding
    dumps, tid = orjson.dumps, trial.id  # (an ORM attribute: read once)
    rows = [(tid, r.trial_run_id, r.group, r.steps_completed, now, dumps(r.values).decode()) for r in reports]
    connection = s.connection()
    if connection.dialect.name == "postgresql":
        with connection.connection.driver_connection.cursor() as cursor, cursor.copy(
                f"COPY metrics ({COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    else:
        connection.exec_driver_sql(f"INSERT INTO metrics ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", rows)
    trial.total_batches = max(trial.total_batches, *(r.steps_completed for r in reports))
    for group in rebuild:
        summary[metric_summaries.key(group)] = metric_summaries.rebuild(s, trial.id, group)
    trial.summary_metrics = summary


COLUMNS = "trial_id, trial_run_id, metric_group, steps_completed, report_time, metrics"


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

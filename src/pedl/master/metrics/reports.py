"""Every stored report of some trials' metric group, in pages, for Determined's SDK
(trial.iter_metrics, client.stream_trials_training_metrics / _validation_metrics): in (trial, step,
id) order through the (trial, group, steps) index, each page its own short read, so a stream of a
million reports holds one page in memory and no transaction open between pages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlalchemy import and_, or_, select

from pedl.errors import InvalidArgument, NotFound
from pedl.master.db import models
from pedl.master.metrics.to_wire import metrics_report
from pedl.master.wire.metrics import MetricsReport

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

PAGE = 1000
MAX_TRIALS = 1000  # trial ids per request


def check_trials(ctx: MasterContext, trial_ids: list[int]) -> list[int]:
    """The ids asked for, without repeats, in order; each must exist."""
    ids = list(dict.fromkeys(trial_ids))
    if not ids:
        raise InvalidArgument.at("trialIds", "give at least one trial id")
    if len(ids) > MAX_TRIALS:
        raise InvalidArgument.at("trialIds", f"{len(ids)} trials, more than the limit of {MAX_TRIALS}")
    with ctx.db.read_session() as s:
        found = set(s.scalars(select(models.Trial.id).where(models.Trial.id.in_(ids))))
    missing = [t for t in ids if t not in found]
    if missing:
        raise NotFound(f"trial {missing[0]} not found")
    return ids


def pages(
    ctx: MasterContext, trial_ids: list[int], group: str, start_batches: int = 0
) -> Iterator[list[MetricsReport]]:
    """The reports (those from `start_batches` steps on), PAGE at a time, each trial's in step order,
    trials in the order given."""
    M = models.Metric
    page = PAGE
    for trial_id in trial_ids:
        after: tuple[int, int] | None = None
        while True:
            query = select(M).where(M.trial_id == trial_id, M.group == group)
            if start_batches:
                query = query.where(M.steps_completed >= start_batches)
            if after is not None:
                # the first condition bounds the index range; the OR alone left PostgreSQL scanning
                # every earlier report of the trial on each page
                query = query.where(
                    M.steps_completed >= after[0],
                    or_(M.steps_completed > after[0], and_(M.steps_completed == after[0], M.id > after[1])),
                )
            with ctx.db.read_session() as s:
                rows = list(s.scalars(query.order_by(M.steps_completed, M.id).limit(page)))
            if rows:
                yield [metrics_report(m) for m in rows]
            if len(rows) < page:
                break
            after = (rows[-1].steps_completed, rows[-1].id)

"""A trial's raw metric reports for export (CSV, api/metric_export.py): every report, unsampled, one
group after another and each in step order, read in pages, each page its own short read.

An export makes two passes over the reports. The first collects the metric names (the CSV's columns)
and refuses more than MAX_COLUMNS before anything is sent; the second hands out the rows. Both read
only reports of an id up to the largest stored when the export began, so a report a running trial
stores meanwhile waits for the next export instead of bringing a name the header lacks. (On
PostgreSQL a report whose transaction was open when the export began can still commit below that
id; the rare name only it brings has no column, and the export leaves its value out.)"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from pedl.errors import InvalidArgument
from pedl.master.db import models
from pedl.master.trials import service as trials_service

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

PAGE = 1000  # reports per read
MAX_COLUMNS = 1000  # metric names an export has columns for


@dataclass(frozen=True)
class Export:
    trial_id: int
    group: str | None  # None: every group
    groups: list[str]  # the groups read, in order
    names: list[str]  # the metric names of their reports, sorted
    through_id: int  # the largest report id when the export began (0: none stored)


def plan(ctx: MasterContext, trial_id: int, group: str | None) -> Export:
    """What the export of the trial's reports (of `group`, or of every group) holds. NotFound for
    an unknown trial; InvalidArgument when the reports name more than MAX_COLUMNS metrics."""
    with ctx.db.read_session() as s:
        trials_service.get(s, trial_id)
        through_id = s.scalar(select(func.max(models.Metric.id))) or 0
    groups = [group] if group is not None else list(_groups(ctx, trial_id))
    names: set[str] = set()
    for g in groups:
        for page in _pages(ctx, trial_id, g, through_id, (models.Metric.metrics,)):
            for (metrics,) in page:
                if isinstance(metrics, dict):
                    names.update(metrics)
            if len(names) > MAX_COLUMNS:
                raise _too_many(trial_id, group)
    return Export(trial_id, group, groups, sorted(names), through_id)


def _too_many(trial_id: int, group: str | None) -> InvalidArgument:
    which = f"reports of group {group!r}" if group is not None else "reports"
    hint = "" if group is not None else "; export one group at a time"
    return InvalidArgument.at(
        "group",
        f"trial {trial_id}'s {which} name more than {MAX_COLUMNS} metrics, the most an export has columns for{hint}",
    )


def _groups(ctx: MasterContext, trial_id: int) -> Iterator[str]:
    """The trial's metric groups in order, one index lookup each (there are few)."""
    M = models.Metric
    after: str | None = None
    while True:
        query = select(func.min(M.group)).where(M.trial_id == trial_id)
        if after is not None:
            query = query.where(M.group > after)
        with ctx.db.read_session() as s:
            found = s.scalar(query)
        if found is None:
            return
        yield found
        after = found


ROW_COLUMNS = (
    models.Metric.trial_run_id,
    models.Metric.group,
    models.Metric.steps_completed,
    models.Metric.report_time,
    models.Metric.metrics,
)


def pages(ctx: MasterContext, export: Export) -> Iterator[list[tuple[Any, ...]]]:
    """The export's reports, PAGE at a time: rows of ROW_COLUMNS (trial_run_id, group,
    steps_completed, report_time, metrics), group after group, each in (step, id) order."""
    for g in export.groups:
        yield from _pages(ctx, export.trial_id, g, export.through_id, ROW_COLUMNS)


def _pages(
    ctx: MasterContext, trial_id: int, group: str, through_id: int, columns: Sequence[Any]
) -> Iterator[list[tuple[Any, ...]]]:
    """The (trial, group)'s reports of an id up to through_id, as rows of `columns`, in (step, id)
    order. Each read is an index range ordered by step alone, which the (trial, group, steps) index
    gives with no sort (ordered by id too, PostgreSQL sorts every report after the page's start:
    its index holds no id). A page that ends inside a step leaves that step to the next read, which
    takes it by id: a step has one report, or a few when reports raced (series.py)."""
    M = models.Metric
    of_trial = (M.trial_id == trial_id, M.group == group, M.id <= through_id)
    step: int | None = None  # every report of a step before it is read
    after_id: int | None = None  # and of step itself, those up to this id (None: all of them)
    while True:
        with ctx.db.read_session() as s:
            run = s.connection().execute
            rows: list[Any] = []
            if after_id is not None:
                rows = list(
                    run(
                        select(M.steps_completed, M.id, *columns)
                        .where(*of_trial, M.steps_completed == step, M.id > after_id)
                        .order_by(M.id)
                        .limit(PAGE)
                    )
                )
            room = PAGE - len(rows)
            later: list[Any] = []
            if room:
                query = select(M.steps_completed, M.id, *columns).where(*of_trial)
                if step is not None:
                    query = query.where(M.steps_completed > step)
                later = list(run(query.order_by(M.steps_completed).limit(room)))
        done = False
        if not room:  # a full page of one step: go on with it by id
            after_id = rows[-1][1]
        elif len(later) == room:  # the page may end inside its last step: read that one whole next
            step, after_id = later[-1][0], -1
            later = [r for r in later if r[0] < step]
        else:
            done = True
        rows += sorted(later, key=lambda r: (r[0], r[1]))
        if rows:
            yield [tuple(r[2:]) for r in rows]
        if done:
            return

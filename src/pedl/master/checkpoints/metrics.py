"""The metric reports behind a checkpoint or a model version (Determined's SDK: checkpoint.get_metrics(group),
model_version.get_metrics(group)): every report of the trials that reported using it
(core_context.experimental.report_task_using_checkpoint / _model_version: trials/source_infos.py),
not of the trial that took the checkpoint. Of one group or of all, in pages (metrics/reports.py):
linked trials are read a page of ids at a time, their reports a page at a time, so a checkpoint used by
thousands of trials with a million reports never sits in memory at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlalchemy import ColumnElement, select

from pedl.master.checkpoints.service import get
from pedl.master.db import models
from pedl.master.metrics import reports as metric_reports
from pedl.master.model_registry import versions as model_versions
from pedl.master.model_registry.service import find
from pedl.master.trials.source_infos import stored_type
from pedl.master.wire.metrics import MetricsReport

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

FIRST = ("training", "validation")  # then any other group, by name
TRIAL_PAGE = 1000  # linked trial ids per read

Linked = list[ColumnElement[bool]]  # what selects the trial source infos of a checkpoint or version


def _typed(where: Linked, source_type: str | None) -> Linked:
    kind = stored_type(source_type)
    return where + ([models.TrialSourceInfo.type == kind] if kind else [])


def of_checkpoint(ctx: MasterContext, uuid: str, source_type: str | None = None) -> Linked:
    """The links to the checkpoint (of that Determined type; None or UNSPECIFIED: any); NotFound for
    an unknown uuid."""
    with ctx.db.read_session() as s:
        get(s, uuid)
    return _typed([models.TrialSourceInfo.checkpoint_uuid == uuid], source_type)


def of_version(ctx: MasterContext, identifier: str, number: int, source_type: str | None = None) -> Linked:
    """The links to version `number` of the model (by name, or id when only digits); NotFound for an
    unknown model or version."""
    with ctx.db.read_session() as s:
        version = model_versions.find_version(s, find(s, identifier), number)
    T = models.TrialSourceInfo
    return _typed([T.model_id == version.model_id, T.model_version == version.version], source_type)


def linked_trials(ctx: MasterContext, where: Linked) -> Iterator[int]:
    """The ids of the linked trials, each once, in id order, TRIAL_PAGE per read."""
    T = models.TrialSourceInfo
    after = 0
    while True:
        with ctx.db.read_session() as s:
            ids = list(
                s.scalars(
                    select(T.trial_id)
                    .where(*where, T.trial_id > after)
                    .distinct()
                    .order_by(T.trial_id)
                    .limit(TRIAL_PAGE)
                )
            )
        yield from ids
        if len(ids) < TRIAL_PAGE:
            return
        after = ids[-1]


def groups_of(ctx: MasterContext, trial_id: int) -> list[str]:
    with ctx.db.read_session() as s:
        found = set(s.scalars(select(models.Metric.group).where(models.Metric.trial_id == trial_id).distinct()))
    return [g for g in FIRST if g in found] + sorted(found - set(FIRST))


def pages(ctx: MasterContext, where: Linked, group: str | None) -> Iterator[list[MetricsReport]]:
    """The linked trials' reports of `group` (None: every group, training and validation first), trial
    by trial in id order, each group's in step order, a page at a time."""
    for trial_id in linked_trials(ctx, where):
        for name in [group] if group else groups_of(ctx, trial_id):
            yield from metric_reports.pages(ctx, [trial_id], name)

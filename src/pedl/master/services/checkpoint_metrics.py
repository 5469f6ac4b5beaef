"""The metric reports behind a checkpoint (Determined's SDK: checkpoint.get_metrics(group)): every report
of the trial that took it, of one group or of all, in pages (services/metric_reports.py), so a trial with
a million reports never sits in memory at once.

Determined answers with the reports of the trials that named the checkpoint through
core_context.experimental.report_task_using_checkpoint (its trial_source_infos: batch inference).
pedl has no such records (POST /api/v1/trial-source-info is not served), so it answers with the
reports of the trial that produced the checkpoint, whatever trialSourceInfoType the SDK sends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlalchemy import select

from pedl.master.db import models
from pedl.master.services import metric_reports
from pedl.master.services.checkpoints import get

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

FIRST = ("training", "validation")  # then any other group, by name


def trial_of(ctx: MasterContext, uuid: str) -> int | None:
    """The trial that took the checkpoint (None: none, a checkpoint from before trials reported
    their own); NotFound for an unknown uuid."""
    with ctx.db.read_session() as s:
        return get(s, uuid).trial_id


def groups_of(ctx: MasterContext, trial_id: int) -> list[str]:
    with ctx.db.read_session() as s:
        found = set(s.scalars(select(models.Metric.group).where(models.Metric.trial_id == trial_id).distinct()))
    return [g for g in FIRST if g in found] + sorted(found - set(FIRST))


def pages(ctx: MasterContext, trial_id: int | None, group: str | None) -> Iterator[list[models.Metric]]:
    """The trial's reports of `group` (None: every group, training and validation first), each
    group's in step order, a page at a time."""
    if trial_id is None:
        return
    for name in [group] if group else groups_of(ctx, trial_id):
        yield from metric_reports.pages(ctx, [trial_id], name)

"""Determined's ResourceAllocationRaw: each allocation that held slots during a window of time, with
its experiment, owner and the seconds of it inside the window. Admins see everyone's, users their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import or_, select

from pedl.errors import InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments.labels import split as split_labels
from pedl.master.identity.authz import require_user

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

WINDOW_MAX_S = 366 * 86400.0  # a year: reports are read per day or month
ROWS_MAX = 10_000  # a window holding more must be narrowed


@dataclass(frozen=True)
class UsageEntry:
    start: float  # the allocation's, not clipped to the window
    end: float | None  # None: still running
    seconds: float  # the part of [start, end] inside the window
    slots: int
    experiment_id: int | None
    user_id: int
    username: str
    labels: list[str]


def raw(ctx: MasterContext, who: Caller, after: float, before: float) -> list[UsageEntry]:
    """Allocations that started before `before` and had not ended by `after`, oldest first."""
    user = require_user(who, "read resource allocations")
    if before < after:
        raise InvalidArgument.at("timestampBefore", "must not be earlier than timestampAfter")
    if before - after > WINDOW_MAX_S:
        raise InvalidArgument.at("timestampBefore", f"a window of at most {int(WINDOW_MAX_S // 86400)} days")
    al, tr, ex, us = models.Allocation, models.Trial, models.Experiment, models.User
    query = (
        select(al.started_at, al.ended_at, al.slots_needed, ex.id, us.id, us.username, ex.labels)
        .join(tr, tr.id == al.trial_id)
        .join(ex, ex.id == tr.experiment_id)
        .join(us, us.id == ex.owner_id)
        .where(al.started_at.is_not(None), al.started_at < before, or_(al.ended_at.is_(None), al.ended_at > after))
        .order_by(al.started_at, al.id)
        .limit(ROWS_MAX + 1)
    )
    if not user.admin:
        query = query.where(ex.owner_id == user.id)
    now = ctx.clock.now()
    with ctx.db.read_session() as s:
        rows = s.execute(query).all()
    if len(rows) > ROWS_MAX:
        raise InvalidArgument.at("timestampAfter", f"more than {ROWS_MAX} allocations in the window; narrow it")
    return [
        UsageEntry(
            start,
            end,
            max(0.0, min(end if end is not None else now, before) - max(start, after)),
            slots,
            exp_id,
            uid,
            name,
            split_labels(labels),
        )
        for start, end, slots, exp_id, uid, name, labels in rows
        if start is not None
    ]  # (the query took started allocations only)

"""Storing the wait reasons a pass decided: written, with a trial event for a new kind, only on the
allocations still PENDING in the pool and with the kind they were decided from."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.master.cluster import wait_records
from pedl.master.cluster.wait_reasons import WaitKind
from pedl.master.cluster.wait_records import WaitUpdate
from pedl.master.db import models
from pedl.master.lifecycle import allocations
from tests.master.lifecycle.recording_effects import RecordingEffects, allocations_of, experiment, trials_of


def trial_events(s: Session, trial_id: int) -> list[tuple[str, str]]:
    E = models.Event
    return [
        (e.level, e.message)
        for e in s.scalars(select(E).where(E.entity_type == "trial", E.entity_id == str(trial_id)).order_by(E.id))
    ]


@pytest.mark.parametrize("change", [None, "killed", "moved to another pool", "another reason since"])
def test_a_reason_is_stored_only_where_the_allocation_is_as_it_was_decided(
    fx: RecordingEffects, s: Session, change: str | None
) -> None:
    (alloc,) = allocations_of(s, trials_of(s, experiment(fx, s))[0])
    s.flush()
    decided = WaitUpdate(
        alloc.id, "default", alloc.trial_id, None, WaitKind.NO_AGENTS, "no agent is connected", "warning"
    )
    before = trial_events(s, alloc.trial_id)
    if change == "killed":
        allocations.kill(fx, s, alloc, "killed")
    elif change == "moved to another pool":
        alloc.resource_pool = "other"
    elif change == "another reason since":
        alloc.wait_kind = WaitKind.BOOTING
    s.flush()
    written = wait_records.store(s, fx.now, [decided])
    s.expire_all()
    if change is None:
        assert written == {alloc.id}
        assert (alloc.wait_kind, alloc.wait_reason, alloc.wait_since) == (
            WaitKind.NO_AGENTS,
            "no agent is connected",
            fx.now,
        )
        assert trial_events(s, alloc.trial_id) == [*before, ("warning", "waiting: no agent is connected")]
    else:
        assert written == set() and alloc.wait_reason is None
        assert trial_events(s, alloc.trial_id) == before


def test_a_refreshed_text_of_the_same_kind_records_no_event(fx: RecordingEffects, s: Session) -> None:
    (alloc,) = allocations_of(s, trials_of(s, experiment(fx, s))[0])
    alloc.wait_kind = WaitKind.NO_FREE_SLOTS
    s.flush()
    before = trial_events(s, alloc.trial_id)
    text = "needs 1 free slot in pool default (0 of 4 free)"
    assert wait_records.store(
        s,
        fx.now,
        [WaitUpdate(alloc.id, "default", alloc.trial_id, WaitKind.NO_FREE_SLOTS, WaitKind.NO_FREE_SLOTS, text, None)],
    ) == {alloc.id}
    s.expire_all()
    assert alloc.wait_reason == text and trial_events(s, alloc.trial_id) == before

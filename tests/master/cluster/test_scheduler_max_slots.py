"""An experiment's resources.max_slots: the pure scheduler never lets a group hold more slots than its
cap, running tasks count and are never preempted for it, and the scheduling pass stores the wait
reason naming max_slots."""

from __future__ import annotations

import asyncio

from sqlalchemy.orm import Session

from pedl.master.cluster import placement
from pedl.master.cluster.agent_hub import AgentConnection, AgentHub
from pedl.master.cluster.scheduler import AgentSnapshot, RunningTask, SlotRequest, plan
from pedl.master.cluster.wait_reasons import WaitKind, max_slots_reason
from pedl.master.db.engine import Database
from pedl.master.services import experiments as experiments_service
from tests.master.cluster.recording_effects import RecordingEffects, agent, allocations_of, owner, trials_of


def free_agent(id_: str, slots: int, used: int = 0) -> AgentSnapshot:
    ids = tuple(f"{id_}-{i}" for i in range(slots))
    return AgentSnapshot(id_, ids, ids[used:])


def req(id_: str, slots: int = 1, *, group: str = "e1", max_slots: int | None = None, priority: int = 42,
        t: float = 0.0) -> SlotRequest:
    return SlotRequest(id_, slots, priority, t, group, 1.0, max_slots)


def running(id_: str, agent_id: str, slots: int, *, group: str = "e1", priority: int = 42) -> RunningTask:
    return RunningTask(id_, priority, ((agent_id, tuple(f"{agent_id}-{i}" for i in range(slots))),), 0.0, group)


def placed(result) -> list[str]:  # noqa: ANN001
    return [a.allocation_id for a in result.assignments]


def test_a_group_never_holds_more_than_its_max_slots() -> None:
    reqs = [req(f"t{i}", t=i, max_slots=2) for i in range(4)]
    result = plan(reqs, [free_agent("a", 8)], [])
    assert placed(result) == ["t0", "t1"]
    assert result.capped == {"t2": (2, 2), "t3": (2, 2)}


def test_running_tasks_count_against_the_cap_and_are_not_stopped() -> None:
    reqs = [req("new1", t=1, max_slots=3), req("new2", t=2, max_slots=3)]
    result = plan(reqs, [free_agent("a", 8, used=2)], [running("old", "a", 2)])
    assert placed(result) == ["new1"]
    assert result.capped == {"new2": (3, 3)} and result.preempt == []
    # a cap lowered below what runs places nothing more, and stops nothing
    lowered = plan([req("new1", max_slots=1)], [free_agent("a", 8, used=2)], [running("old", "a", 2)])
    assert placed(lowered) == [] and lowered.preempt == [] and lowered.capped == {"new1": (1, 2)}


def test_the_cap_is_per_group_and_other_groups_take_the_room() -> None:
    reqs = [req("a0", t=0, group="A", max_slots=1), req("a1", t=1, group="A", max_slots=1),
            req("b0", t=2, group="B"), req("b1", t=3, group="B")]
    result = plan(reqs, [free_agent("x", 3)], [])
    assert placed(result) == ["a0", "b0", "b1"] and list(result.capped) == ["a1"]


def test_a_task_larger_than_the_room_left_under_the_cap_lets_a_smaller_one_of_its_group_go() -> None:
    reqs = [req("big", 2, t=0, max_slots=3), req("big2", 2, t=1, max_slots=3), req("small", 1, t=2, max_slots=3)]
    result = plan(reqs, [free_agent("a", 8)], [])
    assert placed(result) == ["big", "small"] and result.capped == {"big2": (3, 3)}


def test_zero_slot_tasks_are_never_capped() -> None:
    result = plan([req("z1", 0, max_slots=0), req("z2", 0, max_slots=0)], [free_agent("a", 1)], [])
    assert placed(result) == ["z1", "z2"] and result.capped == {}


def test_a_capped_request_preempts_nothing() -> None:
    agents = [free_agent("a", 2, used=2)]
    tasks = [running("mine", "a", 1, group="A", priority=60), running("other", "a", 1, group="B", priority=60)]
    result = plan([req("urgent", 1, group="A", max_slots=1, priority=1)], agents, tasks, preemption=True)
    assert result.preempt == [] and result.capped == {"urgent": (1, 1)}
    # the same request without a cap preempts as before
    assert plan([req("urgent", 1, group="A", priority=1)], agents, tasks, preemption=True).preempt != []


def test_fair_share_honours_the_cap() -> None:
    reqs = [req(f"a{i}", t=i, group="A", max_slots=1) for i in range(3)] + \
        [req(f"b{i}", t=10 + i, group="B") for i in range(3)]
    result = plan(reqs, [free_agent("x", 4)], [], scheduler="fair_share")
    assert sorted(placed(result)) == ["a0", "b0", "b1", "b2"]


def test_the_reason_names_max_slots() -> None:
    why = max_slots_reason(1, 2, 2)
    assert why.kind == WaitKind.MAX_SLOTS
    assert why.text == "waiting on the experiment's max_slots: its trials hold 2 of 2 slot(s), the trial needs 1"
    never = max_slots_reason(4, 2, 0)
    assert never.text.startswith("the experiment's max_slots (2) is less than the trial's 4 slots")


def test_the_pass_places_up_to_max_slots_and_stores_the_reason(fx: RecordingEffects, database: Database,
                                                               loop: asyncio.AbstractEventLoop) -> None:
    hub = AgentHub()
    hub.attach(AgentConnection("a1", "http://m", "127.0.0.1", loop, last_heartbeat=0.0))
    with database.session() as s:
        agent(s, "a1", slots=4)
        capped = _grid(fx, s, max_slots=1)
        free = _grid(fx, s, max_slots=None)
        s.flush()
        planned = placement.plan(fx, s, hub)
        by_exp = {e.id: [a for t in trials_of(s, e) for a in allocations_of(s, t)] for e in (capped, free)}
        placed_ids = {aid for aid, _ in planned}
        assert len(placed_ids & {a.id for a in by_exp[capped.id]}) == 1
        assert {a.id for a in by_exp[free.id]} <= placed_ids  # the other experiment takes the room
        waiting = [a for a in by_exp[capped.id] if a.id not in placed_ids]
        assert len(waiting) == 2 and all(a.wait_kind == WaitKind.MAX_SLOTS for a in waiting)
        assert "max_slots" in waiting[0].wait_reason


def _grid(fx: RecordingEffects, s: Session, *, max_slots: int | None):  # noqa: ANN202
    text = ("name: capped\nentrypoint: python3 train.py\n"
            "searcher: {name: grid, metric: loss, max_length: 10}\n"
            "hyperparameters: {lr: {type: categorical, vals: [1, 2, 3]}}\n"
            + (f"resources: {{max_slots: {max_slots}}}\n" if max_slots is not None else ""))
    return experiments_service.create(fx, s, owner(s), config_text=text, files=[], activate=True)

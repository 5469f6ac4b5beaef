"""An experiment's resources.max_slots: the pure scheduler never lets a group hold more slots than its
cap, and running tasks count and are never preempted for it (the wait reason naming max_slots, and the
scheduling pass storing it: tests/master/cluster/test_wait_reasons.py)."""

from __future__ import annotations

from pedl.scheduling.scheduler import AgentSnapshot, RunningTask, SlotRequest, plan


def free_agent(id_: str, slots: int, used: int = 0) -> AgentSnapshot:
    ids = tuple(f"{id_}-{i}" for i in range(slots))
    return AgentSnapshot(id_, ids, ids[used:])


def req(
    id_: str, slots: int = 1, *, group: str = "e1", max_slots: int | None = None, priority: int = 42, t: float = 0.0
) -> SlotRequest:
    return SlotRequest(id_, slots, priority, t, group, 1.0, max_slots)


def running(id_: str, agent_id: str, slots: int, *, group: str = "e1", priority: int = 42) -> RunningTask:
    return RunningTask(id_, priority, ((agent_id, tuple(f"{agent_id}-{i}" for i in range(slots))),), 0.0, group)


def placed(result) -> list[str]:
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
    reqs = [
        req("a0", t=0, group="A", max_slots=1),
        req("a1", t=1, group="A", max_slots=1),
        req("b0", t=2, group="B"),
        req("b1", t=3, group="B"),
    ]
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
    reqs = [req(f"a{i}", t=i, group="A", max_slots=1) for i in range(3)] + [
        req(f"b{i}", t=10 + i, group="B") for i in range(3)
    ]
    result = plan(reqs, [free_agent("x", 4)], [], scheduler="fair_share")
    assert sorted(placed(result)) == ["a0", "b0", "b1", "b2"]

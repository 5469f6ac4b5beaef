"""The snapshot the provisioner and the simulator share: lifecycle states, free slots from held
placements, zero-slot work, idle tracking, lost agents, and work on interrupted instances."""

from __future__ import annotations

from pedl.scheduling.scaling_decider import LiveState, PendingTask
from pedl.scheduling.snapshot import HeldTask, InstanceFacts, snapshot


def facts(inst_id: str, state: LiveState = "running", slots: int = 4, **kw) -> InstanceFacts:
    return InstanceFacts(inst_id, "g5.12xlarge", state, launched_at=kw.pop("launched_at", 100.0), slots=slots, **kw)


def held(alloc_id: str, *placements: tuple[str, int], queued_at: float = 50.0) -> HeldTask:
    return HeldTask(alloc_id, sum(n for _, n in placements), queued_at, tuple(placements))


def test_each_live_state_maps_to_the_deciders_and_the_facts_carry_over() -> None:
    instances = [
        facts("r", "requested", spot=True, launched_at=10.0),
        facts("s", "starting", slots=8),
        facts("u", "running"),
        facts("t", "terminating"),
    ]
    views, pending = snapshot(1000.0, instances, [], [], {})
    assert [(v.id, v.state) for v in views] == [
        ("r", "requested"),
        ("s", "starting"),
        ("u", "running"),
        ("t", "terminating"),
    ]
    r, s = views[0], views[1]
    assert (r.instance_type, r.launched_at, r.slots, r.spot) == ("g5.12xlarge", 10.0, 4, True)
    assert (s.slots, s.spot, s.interrupted, s.disconnected_since) == (8, False, False, None)
    assert pending == []


def test_free_slots_are_what_held_placements_leave_and_never_below_zero() -> None:
    instances = [facts("a"), facts("b"), facts("c", slots=2), facts("d")]
    tasks = [
        held("x", ("a", 1)),
        held("y", ("a", 2)),
        held("gang", ("b", 4), ("c", 2)),
        held("over", ("c", 1)),
    ]  # c holds more than it has (a smaller agent re-registered)
    views, _ = snapshot(1000.0, instances, tasks, [], {})
    by_id = {v.id: v for v in views}
    assert (by_id["a"].free_slots, by_id["a"].busy) == (1, True)
    assert (by_id["b"].free_slots, by_id["b"].busy) == (0, True)
    assert by_id["c"].free_slots == 0
    assert (by_id["d"].free_slots, by_id["d"].busy) == (4, False)


def test_a_zero_slot_task_makes_its_agent_busy_with_every_slot_free() -> None:
    idle: dict[str, float] = {}
    views, _ = snapshot(1000.0, [facts("a")], [held("cpu", ("a", 0))], [], idle)
    assert (views[0].busy, views[0].free_slots, views[0].idle_since) == (True, 4, None)
    assert idle == {}


def test_idle_since_counts_from_the_first_snapshot_that_sees_the_instance_idle() -> None:
    idle: dict[str, float] = {}
    a = facts("a")
    (view,), _ = snapshot(1000.0, [a], [], [], idle)
    assert view.idle_since == 1000.0 and idle == {"a": 1000.0}
    (view,), _ = snapshot(1100.0, [a], [], [], idle)  # still idle: the first sighting stands
    assert view.idle_since == 1000.0
    (view,), _ = snapshot(1200.0, [a], [held("x", ("a", 1))], [], idle)  # busy: cleared
    assert view.idle_since is None and idle == {}
    (view,), _ = snapshot(1300.0, [a], [], [], idle)  # idle again: counts afresh
    assert view.idle_since == 1300.0


def test_only_a_running_instance_is_idle() -> None:
    idle = {"t": 900.0, "s": 900.0}
    views, _ = snapshot(
        1000.0, [facts("s", "starting"), facts("t", "terminating"), facts("r", "requested")], [], [], idle
    )
    assert [v.idle_since for v in views] == [None, None, None]
    assert idle == {}


def test_a_running_instance_without_a_connected_agent_is_disconnected() -> None:
    instances = [
        facts("gone", agent_connected=False, agent_disconnected_at=700.0),
        facts("unknown", agent_connected=False),  # no record of when: from now
        facts("up"),
        facts("booting", "starting", agent_connected=False),
    ]
    views, _ = snapshot(1000.0, instances, [], [], {})
    assert [v.disconnected_since for v in views] == [700.0, 1000.0, None, None]


def test_work_on_an_interrupted_instance_waits_again_after_the_waiting_tasks() -> None:
    instances = [facts("spot", spot=True, interrupted=True), facts("od")]
    tasks = [
        held("on-spot", ("spot", 2), queued_at=5.0),
        held("on-od", ("od", 1)),
        held("gang", ("od", 4), ("spot", 4), queued_at=7.0),
    ]
    waiting = [PendingTask("new", 1, 900.0)]
    views, pending = snapshot(1000.0, instances, tasks, waiting, {})
    assert views[0].interrupted and not views[1].interrupted
    assert pending == [PendingTask("new", 1, 900.0), PendingTask("on-spot", 2, 5.0), PendingTask("gang", 8, 7.0)]
    assert waiting == [PendingTask("new", 1, 900.0)]  # the caller's list is left alone


def test_a_snapshot_of_some_instances_gives_them_the_views_of_a_full_one() -> None:
    # the simulator relies on this: it takes the snapshot again only of the instances that changed
    instances = [facts("a"), facts("b", interrupted=True), facts("c", "starting"), facts("d")]
    tasks = [held("x", ("a", 1)), held("gang", ("a", 3), ("d", 4))]
    full_idle: dict[str, float] = {"b": 900.0}
    full, _ = snapshot(1000.0, instances, tasks, [], full_idle)
    part_idle: dict[str, float] = {"b": 900.0}
    part, _ = snapshot(1000.0, [instances[0], instances[1]], tasks[:2], [], part_idle)
    assert part == full[:2]
    assert part_idle == {"b": 900.0}

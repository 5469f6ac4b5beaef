"""The move planner: what it moves, what it never moves, and when a move does not pay."""

from __future__ import annotations

from pedl.scheduling.consolidation import (
    HostView,
    MovePolicy,
    SpotOffer,
    TaskView,
    moves_left,
    plan_moves,
)

NOW = 100_000.0
P = MovePolicy(
    max_moves_per_hour=6,
    min_runtime_between_moves=1800,
    min_saving_per_hour=0.5,
    checkpoint_cost=60,
    restore_cost=60,
    boot_time=90,
    keep_free_slots=0,
)
HOURS = 3600.0


def host(
    hid: str,
    free: int,
    *,
    slots: int = 4,
    price: float = 12.24,
    spot: bool = False,
    ready: bool = True,
    draining: bool = False,
) -> HostView:
    return HostView(hid, "p3.8xlarge", slots, free, price, spot=spot, ready=ready, draining=draining)


def task(
    aid: str,
    *placements: tuple[str, int],
    remaining: float | None = 10 * HOURS,
    movable: bool = True,
    since: float = NOW - 2 * HOURS,
) -> TaskView:
    return TaskView(aid, tuple(placements), movable, remaining, since)


def test_two_half_empty_instances_become_one() -> None:
    plan = plan_moves(NOW, P, [host("a", 2), host("b", 2)], [task("t1", ("a", 2)), task("t2", ("b", 2))])
    assert [(m.allocation_id, m.source, m.target) for m in plan.moves] == [("t1", ("a",), ("b",))]
    assert [d[0] for d in plan.drain] == ["a"]
    move = plan.moves[0]
    assert move.saving_per_hour == 12.24 and move.reason == "moved from instance a to b to save $12.24/h"
    # ten hours of a p3.8xlarge, less the minute it checkpoints and the two minutes more b runs
    assert abs(move.saving - 12.24 * (10 - 1 / 60 - 2 / 60)) < 0.01


def test_the_emptiest_instance_is_emptied_and_a_full_one_never_receives() -> None:
    hosts = [host("full", 0), host("three", 1), host("one", 3)]
    tasks = [task("f", ("full", 4)), task("x", ("three", 3)), task("y", ("one", 1))]
    plan = plan_moves(NOW, P, hosts, tasks)
    assert [(m.allocation_id, m.target) for m in plan.moves] == [("y", ("three",))]
    assert [d[0] for d in plan.drain] == ["one"]


def test_the_budget_counts_the_last_hours_moves() -> None:
    hosts, tasks = [host("a", 2), host("b", 2)], [task("t1", ("a", 2)), task("t2", ("b", 2))]
    one = MovePolicy(max_moves_per_hour=1, keep_free_slots=0)
    assert plan_moves(NOW, one, hosts, tasks, recent_moves=[NOW - 600]).moves == []
    assert len(plan_moves(NOW, one, hosts, tasks, recent_moves=[NOW - HOURS - 1]).moves) == 1
    assert moves_left(NOW, P, [NOW - 10, NOW - 20, NOW - 2 * HOURS]) == 4
    # an instance whose trials exceed what is left of the budget is not emptied half-way
    three = [host("a", 1), host("b", 3)]
    assert (
        plan_moves(
            NOW,
            MovePolicy(max_moves_per_hour=2, keep_free_slots=0),
            three + [host("c", 4, slots=8)],
            [task("1", ("a", 1)), task("2", ("a", 1)), task("3", ("a", 1)), task("4", ("b", 1))],
        )
        .moves[0]
        .allocation_id
        == "4"
    )


def test_a_trial_that_never_checkpointed_or_opted_out_or_of_unknown_length_never_moves() -> None:
    hosts = [host("a", 2), host("b", 2)]
    for t1 in (task("t1", ("a", 2), movable=False), task("t1", ("a", 2), remaining=None)):
        plan = plan_moves(NOW, P, hosts, [t1, task("t2", ("b", 2), movable=False)])
        assert plan.moves == [] and plan.drain == []


def test_a_recently_started_or_moved_trial_waits_and_the_plan_says_until_when() -> None:
    hosts = [host("a", 2), host("b", 2)]
    tasks = [task("t1", ("a", 2), since=NOW - 600), task("t2", ("b", 2), since=NOW - 300)]
    plan = plan_moves(NOW, P, hosts, tasks)
    assert plan.moves == [] and plan.next_check_at == NOW - 600 + 1800


def test_savings_below_the_threshold_or_the_move_cost_are_not_made() -> None:
    hosts = [host("a", 2), host("b", 2)]
    # two minutes left: the checkpoint and restore cost more than the instance-minutes saved
    short = [task("t1", ("a", 2), remaining=120), task("t2", ("b", 2), remaining=100)]
    assert plan_moves(NOW, P, hosts, short).moves == []
    cheap = [host("a", 2, price=0.4), host("b", 2, price=0.4)]
    assert plan_moves(NOW, P, cheap, [task("t1", ("a", 2)), task("t2", ("b", 2))]).moves == []
    assert plan_moves(NOW, MovePolicy(enabled=False), hosts, [task("t1", ("a", 2)), task("t2", ("b", 2))]).moves == []


def test_a_trial_never_moves_to_a_dearer_slot_or_to_an_instance_not_ready_or_draining() -> None:
    tasks = [task("t1", ("a", 2))]
    assert plan_moves(NOW, P, [host("a", 2, price=4.0), host("b", 4, price=12.24)], tasks).moves == []
    assert plan_moves(NOW, P, [host("a", 2), host("b", 4, ready=False)], tasks).moves == []
    assert plan_moves(NOW, P, [host("a", 2), host("b", 4, draining=True)], tasks).moves == []


def test_a_gang_moves_whole_or_not_at_all() -> None:
    # a gang of 8 over two 4-slot instances; an empty 8-slot instance at the same price per slot takes it
    gang = task("g", ("a", 4), ("b", 4))
    hosts = [host("a", 0), host("b", 0), host("c", 8, slots=8, price=24.48), host("d", 0)]
    busy = task("d1", ("d", 4))
    plan = plan_moves(NOW, P, hosts, [gang, busy])
    assert plan.moves == []  # c was empty: moving there saves nothing
    hosts[2] = host("c", 4, slots=8, price=24.48)
    plan = plan_moves(NOW, P, hosts, [gang, busy, task("c1", ("c", 4))])
    # 4 free slots cannot take 8, and the gang is never split (d's trial fits there instead)
    assert [(m.allocation_id, m.target) for m in plan.moves] == [("d1", ("c",))]
    # two partly used instances whose free slots hold the gang only together: still not split
    hosts = [host("a", 0), host("b", 0), host("e", 4, slots=8, price=24.48), host("f", 4, slots=8, price=24.48)]
    plan = plan_moves(NOW, P, hosts, [gang, task("e1", ("e", 4)), task("f1", ("f", 4))])
    assert [(m.allocation_id, m.target) for m in plan.moves] == [("e1", ("f",))]  # the gang stays
    # a gang of 8 half-filling two 8-slot instances moves whole onto two wholly free 4-slot ones
    halves = task("g", ("a", 4), ("b", 4))
    hosts = [host("a", 4, slots=8, price=24.48), host("b", 4, slots=8, price=24.48), host("x", 4), host("y", 4)]
    plan = plan_moves(NOW, P, hosts, [halves])
    assert [(m.allocation_id, sorted(m.target)) for m in plan.moves] == [("g", ["x", "y"])]
    assert sorted(d[0] for d in plan.drain) == ["a", "b"] and plan.moves[0].saving_per_hour == 24.48


def test_a_gang_that_leaves_empties_all_its_instances() -> None:
    gang = task("g", ("a", 2), ("b", 2))
    hosts = [host("a", 2), host("b", 2), host("c", 0, slots=8, price=24.48)]
    hosts[2] = host("c", 4, slots=8, price=24.48)
    plan = plan_moves(NOW, P, hosts, [gang, task("c1", ("c", 4))])
    assert [(m.allocation_id, m.target) for m in plan.moves] == [("g", ("c",))]
    assert sorted(d[0] for d in plan.drain) == ["a", "b"]
    assert plan.moves[0].saving_per_hour == 2 * 12.24


def test_spot_first_asks_for_a_replacement_then_moves_onto_it() -> None:
    offers = [SpotOffer("p3.8xlarge", 4, 12.24 * 0.35)]
    od = host("od", 3)
    plan = plan_moves(NOW, P, [od], [task("t", ("od", 1))], spot_offers=offers, max_new_instances=5)
    assert plan.moves == [] and [(t, n) for t, n, _ in plan.launch] == [("p3.8xlarge", 1)]
    # while spot capacity is there, the on-demand instance takes no new work (nothing cordoned without it)
    assert [c for c, _ in plan.cordon] == ["od"] and "new work goes to spot" in plan.cordon[0][1]
    assert plan_moves(NOW, P, [od], [task("t", ("od", 1))], max_new_instances=5).cordon == []
    # a trial that cannot move yet: no replacement now, and a look again when it can
    young = plan_moves(NOW, P, [od], [task("t", ("od", 1), since=NOW - 60)], spot_offers=offers, max_new_instances=5)
    assert young.launch == [] and young.next_check_at == NOW - 60 + 1800
    assert "on-demand instance od" in plan.launch[0][2]
    # while the replacement boots, it is not asked for again
    booting = host("sir-1", 4, spot=True, price=12.24 * 0.35, ready=False)
    plan = plan_moves(NOW, P, [od, booting], [task("t", ("od", 1))], spot_offers=offers, max_new_instances=5)
    assert plan.launch == [] and plan.moves == []
    # once it is ready, the trial moves onto it and the on-demand instance drains
    ready = host("sir-1", 4, spot=True, price=12.24 * 0.35)
    plan = plan_moves(NOW, P, [od, ready], [task("t", ("od", 1))], spot_offers=offers, max_new_instances=5)
    assert [(m.allocation_id, m.target) for m in plan.moves] == [("t", ("sir-1",))]
    assert plan.moves[0].saving_per_hour == round(12.24 * 0.65, 4) and plan.launch == []
    # no room to launch, or a trial too short to pay for the boot: no replacement
    assert plan_moves(NOW, P, [od], [task("t", ("od", 1))], spot_offers=offers).launch == []
    assert (
        plan_moves(NOW, P, [od], [task("t", ("od", 1), remaining=200)], spot_offers=offers, max_new_instances=5).launch
        == []
    )


def test_the_pool_keeps_free_slots_for_new_work() -> None:
    hosts, tasks = (
        [host("a", 2), host("b", 2), host("c", 3)],
        [task("t1", ("a", 2)), task("t2", ("b", 2)), task("t3", ("c", 1))],
    )
    keep = MovePolicy(keep_free_slots=3)
    # 7 free slots; emptying c (4 slots) leaves 3: allowed once, and then no more
    plan = plan_moves(NOW, keep, hosts, tasks)
    assert [d[0] for d in plan.drain] == ["c"]
    assert plan_moves(NOW, MovePolicy(keep_free_slots=4), hosts, tasks).drain == []


def test_a_gang_on_an_on_demand_instance_gets_whole_spot_replacements() -> None:
    offers = [SpotOffer("p3.8xlarge", 4, 12.24 * 0.35)]
    gang = task("g", ("od", 4), ("sp", 4))  # half on an on-demand fallback, half on spot
    hosts = [host("od", 0), host("sp", 0, spot=True, price=12.24 * 0.35)]
    plan = plan_moves(NOW, P, hosts, [gang], spot_offers=offers, max_new_instances=5)
    assert [(t, n) for t, n, _ in plan.launch] == [("p3.8xlarge", 2)]
    # with two wholly free spot instances ready, the gang moves whole and both its old instances go
    ready = [host("s1", 4, spot=True, price=12.24 * 0.35), host("s2", 4, spot=True, price=12.24 * 0.35)]
    plan = plan_moves(NOW, P, hosts + ready, [gang], spot_offers=offers, max_new_instances=5)
    assert [(m.allocation_id, sorted(m.target)) for m in plan.moves] == [("g", ["s1", "s2"])]

"""The pure scheduler: priority then FIFO, best/worst fit, all-or-nothing, backfill, gangs over
whole agents, zero-slot tasks."""

from __future__ import annotations

import random

import pytest

from pedl.scheduling.scheduler import (
    AgentSnapshot,
    Assignment,
    SlotRequest,
    order_requests,
    plan,
    schedule,
)


def agent(agent_id: str, slots: int, free: int | None = None) -> AgentSnapshot:
    ids = tuple(str(i) for i in range(slots))
    return AgentSnapshot(agent_id, ids, ids if free is None else ids[slots - free :])


def req(alloc_id: str, slots: int = 1, priority: int = 42, queued_at: float = 0.0) -> SlotRequest:
    return SlotRequest(alloc_id, slots, priority, queued_at)


def placed(out: list[Assignment]) -> dict[str, list[tuple[str, list[str]]]]:
    return {a.allocation_id: a.placements for a in out}


def order(out: list[Assignment]) -> list[str]:
    return [a.allocation_id for a in out]


# -- order ------------------------------------------------------------------------------------


def test_lower_priority_number_goes_first() -> None:
    out = schedule([req("low", priority=60), req("urgent", priority=1), req("mid", priority=42)], [agent("a", 1)])
    assert order(out) == ["urgent"]


def test_fifo_within_a_priority() -> None:
    requests = [req("third", queued_at=30), req("first", queued_at=10), req("second", queued_at=20)]
    assert order(schedule(requests, [agent("a", 2)])) == ["first", "second"]
    assert order(schedule(requests, [agent("a", 3)])) == ["first", "second", "third"]


def test_priority_beats_age() -> None:
    requests = [req("old", priority=50, queued_at=1), req("new", priority=10, queued_at=99)]
    assert order(schedule(requests, [agent("a", 1)])) == ["new"]


def test_order_requests_is_stable_by_id_for_ties() -> None:
    requests = [req("b", queued_at=5), req("a", queued_at=5), req("c", priority=1, queued_at=9)]
    assert [r.allocation_id for r in order_requests(requests)] == ["c", "a", "b"]


def test_input_order_does_not_matter() -> None:
    requests = [req(f"r{i}", slots=1 + i % 3, priority=10 * (i % 4) + 1, queued_at=i) for i in range(20)]
    agents = [agent(f"a{i}", 4) for i in range(5)]
    expected = schedule(requests, agents)
    for seed in range(5):
        shuffled = requests[:]
        random.Random(seed).shuffle(shuffled)
        assert schedule(shuffled, agents) == expected


# -- fitting -----------------------------------------------------------------------------------


def test_best_fit_picks_the_tightest_agent() -> None:
    agents = [agent("big", 8), agent("small", 2), agent("medium", 4)]
    assert placed(schedule([req("t", 2)], agents, "best")) == {"t": [("small", ["0", "1"])]}
    assert placed(schedule([req("t", 3)], agents, "best")) == {"t": [("medium", ["0", "1", "2"])]}


def test_worst_fit_picks_the_emptiest_agent() -> None:
    agents = [agent("big", 8), agent("small", 2), agent("medium", 4)]
    assert placed(schedule([req("t", 2)], agents, "worst")) == {"t": [("big", ["0", "1"])]}


def test_fit_counts_free_slots_not_total() -> None:
    # "big" has 8 slots but only 2 free: it is the best fit for 2
    agents = [agent("big", 8, free=2), agent("mid", 4)]
    assert placed(schedule([req("t", 2)], agents, "best"))["t"][0][0] == "big"
    assert placed(schedule([req("t", 2)], agents, "worst"))["t"][0][0] == "mid"


def test_only_free_slots_are_handed_out() -> None:
    a = agent("a", 4, free=2)
    out = placed(schedule([req("t", 2)], [a]))
    assert set(out["t"][0][1]) == set(a.free_slot_ids)


def test_best_and_worst_spread_differently() -> None:
    agents = [agent("a", 4), agent("b", 4)]
    requests = [req(f"r{i}", 1, queued_at=i) for i in range(2)]
    best = {p[0][0] for p in placed(schedule(requests, agents, "best")).values()}
    worst = {p[0][0] for p in placed(schedule(requests, agents, "worst")).values()}
    assert len(best) == 1  # packed onto one agent
    assert worst == {"a", "b"}  # spread


# -- all or nothing, backfill ----------------------------------------------------------------------


def test_never_a_partial_placement() -> None:
    assert schedule([req("t", 3)], [agent("a", 2), agent("b", 2, free=1)]) == []
    assert schedule([req("t", 5)], [agent("a", 4, free=4), agent("b", 4, free=3)]) == []


def test_request_bigger_than_the_cluster_waits() -> None:
    assert schedule([req("huge", 100)], [agent("a", 8), agent("b", 8)]) == []


def test_backfill_smaller_requests_when_a_big_one_does_not_fit() -> None:
    requests = [req("big", 8, queued_at=1), req("small", 1, queued_at=2), req("pair", 2, queued_at=3)]
    out = placed(schedule(requests, [agent("a", 4)]))
    assert "big" not in out
    assert set(out) == {"small", "pair"}


def test_a_slot_is_never_given_twice() -> None:
    requests = [req(f"r{i}", 1 + i % 2, queued_at=i) for i in range(10)]
    out = schedule(requests, [agent("a", 3), agent("b", 2)])
    given = [(agent_id, s) for a in out for agent_id, slots in a.placements for s in slots]
    assert len(given) == len(set(given)) == 5


# -- gangs ------------------------------------------------------------------------------------


def test_gang_across_several_whole_agents() -> None:
    out = placed(schedule([req("g", 8)], [agent("a", 4), agent("b", 4), agent("c", 2)]))
    placements = out["g"]
    assert sorted(a for a, _ in placements) == ["a", "b"]
    assert all(len(slots) == 4 for _, slots in placements)


def test_gang_uses_only_completely_free_agents() -> None:
    out = schedule([req("g", 8)], [agent("a", 4), agent("b", 4, free=3), agent("c", 4)])
    assert placed(out) == {"g": [("a", ["0", "1", "2", "3"]), ("c", ["0", "1", "2", "3"])]}


def test_gang_must_add_up_exactly() -> None:
    # 6 slots from whole 4-slot agents would strand 2 slots of a second agent; it waits instead
    assert schedule([req("g", 6)], [agent("a", 4), agent("b", 4)]) == []
    out = placed(schedule([req("g", 6)], [agent("a", 4), agent("b", 4), agent("c", 2)]))
    assert sorted((a, len(s)) for a, s in out["g"]) == [("a", 4), ("c", 2)]


def test_gang_then_more_work() -> None:
    requests = [req("g", 8, queued_at=1), req("one", 1, queued_at=2)]
    out = placed(schedule(requests, [agent("a", 4), agent("b", 4), agent("c", 1)]))
    assert sorted(a for a, _ in out["g"]) == ["a", "b"]
    assert out["one"] == [("c", ["0"])]


def test_single_agent_preferred_over_gang() -> None:
    out = placed(schedule([req("t", 4)], [agent("a", 2), agent("b", 2), agent("c", 4)]))
    assert out == {"t": [("c", ["0", "1", "2", "3"])]}


# -- zero-slot requests -----------------------------------------------------------------------


def test_zero_slot_request_goes_on_the_fullest_agent() -> None:
    out = placed(schedule([req("z", 0)], [agent("roomy", 4), agent("busy", 4, free=1)]))
    assert out == {"z": [("busy", [])]}


def test_zero_slot_request_fits_on_a_full_agent() -> None:
    assert placed(schedule([req("z", 0)], [agent("full", 2, free=0)])) == {"z": [("full", [])]}


def test_zero_slot_request_needs_some_agent() -> None:
    assert schedule([req("z", 0)], []) == []


def test_zero_slot_request_behind_one_that_does_not_fit() -> None:
    # a request that cannot be placed must not stop the zero-slot one queued after it
    requests = [req("gpu", 1, queued_at=1), req("z", 0, queued_at=2)]
    assert placed(schedule(requests, [agent("full", 1, free=0)])) == {"z": [("full", [])]}


def test_zero_slot_requests_take_no_slots() -> None:
    requests = [req("z1", 0, queued_at=1), req("z2", 0, queued_at=2), req("t", 2, queued_at=3)]
    out = placed(schedule(requests, [agent("a", 2)]))
    assert out["t"] == [("a", ["0", "1"])]
    assert out["z1"] == [("a", [])] and out["z2"] == [("a", [])]


def test_zero_slot_requests_stop_at_each_agents_cap() -> None:
    """limits.max_zero_slot_tasks_per_agent (Determined: 100): the fullest agent under the cap takes a
    zero-slot request, counting those it runs and those this pass places; with every agent at it the rest
    are refused (they wait), and a request of slots still goes on a capped agent."""
    busy = AgentSnapshot("busy", ("0", "1"), ("1",), zero_slot_tasks=2)  # the fullest, at the cap already
    roomy = AgentSnapshot("roomy", ("0", "1"), ("0", "1"), zero_slot_tasks=1)
    requests = [
        req("z1", 0, queued_at=1),
        req("z2", 0, queued_at=2),
        req("z3", 0, queued_at=3),
        req("t", 1, queued_at=4),
    ]
    result = plan(requests, [busy, roomy], [], max_zero_slot_per_agent=2)
    assert placed(result.assignments) == {"z1": [("roomy", [])], "t": [("busy", ["1"])]}
    assert result.zero_capped == ["z2", "z3"]
    # no cap (as the simulator schedules): the fullest agent takes them all
    uncapped = placed(schedule(requests[:3], [busy, roomy]))
    assert {places[0][0] for places in uncapped.values()} == {"busy"}
    # no agent at all is no cap's doing
    assert plan([req("z", 0)], [], [], max_zero_slot_per_agent=2).zero_capped == []


# -- many agents and requests ----------------------------------------------------------------------


@pytest.mark.parametrize("fitting", ["best", "worst"])
def test_many_agents_and_requests_are_consistent(fitting: str) -> None:
    rng = random.Random(1234)
    agents = []
    for i in range(300):
        size = rng.choice([1, 2, 4, 8])
        agents.append(agent(f"agent-{i:03d}", size, free=rng.randint(0, size)))
    requests = [
        req(f"r{i:04d}", rng.choice([0, 1, 1, 2, 4, 8, 16]), rng.randint(1, 99), rng.random()) for i in range(3000)
    ]
    out = schedule(requests, agents, fitting)  # type: ignore[arg-type]

    free = {a.id: set(a.free_slot_ids) for a in agents}
    total = {a.id: len(a.slot_ids) for a in agents}
    by_id = {r.allocation_id: r for r in requests}
    used: set[tuple[str, str]] = set()
    assert len({a.allocation_id for a in out}) == len(out)  # nobody placed twice
    for a in out:
        r = by_id[a.allocation_id]
        got = sum(len(slots) for _, slots in a.placements)
        assert got == r.slots_needed  # all or nothing
        if len(a.placements) > 1:  # a gang: whole agents only
            for agent_id, slots in a.placements:
                assert len(slots) == total[agent_id] == len(free[agent_id])
        for agent_id, slots in a.placements:
            for s in slots:
                assert s in free[agent_id]
                assert (agent_id, s) not in used
                used.add((agent_id, s))
    # the pool is large enough that plenty got placed, and the free slots are all used up or too
    # few for every request that is still waiting
    assert len(out) > 300
    leftover = {aid: len(free[aid]) - sum(1 for (x, _) in used if x == aid) for aid in free}
    waiting = [r for r in requests if r.allocation_id not in {a.allocation_id for a in out}]
    assert all(r.slots_needed > 0 for r in waiting)
    biggest_hole = max(leftover.values())
    assert all(r.slots_needed > biggest_hole for r in waiting)


def test_priority_order_holds_when_everything_competes_for_one_slot() -> None:
    requests = [req(f"r{i:03d}", 1, priority=1 + (i * 37) % 99, queued_at=i) for i in range(200)]
    out = schedule(requests, [agent("a", 1)])
    winner = min(requests, key=lambda r: (r.priority, r.queued_at))
    assert order(out) == [winner.allocation_id]


def test_a_partly_used_agent_goes_before_a_whole_one_with_the_same_room() -> None:
    # both have 2 free; the whole 2-slot agent is kept for the gang of 6 (4 + 2) behind
    agents = [agent("whole2", 2), agent("used4", 4, free=2), agent("whole4", 4)]
    out = placed(schedule([req("t", 2, queued_at=1), req("g", 6, queued_at=2)], agents))
    assert [a for a, _ in out["t"]] == ["used4"]
    assert sorted(a for a, _ in out["g"]) == ["whole2", "whole4"]

"""Spot agents are filled first: a task goes on a spot agent with room before an on-demand one,
within the fitting policy (best or worst fit among the spot agents, then among the on-demand ones)."""

from __future__ import annotations

from pedl.scheduling.scheduler import AgentSnapshot, SlotRequest, plan, schedule


def agent(agent_id: str, slots: int, free: int | None = None, *, spot: bool = False) -> AgentSnapshot:
    ids = tuple(str(i) for i in range(slots))
    return AgentSnapshot(agent_id, ids, ids if free is None else ids[slots - free :], spot=spot)


def req(alloc_id: str, slots: int = 1, queued_at: float = 0.0) -> SlotRequest:
    return SlotRequest(alloc_id, slots, 42, queued_at)


def where(out) -> dict[str, list[str]]:
    return {a.allocation_id: [agent_id for agent_id, _ in a.placements] for a in out}


def test_a_spot_agent_with_room_goes_before_a_tighter_on_demand_one() -> None:
    agents = [agent("od", 2), agent("spot", 8, spot=True)]
    assert where(schedule([req("t", 2)], agents, "best")) == {"t": ["spot"]}


def test_best_fit_among_spot_agents_then_on_demand() -> None:
    agents = [agent("od-2", 2), agent("spot-8", 8, spot=True), agent("spot-4", 4, spot=True)]
    assert where(schedule([req("t", 2)], agents, "best")) == {"t": ["spot-4"]}
    assert where(schedule([req("t", 2)], agents, "worst")) == {"t": ["spot-8"]}
    # only spot-8 has room for 5
    assert where(schedule([req("t", 5)], agents, "best")) == {"t": ["spot-8"]}


def test_on_demand_agents_take_what_spot_agents_cannot_hold() -> None:
    agents = [agent("spot", 4, free=1, spot=True), agent("od", 4)]
    out = where(schedule([req("a", 1, 1), req("b", 2, 2), req("c", 1, 3)], agents, "best"))
    assert out == {"a": ["spot"], "b": ["od"], "c": ["od"]}


def test_a_gang_takes_whole_spot_agents_first() -> None:
    agents = [agent("od-1", 4), agent("od-2", 4), agent("spot-1", 4, spot=True)]
    out = where(schedule([req("g", 8)], agents))
    assert sorted(out["g"]) == ["od-1", "spot-1"]


def test_without_spot_agents_the_fit_is_as_before() -> None:
    agents = [agent("big", 8), agent("small", 2)]
    assert where(schedule([req("t", 2)], agents, "best")) == {"t": ["small"]}
    assert where(schedule([req("t", 2)], agents, "worst")) == {"t": ["big"]}


def test_plan_prefers_spot_agents_too() -> None:
    agents = [agent("od", 1), agent("spot", 4, spot=True)]
    result = plan([req("t", 1)], agents, [], scheduler="fair_share")
    assert where(result.assignments) == {"t": ["spot"]}

"""The pool policies on top of fitting: priority preemption and max-min fair share."""

from __future__ import annotations

from pedl.scheduling.scheduler import AgentSnapshot, RunningTask, SlotRequest, fair_order, plan


def agent(id_: str, slots: int, used: int = 0) -> AgentSnapshot:
    ids = tuple(str(i) for i in range(slots))
    return AgentSnapshot(id_, ids, ids[used:])


def running(
    id_: str, priority: int, agent_id: str, slots: int, started: float = 0.0, group: str = "", preempting: bool = False
) -> RunningTask:
    return RunningTask(id_, priority, ((agent_id, tuple(str(i) for i in range(slots))),), started, group, preempting)


def req(id_: str, slots: int, priority: int = 42, t: float = 0.0, group: str = "", weight: float = 1.0) -> SlotRequest:
    return SlotRequest(id_, slots, priority, t, group, weight)


def test_an_urgent_task_preempts_the_least_urgent_newest_tasks_it_needs() -> None:
    agents = [agent("a", 4, used=4)]
    tasks = [
        running("old-low", 60, "a", 2, started=1.0),
        running("new-low", 60, "a", 1, started=5.0),
        running("mid", 50, "a", 1, started=3.0),
    ]
    result = plan([req("urgent", 2, priority=10)], agents, tasks, preemption=True)
    assert result.assignments == []
    # least urgent first (60 before 50), newest first among equals: new-low (1) then old-low (2)
    assert result.preempt == ["new-low", "old-low"]


def test_no_preemption_without_the_pool_setting_or_of_more_urgent_tasks() -> None:
    agents = [agent("a", 2, used=2)]
    assert plan([req("r", 2, priority=10)], agents, [running("x", 60, "a", 2)]).preempt == []
    assert plan([req("r", 2, priority=50)], agents, [running("x", 10, "a", 2)], preemption=True).preempt == []
    assert plan([req("r", 2, priority=50)], agents, [running("x", 50, "a", 2)], preemption=True).preempt == []


def test_a_command_notebook_shell_or_tensorboard_is_never_preempted() -> None:
    """They cannot checkpoint and come back: an urgent trial takes another agent's victim, or waits."""
    agents = [agent("a", 2, used=2), agent("b", 2, used=2)]
    notebook = RunningTask("nb", 60, (("a", ("0", "1")),), 0.0, preemptible=False)
    assert plan([req("r", 2, priority=10)], agents, [notebook, running("t", 60, "b", 2)], preemption=True).preempt == [
        "t"
    ]
    assert plan([req("r", 2, priority=10)], agents[:1], [notebook], preemption=True).preempt == []


def test_one_round_of_preemption_at_a_time() -> None:
    agents = [agent("a", 2, used=2), agent("b", 2, used=2)]
    tasks = [running("x", 60, "a", 2, preempting=True), running("y", 60, "b", 2)]
    assert plan([req("r1", 2, priority=10), req("r2", 2, priority=10)], agents, tasks, preemption=True).preempt == []


def test_what_fits_is_placed_instead_of_preempting() -> None:
    agents = [agent("a", 2, used=2), agent("b", 2)]
    result = plan([req("r", 2, priority=10)], agents, [running("x", 60, "a", 2)], preemption=True)
    assert [a.allocation_id for a in result.assignments] == ["r"] and result.preempt == []


def test_fair_share_interleaves_groups_by_usage_per_weight() -> None:
    reqs = [req(f"a{i}", 1, t=i, group="A") for i in range(4)] + [
        req(f"b{i}", 1, t=10 + i, group="B") for i in range(4)
    ]
    order = [r.allocation_id for r in fair_order(reqs, [])]
    assert order[:4] == ["a0", "b0", "a1", "b1"]
    # B already uses 2 slots: A goes first until even
    order = [r.allocation_id for r in fair_order(reqs, [running("rb", 42, "x", 2, group="B")])]
    assert order[:4] == ["a0", "a1", "a2", "b0"]  # at a tie (2 and 2) the earlier request goes first
    # weight 2 for B: it gets about two slots per one of A's
    weighted = [req(f"a{i}", 1, t=i, group="A") for i in range(6)] + [
        req(f"b{i}", 1, t=10 + i, group="B", weight=2.0) for i in range(6)
    ]
    first6 = [r.group for r in fair_order(weighted, [])][:6]
    assert first6.count("B") == 4 and first6.count("A") == 2


def test_fair_share_places_the_fair_order_on_a_full_pool() -> None:
    agents = [agent("a", 4)]
    reqs = [req(f"a{i}", 1, t=i, group="A") for i in range(4)] + [
        req(f"b{i}", 1, t=10 + i, group="B") for i in range(4)
    ]
    fifo = plan(reqs, agents, [])
    fair = plan(reqs, agents, [], scheduler="fair_share")
    assert [a.allocation_id for a in fifo.assignments] == ["a0", "a1", "a2", "a3"]
    assert sorted(a.allocation_id for a in fair.assignments) == ["a0", "a1", "b0", "b1"]

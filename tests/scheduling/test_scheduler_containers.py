"""A task that runs in a container goes only to agents that run containers; process tasks go
anywhere. Preemption for a container task takes victims only where it could then run. (The wait reason
of a pool without container agents: tests/master/cluster/test_wait_reasons.py.)"""

from __future__ import annotations

from pedl.scheduling.scheduler import AgentSnapshot, RunningTask, SlotRequest, plan, schedule


def agent(agent_id: str, slots: int, *, docker: bool, free: int | None = None) -> AgentSnapshot:
    ids = tuple(str(i) for i in range(slots))
    return AgentSnapshot(agent_id, ids, ids if free is None else ids[slots - free :], runs_containers=docker)


def req(alloc_id: str, slots: int = 1, *, image: bool, priority: int = 42, queued_at: float = 0.0) -> SlotRequest:
    return SlotRequest(alloc_id, slots, priority, queued_at, needs_containers=image)


def where(out) -> dict[str, list[str]]:
    return {a.allocation_id: [agent_id for agent_id, _ in a.placements] for a in out}


def test_best_fit_skips_an_agent_without_docker_for_a_container_task() -> None:
    # best fit would pick the 1-slot agent; it has no Docker, so the 4-slot one takes the task
    out = schedule([req("img", image=True)], [agent("plain", 1, docker=False), agent("docker", 4, docker=True)])
    assert where(out) == {"img": ["docker"]}


def test_process_tasks_still_go_anywhere_and_leave_docker_room() -> None:
    out = schedule(
        [req("img", 2, image=True, queued_at=1), req("proc", image=False, queued_at=0)],
        [agent("plain", 1, docker=False), agent("docker", 2, docker=True)],
    )
    assert where(out) == {"proc": ["plain"], "img": ["docker"]}


def test_a_container_task_waits_when_no_agent_runs_containers() -> None:
    assert schedule([req("img", image=True)], [agent("plain", 8, docker=False)]) == []
    assert schedule([req("none", 0, image=True)], [agent("plain", 8, docker=False)]) == []  # zero slots too


def test_a_gang_over_whole_agents_uses_docker_agents_only() -> None:
    agents = [agent("p1", 2, docker=False), agent("d1", 2, docker=True), agent("d2", 2, docker=True)]
    assert sorted(where(schedule([req("gang", 4, image=True)], agents))["gang"]) == ["d1", "d2"]
    assert schedule([req("gang", 6, image=True)], agents) == []  # p1 cannot make up the rest


def test_preemption_for_a_container_task_picks_victims_where_it_can_run() -> None:
    agents = [agent("plain", 1, docker=False, free=0), agent("docker", 1, docker=True, free=0)]
    running = [
        RunningTask("on-plain", 60, (("plain", ("0",)),), started_at=2.0),
        RunningTask("on-docker", 60, (("docker", ("0",)),), started_at=1.0),
    ]
    result = plan([req("urgent-img", image=True, priority=1)], agents, running, preemption=True)
    # on-plain started later (it would lose less work) but freeing it would not let the task run
    assert result.preempt == ["on-docker"]


def test_a_process_task_takes_an_agent_without_docker_before_an_equal_one_with_it() -> None:
    agents = [agent("docker", 2, docker=True), agent("plain", 2, docker=False)]
    out = schedule([req("proc", 2, image=False, queued_at=0), req("img", 2, image=True, queued_at=1)], agents)
    assert where(out) == {"proc": ["plain"], "img": ["docker"]}

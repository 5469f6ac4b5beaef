"""Where the proxy connects and who may pass it (tasks/proxy_targets.decide, pure)."""

from __future__ import annotations

import pytest

from pedl.errors import Forbidden, InvalidArgument, NotFound, Unauthenticated, Unavailable
from pedl.master.lifecycle.states import AgentState, AllocationState
from pedl.master.tasks.proxy_targets import AgentView, AllocationView, ProxyTarget, decide

A = AllocationState
OWNER, OTHER = 7, 8
AGENT = AgentView("10.1.2.3", AgentState.CONNECTED)


def alloc(state: AllocationState = A.RUNNING, agent_id: str | None = "a1", port: int | None = 8888) -> AllocationView:
    return AllocationView("t.1", "t", OWNER, state, agent_id, port)


def test_the_owner_and_an_admin_reach_the_agents_address_and_the_registered_port() -> None:
    want = ProxyTarget("t.1", "t", OWNER, "10.1.2.3", 8888, agent_id="a1")
    assert decide("t", OWNER, False, alloc(), AGENT) == want
    assert decide("t", OTHER, True, alloc(), AGENT) == want


def test_another_user_gets_the_answer_of_an_unknown_task() -> None:
    with pytest.raises(NotFound) as other:
        decide("t", OTHER, False, alloc(), AGENT)
    with pytest.raises(NotFound) as unknown:
        decide("t", OTHER, False, None, None)
    assert other.value.message == unknown.value.message == "task t not found"
    with pytest.raises(NotFound):  # even once it ended, and before any check of its state
        decide("t", OTHER, False, alloc(A.TERMINATED), AGENT)


def test_an_ended_task_is_404_and_one_not_yet_reachable_503() -> None:
    with pytest.raises(NotFound, match="has ended"):
        decide("t", OWNER, False, alloc(A.TERMINATED), AGENT)
    with pytest.raises(Unavailable, match="waiting for resources"):
        decide("t", OWNER, False, alloc(A.PENDING, agent_id=None, port=None), None)
    with pytest.raises(Unavailable, match="not registered the port"):
        decide("t", OWNER, False, alloc(A.ASSIGNED, port=None), AGENT)
    with pytest.raises(Unavailable, match="not connected"):
        decide("t", OWNER, False, alloc(), AgentView("10.1.2.3", AgentState.DISCONNECTED))
    with pytest.raises(Unavailable, match="no address"):
        decide("t", OWNER, False, alloc(), AgentView("", AgentState.CONNECTED))


def test_the_session_cookie_passes_for_the_owner_only() -> None:
    assert decide("t", OWNER, False, alloc(), AGENT, browser=True).port == 8888
    with pytest.raises(Forbidden, match="Bearer"):
        decide("t", OTHER, True, alloc(), AGENT, browser=True)


def shell(state: AllocationState = A.RUNNING) -> AllocationView:
    return AllocationView("s.1", "s", OWNER, state, "a1", 2222, tcp=True)


def test_a_shells_tunnel_passes_without_credentials_and_nothing_else_does() -> None:
    assert decide("s", None, False, shell(), AGENT, websocket=True) == ProxyTarget(
        "s.1", "s", OWNER, "10.1.2.3", 2222, tcp=True, agent_id="a1"
    )
    for view, websocket in ((alloc(), True), (None, True), (shell(), False)):
        with pytest.raises(Unauthenticated):
            decide("s", None, False, view, AGENT, websocket=websocket)
    with pytest.raises(NotFound, match="has ended"):
        decide("s", None, False, shell(A.TERMINATED), AGENT, websocket=True)


def test_credentials_sent_to_a_shell_are_checked_and_http_is_refused() -> None:
    assert decide("s", OWNER, False, shell(), AGENT, websocket=True).tcp
    with pytest.raises(NotFound, match="task s not found"):
        decide("s", OTHER, False, shell(), AGENT, websocket=True)
    with pytest.raises(InvalidArgument, match="WebSocket tunnel"):
        decide("s", OWNER, False, shell(), AGENT)
    assert not decide("t", OWNER, False, alloc(), AGENT, websocket=True).tcp

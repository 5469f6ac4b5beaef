"""Where the master's proxy at /proxy/{task_id}/ connects, and who may pass it: the live allocation
of the task, on the address its agent registered with and the port the task registered itself.

Nothing of the target comes from the request but the task id: the host is the agent's, the port the
task's own: registered with its task token, and only once the agent has found a process of the task
listening on it (`check_port`), which it checks again before each relay (`verify`): a port the task
closed may have been taken by another user's service since. `decide` is pure; `resolve` reads one
snapshot.

A shell's sshd is reached as a TCP stream in a WebSocket (`tcp`), the tunnel det shell open runs.
Determined's tunnel sends no credentials (its shells' proxy is `unauthenticated`), so such a tunnel
without any passes: sshd, which takes only the shell's own key, is its gate. A caller who does send
credentials is checked as for any service: another user gets the answer of an unknown task."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from sqlalchemy import select

from pedl.errors import BadGateway, Forbidden, InvalidArgument, NotFound, Unauthenticated, Unavailable
from pedl.master.caller_cache import Caller
from pedl.master.cluster.agent_hub import AgentConnection, AgentGone
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.lifecycle import task_kinds
from pedl.master.lifecycle.states import LIVE_ALLOCATION, AgentState, AllocationState
from pedl.master.lifecycle.task_access import require_task

MIN_PORT = 1024  # a task's service listens as the task's user: never on a privileged port
PORT_CHECK_TIMEOUT_S = 10.0  # how long the master waits for an agent's answer to check_port

TASK_TOKEN_REFUSED = (
    "a task token (DET_SESSION_TOKEN, or DET_USER_TOKEN, which acts as the task's owner) does "
    "not pass the proxy: it is for people (the task's owner or an admin) with their login token "
    "or the WebUI's session; a task reaches its own service directly"
)


@dataclass(frozen=True)
class AllocationView:
    """What the decision needs of a task's newest allocation."""

    id: str
    task_id: str
    owner_id: int
    state: AllocationState
    agent_id: str | None  # the chief's (placement 0), None before it is assigned
    proxy_port: int | None
    tcp: bool = False  # its service is a TCP stream (a shell's sshd), tunnelled in a WebSocket


@dataclass(frozen=True)
class AgentView:
    address: str
    state: AgentState


@dataclass(frozen=True)
class ProxyTarget:
    allocation_id: str
    task_id: str
    owner_id: int
    host: str
    port: int
    headers: tuple[tuple[str, str], ...] = ()  # added to every relayed request (a notebook's token)
    tcp: bool = False
    agent_id: str = ""  # the agent the host is (the allocation's chief), which checks the port


def not_found(task_id: str) -> NotFound:
    # the same words for a task that does not exist and one the caller may not reach: no leak
    return NotFound(f"task {task_id} not found")


ADMIN_BROWSER_REFUSED = (
    "an admin opens another user's service with a login token (Authorization: Bearer), not the WebUI's "
    "session: the service's pages run in the master's origin, where they could act with an admin's session"
)


UNAUTHENTICATED = "authentication required: log in (the WebUI's session) or send 'Authorization: Bearer <token>'"


def tcp_over_http(task_id: str) -> InvalidArgument:
    return InvalidArgument(
        f"task {task_id} is a shell: its sshd is reached through a WebSocket tunnel to "
        f"/proxy/{task_id}/ (det shell open), not over HTTP"
    )


def decide(
    task_id: str,
    user_id: int | None,
    admin: bool,
    alloc: AllocationView | None,
    agent: AgentView | None,
    *,
    browser: bool = False,
    websocket: bool = False,
) -> ProxyTarget:
    """The target of `task_id` for this user, or the error to answer. `browser`: the caller came with
    the WebUI's session cookie, which passes for the task's owner only. `user_id` None: the caller
    sent no credentials, which passes for a shell's tunnel only (`websocket`); for anything else it
    is 401, whether the task exists or not."""
    if user_id is None:
        if alloc is None or not alloc.tcp or not websocket:
            raise Unauthenticated(UNAUTHENTICATED)
    elif alloc is None or not (admin or alloc.owner_id == user_id):
        raise not_found(task_id)
    elif browser and alloc.owner_id != user_id:
        raise Forbidden(ADMIN_BROWSER_REFUSED)
    if alloc.tcp and not websocket:
        raise tcp_over_http(task_id)
    if alloc.state not in LIVE_ALLOCATION:
        raise NotFound(f"task {task_id} has ended; its service is gone")
    if alloc.state == AllocationState.PENDING or alloc.agent_id is None:
        raise Unavailable(f"task {task_id} is waiting for resources; its service is not running yet")
    if agent is None or not agent.address:
        raise Unavailable(f"the agent of task {task_id} ({alloc.agent_id}) has no address the master can reach")
    if agent.state != AgentState.CONNECTED:
        raise Unavailable(f"the agent of task {task_id} ({alloc.agent_id}) is not connected; try again when it is back")
    if alloc.proxy_port is None:
        raise Unavailable(
            f"task {task_id} has not registered the port of its service yet (it does so once it "
            "listens); try again shortly"
        )
    return ProxyTarget(
        alloc.id, alloc.task_id, alloc.owner_id, agent.address, alloc.proxy_port, tcp=alloc.tcp, agent_id=alloc.agent_id
    )


def _view(alloc: models.Allocation, kind: str | None) -> AllocationView:
    placements = alloc.assignment or []
    agent_id = placements[0].get("agent_id") if placements and isinstance(placements[0], dict) else None
    return AllocationView(
        alloc.id,
        alloc.task_id,
        alloc.owner_id,
        alloc.state,
        agent_id,
        alloc.proxy_port,
        tcp=kind is not None and task_kinds.proxied_as_tcp(kind),
    )


def resolve(
    ctx: MasterContext, who: Caller | None, task_id: str, *, browser: bool = False, websocket: bool = False
) -> ProxyTarget:
    """Where /proxy/{task_id}/ goes for this caller (None: one without credentials): the task's
    newest allocation (a live one first)."""
    if who is not None and (who.allocation_id is not None or who.for_allocation is not None):
        raise Forbidden(TASK_TOKEN_REFUSED)
    with ctx.db.read_session() as s:
        allocs = s.scalars(
            select(models.Allocation)
            .where(models.Allocation.task_id == task_id)
            .order_by(models.Allocation.queued_at.desc())
            .limit(50)
        ).all()
        alloc = next((a for a in allocs if a.state in LIVE_ALLOCATION), allocs[0] if allocs else None)
        generic = s.get(models.GenericTask, task_id) if alloc is not None and alloc.trial_id is None else None
        view = _view(alloc, generic.kind if generic is not None else None) if alloc is not None else None
        agent_row = s.get(models.Agent, view.agent_id) if view is not None and view.agent_id else None
        agent = AgentView(agent_row.address, agent_row.state) if agent_row is not None else None
        user_id, admin = (who.user.id, who.user.admin) if who is not None else (None, False)
        target = decide(task_id, user_id, admin, view, agent, browser=browser, websocket=websocket)
        headers = tuple(task_kinds.proxy_headers(generic)) if generic is not None else ()
    return replace(target, headers=headers) if headers else target


def register_port(ctx: MasterContext, who: Caller, allocation_id: str, port: int) -> None:
    """The task tells where its service listens on its agent; only its own live allocation's token, and
    only a port on which the agent finds a process of the task listening (its chief's agent, where the
    proxy connects)."""
    with ctx.db.read_session() as s:
        alloc = require_task(s, who, allocation_id=allocation_id)
        agent_id = _view(alloc, None).agent_id
    if agent_id is None:
        raise Unavailable(f"allocation {allocation_id} is not placed on an agent yet")
    conn = _agent(ctx, agent_id, port)
    question = conn.ask_port(allocation_id, port)
    try:
        reply = question.result(PORT_CHECK_TIMEOUT_S)
    except TimeoutError:
        raise _no_answer(agent_id, allocation_id, port) from None
    except AgentGone as exc:
        raise Unavailable(str(exc)) from None
    finally:
        conn.forget_question(question)
    if not reply.owned:
        raise InvalidArgument.at(
            "port",
            f"port {port} is not a port of this task on agent {agent_id}: "
            f"{reply.reason or 'no process of the task listens on it'}",
        )
    with ctx.db.session() as s:
        alloc = require_task(s, who, allocation_id=allocation_id)
        alloc.proxy_port = port
        task = s.get(models.GenericTask, alloc.task_id) if alloc.trial_id is None else None
        if task is not None:
            task.last_activity = ctx.clock.now()  # the idle clock starts when the service answers


def _agent(ctx: MasterContext, agent_id: str, port: int) -> AgentConnection:
    conn = ctx.hub.get(agent_id)
    if conn is None:
        raise Unavailable(f"agent {agent_id} is not connected; it cannot check port {port}")
    return conn


def _no_answer(agent_id: str, allocation_id: str, port: int) -> Unavailable:
    return Unavailable(
        f"agent {agent_id} did not say within {PORT_CHECK_TIMEOUT_S:g} s whether a process of "
        f"allocation {allocation_id} listens on port {port}"
    )


async def verify(ctx: MasterContext, target: ProxyTarget) -> None:
    """Before a relay opens: the target's port is still the task's (its agent checks it again)."""
    conn = _agent(ctx, target.agent_id, target.port)
    question = conn.ask_port(target.allocation_id, target.port)
    try:
        reply = await asyncio.wait_for(asyncio.wrap_future(question), PORT_CHECK_TIMEOUT_S)
    except TimeoutError:
        raise _no_answer(target.agent_id, target.allocation_id, target.port) from None
    except AgentGone as exc:
        raise Unavailable(str(exc)) from None
    finally:
        conn.forget_question(question)
    if not reply.owned:
        raise BadGateway(
            f"task {target.task_id}'s service no longer listens on port {target.port} of its agent ({reply.reason})"
        )


def ended(ctx: MasterContext, allocation_ids: set[str]) -> set[str]:
    """Which of these allocations are no longer live (or no longer exist)."""
    if not allocation_ids:
        return set()
    with ctx.db.read_session() as s:
        live = set(
            s.scalars(
                select(models.Allocation.id).where(
                    models.Allocation.id.in_(allocation_ids), models.Allocation.state.in_(LIVE_ALLOCATION)
                )
            ).all()
        )
    return allocation_ids - live

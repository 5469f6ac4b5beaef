"""Agents: the listing (det agent list / slot list) and the WebSocket agents connect to."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, WebSocket, WebSocketDisconnect
from pydantic import ValidationError
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from pedl.common import agent_protocol as proto
from pedl.errors import NotFound
from pedl.master.agents import credentials as agent_credentials
from pedl.master.agents import service as agents_service
from pedl.master.api.deps import LARGE_BODY_BYTES, Body, Caller, caller, ctx_of, json_body, large_body_turn, parse
from pedl.master.api.openapi import accepts
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.wire.agent import Agent, GetAgentResponse, GetAgentsResponse, GetSlotResponse, GetSlotsResponse, Slot
from pedl.version import __version__

router = APIRouter()
log = logging.getLogger(__name__)

# While the database is away (a PostgreSQL restart), a message the master cannot store yet is
# retried in place, first after DB_RETRY_FIRST_S, backing off to DB_RETRY_MAX_S.
DB_RETRY_FIRST_S = 0.5
DB_RETRY_MAX_S = 5.0


@router.get("/api/v1/agents", response_model=GetAgentsResponse, response_model_exclude_unset=True)
def list_agents(request: Request, _: Caller = Depends(caller)) -> GetAgentsResponse:
    return GetAgentsResponse(agents=agents_service.listing(ctx_of(request)))


class DisableAgentBody(Body):
    drain: bool = False


AgentId = Annotated[str, Path(min_length=1, max_length=255)]


@router.post("/api/v1/agents/{agent_id}/enable", response_model=GetAgentResponse, response_model_exclude_unset=True)
def enable_agent(
    agent_id: AgentId, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> GetAgentResponse:
    """det agent enable: admins only."""
    return GetAgentResponse(agent=agents_service.set_enabled(ctx_of(request), who, agent_id, enabled=True))


@router.post("/api/v1/agents/{agent_id}/disable", response_model=GetAgentResponse, response_model_exclude_unset=True)
@accepts(DisableAgentBody)
def disable_agent(
    agent_id: AgentId, request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)
) -> GetAgentResponse:
    """det agent disable [--drain]: admins only; without drain its tasks are preempted."""
    req = parse(DisableAgentBody, body or {})
    return GetAgentResponse(
        agent=agents_service.set_enabled(ctx_of(request), who, agent_id, enabled=False, drain=req.drain)
    )


@router.get("/api/v1/agents/{agent_id}", response_model=GetAgentResponse, response_model_exclude_unset=True)
def get_agent(agent_id: AgentId, request: Request, _: Caller = Depends(caller)) -> GetAgentResponse:
    return GetAgentResponse(agent=agents_service.one(ctx_of(request), agent_id))


@router.get("/api/v1/agents/{agent_id}/slots", response_model=GetSlotsResponse, response_model_exclude_unset=True)
def get_slots(agent_id: AgentId, request: Request, _: Caller = Depends(caller)) -> GetSlotsResponse:
    return GetSlotsResponse(slots=list(agents_service.one(ctx_of(request), agent_id).slots.values()))


SlotId = Annotated[str, Path(min_length=1, max_length=64)]


@router.get(
    "/api/v1/agents/{agent_id}/slots/{slot_id}", response_model=GetSlotResponse, response_model_exclude_unset=True
)
def get_slot(agent_id: AgentId, slot_id: SlotId, request: Request, _: Caller = Depends(caller)) -> GetSlotResponse:
    return GetSlotResponse(slot=_slot(agents_service.one(ctx_of(request), agent_id), slot_id))


@router.post(
    "/api/v1/agents/{agent_id}/slots/{slot_id}/enable",
    response_model=GetSlotResponse,
    response_model_exclude_unset=True,
)
def enable_slot(
    agent_id: AgentId, slot_id: SlotId, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> GetSlotResponse:
    """det slot enable: admins only."""
    agent = agents_service.set_slot_enabled(ctx_of(request), who, agent_id, slot_id, enabled=True)
    return GetSlotResponse(slot=_slot(agent, slot_id))


@router.post(
    "/api/v1/agents/{agent_id}/slots/{slot_id}/disable",
    response_model=GetSlotResponse,
    response_model_exclude_unset=True,
)
@accepts(DisableAgentBody)
def disable_slot(
    agent_id: AgentId, slot_id: SlotId, request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)
) -> GetSlotResponse:
    """det slot disable: admins only; without drain the task holding the slot is preempted (the body's
    agentId and slotId, which det leaves unset, are ignored: the path names the slot)."""
    req = parse(DisableAgentBody, body or {})
    agent = agents_service.set_slot_enabled(ctx_of(request), who, agent_id, slot_id, enabled=False, drain=req.drain)
    return GetSlotResponse(slot=_slot(agent, slot_id))


def _slot(agent: Agent, slot_id: str) -> Slot:
    slot = agent.slots.get(slot_id)
    if slot is None:
        raise NotFound(f"slotId: agent {agent.id!r} has no slot {slot_id!r}")
    return slot


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _master_url(ws: WebSocket) -> str:
    scheme = "https" if ws.url.scheme == "wss" else "http"
    return f"{scheme}://{ws.url.netloc}"


def _offer(ctx, ws: WebSocket, remote: str) -> agent_credentials.Offer:  # a MasterContext
    """What the connection presents. security.allow_unauthenticated_loopback_agents (development only)
    admits a loopback peer that presents nothing; a secret or credential that is offered must be right."""
    dev = ctx.config.security.allow_unauthenticated_loopback_agents and _is_loopback(remote)
    return agent_credentials.Offer(
        credential=ws.headers.get(proto.CREDENTIAL_HEADER.lower(), ""),
        secret=ws.headers.get(proto.TOKEN_HEADER.lower(), ""),
        loopback_dev=dev,
    )


def _early_refusal(ctx, offer: agent_credentials.Offer) -> str | None:  # a MasterContext
    """Why the connection is refused before it names its agent: it presents nothing, or only a secret
    that is no enrollment secret at all."""
    if offer.credential:
        return None
    if offer.secret:
        return None if agent_credentials.known_secret(ctx, offer.secret) else agent_credentials.WRONG_TOKEN
    return None if offer.loopback_dev else agent_credentials.MISSING_TOKEN


@router.post("/api/v1/agents/{agent_id}/forget")
def forget_agent(
    agent_id: AgentId, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    """pedl agent forget: admins only. The master forgets the agent's credential (its file was lost),
    so the enrollment secret registers the id again and it gets a new one; its connection, if any, is
    closed."""
    agent_credentials.forget(ctx_of(request), who, agent_id)
    return {}


@router.websocket("/agents/ws")
async def agent_socket(ws: WebSocket) -> None:
    ctx = ws.app.state.ctx
    ctl = ctx.controller
    remote = ws.client.host if ws.client else ""
    offer = _offer(ctx, ws, remote)
    refused = await run_in_threadpool(_early_refusal, ctx, offer)
    if refused is not None:
        log.warning("refused agent connection from %s: %s", remote, refused)
        await ws.close(code=proto.CLOSE_UNAUTHORIZED, reason=refused)
        return
    await ws.accept()
    try:
        first = await _receive(ws)
    except (ValidationError, ValueError, WebSocketDisconnect) as exc:
        log.warning("agent from %s sent a bad first message: %s", remote, exc)
        await _close(ws, proto.CLOSE_BAD_REQUEST, "first message must be register")
        return
    if not isinstance(first, proto.Register):
        await _close(ws, proto.CLOSE_BAD_REQUEST, "first message must be register")
        return
    if first.version != __version__:
        # a close reason holds 123 bytes: the agent spells out the remedy (agent/connection.py)
        log.warning("refused agent %s: it runs pedl %s, the master %s", first.agent_id, first.version, __version__)
        await _close(ws, proto.CLOSE_VERSION_MISMATCH, f"agent pedl {first.version[:32]}, master pedl {__version__}")
        return
    if ctx.config.pool(first.resource_pool) is None:
        log.warning("refused agent %s: unknown resource pool %r", first.agent_id, first.resource_pool)
        await _close(ws, proto.CLOSE_BAD_REQUEST, f"unknown resource pool {first.resource_pool!r}")
        return
    conn = AgentConnection(
        agent_id=first.agent_id,
        master_url=_master_url(ws),
        remote_host=remote,
        loop=asyncio.get_running_loop(),
        last_heartbeat=ctx.clock.now(),
    )
    writer: asyncio.Task | None = None
    try:
        try:
            fulfilled_by = await run_in_threadpool(agent_credentials.spot_instance, ctx, first.agent_id, offer)
            registered, old = await run_in_threadpool(
                agent_credentials.register, ctx, first, remote, offer, conn, fulfilled_by
            )
        except agent_credentials.Refused as exc:
            log.warning(
                "refused agent %s from %s: %s%s",
                first.agent_id,
                remote,
                exc.reason,
                f" (if its credential file was lost: `pedl agent forget {first.agent_id}`)"
                if exc.reason == agent_credentials.HAS_CREDENTIAL
                else "",
            )
            await _close(ws, proto.CLOSE_UNAUTHORIZED, exc.reason)
            return
        if old is not None:
            old.send(None)
        # how long the agent may stay cut off before it must kill its tasks itself (fencing): by then
        # the master has declared it lost and restarted its tasks elsewhere
        registered = registered.model_copy(
            update={
                "reconnect_wait": ctx.config.agent_reconnect_wait,
                "kill_grace_period": ctx.config.task_kill_grace_period,
            }
        )
        await ws.send_json(proto.dump(registered))
        # only now: work scheduled meanwhile waits in the queue, so `registered` is always first
        writer = asyncio.create_task(_writer(ws, conn))
        log.info("agent %s connected from %s with %d slot(s)", first.agent_id, remote, len(first.slots))
        while True:
            try:
                msg = await _receive(ws)
            except ValidationError as exc:
                log.warning("agent %s sent a bad message: %s", first.agent_id, exc)
                continue
            await _handle_until_stored(ctx, conn, msg)
    except WebSocketDisconnect:
        pass
    except Exception:  # a broken socket must not take the master down
        log.exception("agent %s connection failed", first.agent_id)
    finally:
        conn.ended()
        if writer is not None:
            writer.cancel()
        if ctx.hub.detach(conn):
            await run_in_threadpool(ctl.agent_disconnected, first.agent_id, "connection closed")
            ctl.wake()


async def _receive(ws: WebSocket) -> proto.AgentMessage:
    """The agent's next message, parsed and checked. A large one (a batch of task logs) is parsed in a worker
    thread, one at a time as large request bodies are: on the event loop it would hold up every request and
    every other agent's heartbeat. ValidationError for a message that is not JSON or not a message."""
    text = await ws.receive_text()
    if len(text) < LARGE_BODY_BYTES:
        return proto.AGENT_MESSAGE.validate_json(text)
    async with large_body_turn(ws.app):
        return await run_in_threadpool(proto.AGENT_MESSAGE.validate_json, text)


async def _handle_until_stored(ctx, conn: AgentConnection, msg) -> None:  # a MasterContext
    """Handle one agent message, retrying while the database is unavailable. The agent drops a
    message from its outbox once it is written to the socket and the protocol has no acks, so
    dropping the connection here (as the catch-all below would) loses it for good: a TaskExited
    becomes "no longer running" with no exit code at the next register, and log lines vanish.
    Each try runs in a transaction that rolls back on failure, so a retry stores the message once;
    only a failure inside COMMIT itself (the outcome unknown) can store log lines twice, while a
    second TaskExited / TaskStarted is ignored. Later messages from this agent wait behind this one
    (TCP keeps their order); the socket reads nothing meanwhile."""
    delay = DB_RETRY_FIRST_S
    while True:
        try:
            await _handle(ctx, conn, msg)
            return
        except OperationalError as exc:
            log.warning(
                "database unavailable while handling %s from agent %s; retrying in %.1f s: %s",
                msg.type,
                conn.agent_id,
                delay,
                str(exc.orig).splitlines()[0] if exc.orig else type(exc).__name__,
            )
        await asyncio.sleep(delay)
        delay = min(delay * 2, DB_RETRY_MAX_S)
        if ctx.hub.get(conn.agent_id) is conn:
            # the agent is still there, only unread: the heartbeat check that runs once the
            # database is back must not take the wait for silence and close this socket
            conn.last_heartbeat = ctx.clock.now()


async def _handle(ctx, conn: AgentConnection, msg) -> None:
    ctl = ctx.controller
    conn.last_heartbeat = ctx.clock.now()
    if isinstance(msg, proto.Heartbeat):
        conn.running = msg.running_allocations
    elif isinstance(msg, proto.TaskStarted):
        await run_in_threadpool(ctl.task_started, conn.agent_id, msg.allocation_id)
    elif isinstance(msg, proto.TaskLogs):
        await run_in_threadpool(agents_service.store_logs, ctx, conn.agent_id, msg.allocation_id, msg.lines)
    elif isinstance(msg, proto.TaskExited):
        await run_in_threadpool(ctl.task_exited, conn.agent_id, msg.allocation_id, msg.exit_code, msg.reason)
    elif isinstance(msg, proto.SpotInterruption):
        await run_in_threadpool(ctl.spot_interruption, conn.agent_id, msg.action, msg.time)
    elif isinstance(msg, proto.PortChecked):
        conn.answered(msg)


async def _writer(ws: WebSocket, conn: AgentConnection) -> None:
    while True:
        payload = await conn.queue.get()
        if payload is None:
            await _close(ws, proto.CLOSE_REPLACED, "closed by the master")
            return
        await ws.send_json(payload)


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(RuntimeError):
        await ws.close(code=code, reason=reason)

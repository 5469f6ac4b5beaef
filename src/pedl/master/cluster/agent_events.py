"""What agents report, and what their silence means: registration (and reconciling what an agent
runs with what the database says it should), disconnection, spot interruption notices, task
started / exited, and the periodic check that turns a silent agent DISCONNECTED and then GONE.

Each function runs inside one transaction under the cluster lock (Controller.run) and reaches
beyond it through the effects protocol."""

from __future__ import annotations

import functools
import logging

from sqlalchemy import update
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from pedl.common import agent_protocol as proto
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.known_agents import KnownAgents, read_agents
from pedl.master.db import models
from pedl.master.db.base import existing, table_of
from pedl.master.db.bulk_rows import FLOAT, TEXT, by_key, dialect_of, params, rows_table
from pedl.master.db.change_counters import QUIET
from pedl.master.lifecycle import allocations, progression
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import HELD, AgentState, AllocationState, InstanceState
from pedl.master.lifecycle.transitions import record_event, set_agent_state, set_allocation_state, set_instance_state

log = logging.getLogger(__name__)

A = AllocationState
AGENT = table_of(models.Agent)


def registered(fx: ClusterEffects, s: Session, reg: proto.Register, remote_host: str) -> proto.Registered:
    """An agent (re)connected: record it, mark its instance RUNNING, and reconcile its tasks."""
    now = fx.now
    agent = s.get(models.Agent, reg.agent_id)
    slots = [sl.model_dump() for sl in reg.slots]
    address = reg.address or remote_host
    if agent is None:
        agent = models.Agent(
            id=reg.agent_id,
            hostname=reg.hostname,
            address=address,
            resource_pool=reg.resource_pool,
            slots=slots,
            state=AgentState.CONNECTED,
            version=reg.version,
            registered_at=now,
            last_heartbeat=now,
            container_runtime=reg.container_runtime,
        )
        s.add(agent)
        record_event(
            s,
            now,
            "agent",
            reg.agent_id,
            f"registered from {remote_host} with {len(slots)} slot(s) in pool {reg.resource_pool}",
            to_state=AgentState.CONNECTED,
        )
    else:
        set_agent_state(s, now, agent, AgentState.CONNECTED, f"reconnected from {remote_host}")
        agent.hostname, agent.address, agent.slots = reg.hostname, address, _keep_slot_flags(agent.slots, slots)
        agent.resource_pool, agent.version = reg.resource_pool, reg.version
        agent.container_runtime = reg.container_runtime
        agent.last_heartbeat, agent.disconnected_at = now, None
    instance = s.get(models.Instance, reg.agent_id)
    if instance is not None and instance.state == InstanceState.STARTING:
        set_instance_state(s, now, instance, InstanceState.RUNNING, f"agent registered from {remote_host}")
        instance.registered_at = now
    if instance is not None:
        fx.wake_provisioners()  # new capacity: a move may now have somewhere to go
    kill = reconcile(fx, s, reg.agent_id, set(reg.running_allocations))
    return proto.Registered(
        agent_id=reg.agent_id, heartbeat_interval=fx.config.agent_heartbeat_interval, kill_unknown=kill
    )


def _keep_slot_flags(old: list[dict] | None, new: list[dict]) -> list[dict]:
    """A slot an admin disabled stays disabled when its agent registers again (as the agent does)."""
    flags = {sl["id"]: {k: sl[k] for k in ("enabled", "draining") if k in sl} for sl in old or []}
    return [{**sl, **flags.get(sl["id"], {})} for sl in new]


def reconcile(fx: ClusterEffects, s: Session, agent_id: str, running: set[str]) -> list[str]:
    """Match what the agent says it runs with what the database says it should run: returns the
    allocations the agent must kill; ends those it no longer runs."""
    kill = []
    for alloc_id in running:
        alloc = s.get(models.Allocation, alloc_id)
        if alloc is None or alloc.state not in HELD or agent_id not in allocations.agents_of(alloc):
            kill.append(alloc_id)
        elif alloc.kill_requested:
            fx.send(
                agent_id,
                proto.KillTask(
                    allocation_id=alloc_id,
                    grace_period=fx.config.task_kill_grace_period,
                    reason="killed while the agent was away",
                ),
            )
    for alloc in allocations.held_on(s, agent_id, running_only=True):  # a rank that exited is not missed
        if alloc.id in running:
            continue
        if alloc.state == A.ASSIGNED:
            progression.allocation_ended(fx, s, alloc, None, allocations.NOT_STARTED)
        else:
            progression.allocation_ended(
                fx, s, alloc, None, f"the task was no longer running on agent {agent_id} when it reconnected"
            )
    return kill


def disconnected(fx: ClusterEffects, s: Session, agent_id: str, reason: str) -> None:
    agent = s.get(models.Agent, agent_id)
    if agent is not None and agent.state == AgentState.CONNECTED:
        set_agent_state(s, fx.now, agent, AgentState.DISCONNECTED, reason, level="warning")
        agent.disconnected_at = fx.now


def spot_interruption(fx: ClusterEffects, s: Session, agent_id: str, action: str, when: str) -> None:
    """The cloud will reclaim this instance: stop placing work on it and ask its tasks to checkpoint
    and leave (they queue again, not counted as failures). The caller wakes the provisioners, which
    count that work as waiting and replace the instance at once."""
    now = fx.now
    agent = s.get(models.Agent, agent_id)
    if agent is not None:
        agent.draining = True
    instance = s.get(models.Instance, agent_id)
    if instance is not None and instance.interrupted_at is None:
        instance.interrupted_at = now
    record_event(s, now, "agent", agent_id, f"spot interruption notice ({action} at {when or 'soon'})", level="warning")
    for alloc in allocations.held_on(s, agent_id, running_only=True):
        allocations.preempt(fx, s, alloc, "spot interruption")


def task_started(fx: ClusterEffects, s: Session, agent_id: str, allocation_id: str) -> None:
    alloc = s.get(models.Allocation, allocation_id)
    if alloc is None or alloc.state != A.ASSIGNED:
        return
    now = fx.now
    set_allocation_state(s, now, alloc, A.RUNNING, f"process started on agent {agent_id}")
    alloc.started_at = now
    progression.trial_started(s, now, alloc)


def task_exited(
    fx: ClusterEffects, s: Session, agent_id: str, allocation_id: str, exit_code: int | None, reason: str
) -> None:
    alloc = s.get(models.Allocation, allocation_id)
    if alloc is None or alloc.state == A.TERMINATED:
        return
    if agent_id not in allocations.agents_of(alloc):
        log.warning("agent %s reported exit of %s, which is not assigned to it", agent_id, allocation_id)
        return
    ending = allocations.placement_exited(fx, s, alloc, agent_id, exit_code, reason)
    if ending is not None:
        progression.allocation_ended(fx, s, alloc, ending.exit_code, ending.reason)
    instance = s.get(models.Instance, agent_id)
    if instance is not None and (instance.draining_since is not None or instance.cordoned_since is not None):
        fx.wake_provisioners()  # a draining or cordoned instance may be empty now: it ends at once


def check_agents(fx: ClusterEffects, s: Session, hub: AgentHub, known: KnownAgents | None = None) -> None:
    """A connected agent silent for agent_heartbeat_timeout is DISCONNECTED; one that stays away for
    agent_reconnect_wait is GONE, and what it held ends. Every pass runs this over every agent, so
    it reads columns (`known`: the rows kept from the last pass, read again only where something
    but heartbeats changed) and writes the heartbeats that moved in one statement, QUIET (they
    leave `known` valid); only an agent whose state changes is loaded as an object."""
    now, cfg = fx.now, fx.config
    connected = hub.connected_ids()
    s.flush()  # read below by column: what this session changed must be in the database
    beats: dict[str, float] = {}
    rows = known.rows(s).values() if known is not None else read_agents(s).values()
    for agent_id, state, last_heartbeat, disconnected_at, *_ in rows:
        conn = hub.get(agent_id)
        if state == AgentState.CONNECTED:
            if conn is None or now - conn.last_heartbeat > cfg.agent_heartbeat_timeout:  # silent
                agent = existing(s, models.Agent, agent_id)
                reason = f"no heartbeat for {cfg.agent_heartbeat_timeout:g}s" if conn else "connection lost"
                set_agent_state(s, now, agent, AgentState.DISCONNECTED, reason, level="warning")
                agent.disconnected_at = now
                if conn is not None:
                    hub.close(agent_id)
            elif conn.last_heartbeat != last_heartbeat:
                beats[agent_id] = conn.last_heartbeat
        elif state == AgentState.DISCONNECTED and agent_id not in connected:
            since = disconnected_at or now
            if now - since >= cfg.agent_reconnect_wait:
                agent = existing(s, models.Agent, agent_id)
                set_agent_state(
                    s,
                    now,
                    agent,
                    AgentState.GONE,
                    f"did not reconnect within {cfg.agent_reconnect_wait:g}s",
                    level="warning",
                )
                for alloc in allocations.held_on(s, agent_id, running_only=True):  # ranks that ended lost nothing
                    progression.allocation_ended(fx, s, alloc, None, f"agent {agent_id} was lost")
    if beats:
        dialect = dialect_of(s)
        s.execute(
            _beats_statement(dialect), params(dialect, BEAT_COLUMNS, list(beats.items())), execution_options=QUIET
        )
        if known is not None:
            known.beats_written(beats)
        if len(s.identity_map):  # objects of those agents in this session are stale now
            for obj in list(s.identity_map.values()):
                if isinstance(obj, models.Agent) and obj.id in beats:
                    s.expire(obj, ["last_heartbeat"])


BEAT_COLUMNS = (("id", TEXT), ("beat", FLOAT))


@functools.cache
def _beats_statement(dialect: str) -> Executable:
    """UPDATE agents SET last_heartbeat FROM the rows (id, beat): one statement, where an executemany
    was a statement per agent on PostgreSQL (200 a pass with 1,000 agents beating every 5 s)."""
    v = rows_table(dialect, BEAT_COLUMNS)
    return update(AGENT).where(AGENT.c.id == v.c.id, *by_key(AGENT.c.id, dialect)).values(last_heartbeat=v.c.beat)

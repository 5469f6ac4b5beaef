"""Assigning planned placements, a batch per transaction, in bulk: a task token each, ASSIGNED with
its event, a rendezvous port for each trial (its chief's C10D_PORT), and StartTask to each agent
(sent once the batch commits). The batch's rows are read and written as columns, in one statement
per kind of write, never as ORM objects one by one. `prepare` does the reads and the work (tokens,
task specs, messages), `write` the writes: the pass holds the lock for the second only.

A placement is assigned only while its allocation is still PENDING; `assign` with `planned` (the
pass, planned outside the lock) also skips one whose allocation moved to another pool or whose
agents are no longer usable. Those wait for the next pass."""

from __future__ import annotations

import base64
import functools
import logging
import secrets
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Select, bindparam, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from pedl.common import agent_protocol as proto
from pedl.config.task_container import TaskContainerDefaults
from pedl.master.cluster import wait_records
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.known_agents import KnownAgents
from pedl.master.cluster.rendezvous import node_envs, pick_port
from pedl.master.cluster.wait_reasons import WaitKind
from pedl.master.cluster.wait_records import WaitUpdate
from pedl.master.db import models
from pedl.master.db.base import table_of
from pedl.master.db.bulk_rows import (
    JSON_VALUE,
    TEXT,
    by_key,
    dialect_of,
    id_list,
    in_list,
    insert_rows,
    params,
    rows_table,
)
from pedl.master.db.json_columns import as_text, loads
from pedl.master.lifecycle import generic_task_specs
from pedl.master.lifecycle.agent_user_groups import TaskUsers
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import HELD, AgentState, AllocationState, check_transition
from pedl.master.lifecycle.task_specs import SpecCache, SpecRows, task_spec
from pedl.master.lifecycle.tokens import token_hash

log = logging.getLogger(__name__)

A = AllocationState
ALLOC = table_of(models.Allocation)
AGENT = table_of(models.Agent)
EVENT = table_of(models.Event)

TOKEN_BYTES = 32  # a task token's randomness (secrets.token_urlsafe's default)

# a planned placement: (allocation id, [(agent id, slot ids), ...])
Placement = tuple[str, list[tuple[str, list[str]]]]


class Candidate(NamedTuple):
    """What assigning needs of a pending allocation (none of it changes while it is pending); the
    pool and the wait kind as last read."""

    id: str
    task_id: str
    trial_id: int | None
    name: str
    resource_pool: str
    wait_kind: str | None


@dataclass
class Prepared:
    """A batch made ready to write: the rows to assign (id, pool, token hash, assignment, event
    message), the StartTask messages of each, and the wait reasons of those that cannot start."""

    assigned: list[tuple[Any, ...]] = field(default_factory=list)
    starts: dict[str, list[tuple[str, proto.StartTask]]] = field(default_factory=dict)
    waits: list[WaitUpdate] = field(default_factory=list)

    def take(self, n: int) -> Prepared:
        """The next n rows to assign, and the wait reasons with the first, removed from this batch
        (the pass prepares more placements at a time than it writes in one transaction)."""
        rows, self.assigned = self.assigned[:n], self.assigned[n:]
        waits, self.waits = self.waits, []
        return Prepared(rows, {row[0]: self.starts.pop(row[0]) for row in rows}, waits)

    def agent_ids(self) -> set[str]:
        return {place["agent_id"] for row in self.assigned for place in row[3]}

    def on_usable(self, usable: Mapping[str, str]) -> Prepared:
        """Only the rows whose agents may all still take work in the row's pool (`usable`: agent id ->
        pool); the others stay PENDING for the next pass."""
        rows = [row for row in self.assigned if all(usable.get(place["agent_id"]) == row[1] for place in row[3])]
        if len(rows) == len(self.assigned):
            return self
        return Prepared(rows, {row[0]: self.starts[row[0]] for row in rows}, self.waits)


def assign(
    fx: ClusterEffects,
    s: Session,
    hub: AgentHub,
    chunk: Sequence[Placement],
    *,
    planned: Mapping[str, Candidate] | None = None,
    cache: SpecCache | None = None,
) -> set[str]:
    """Assign a batch of placements in the session's transaction: `prepare` and `write` in one."""
    return write(fx, s, prepare(fx, s, hub, chunk, planned=planned, cache=cache))


def prepare(
    fx: ClusterEffects,
    s: Session,
    hub: AgentHub,
    chunk: Sequence[Placement],
    *,
    planned: Mapping[str, Candidate] | None = None,
    cache: SpecCache | None = None,
    known: KnownAgents | None = None,
) -> Prepared:
    """Reads and work for a batch, no writes: the pass runs this outside the lock, in a read-only
    transaction, and only `write` under it. `planned`: the pass's snapshot of the allocations, planned
    outside the lock; their agents must still be usable, and `write` checks that each is still
    PENDING in that pool. Without it the allocations are read here. `cache` carries the
    experiments' parsed configs from one batch of a pass to the next, `known` the agents' rows
    (cluster/known_agents.py), read again only where they changed."""
    out = Prepared()
    if not chunk:
        return out
    s.flush()  # what this session changed (a kill since the plan) counts in the reads below
    if planned is None:
        found = {
            r.id: Candidate(*r)
            for r in s.execute(
                select(
                    ALLOC.c.id,
                    ALLOC.c.task_id,
                    ALLOC.c.trial_id,
                    ALLOC.c.name,
                    ALLOC.c.resource_pool,
                    ALLOC.c.wait_kind,
                ).where(ALLOC.c.id.in_([aid for aid, _ in chunk]), ALLOC.c.state == A.PENDING)
            )
        }
        todo = [(found[aid], places) for aid, places in chunk if aid in found]  # not killed since the plan
    else:
        agent_ids = {agent_id for _, places in chunk for agent_id, _ in places}
        usable = known.usable(s, hub, agent_ids) if known is not None else _usable_agents(s, hub, agent_ids)
        todo = [
            (planned[aid], places)
            for aid, places in chunk
            if all(usable.get(agent_id) == planned[aid].resource_pool for agent_id, _ in places)
        ]
    if not todo:
        return out
    rows = SpecRows.load(
        s,
        [row.trial_id for row, _ in todo if row.trial_id],
        cache,
        [row.task_id for row, _ in todo if row.trial_id is None],
    )
    if any(len(places) > 1 or row.trial_id is not None for row, places in todo):
        _load_rendezvous(s, rows, {agent_id for _, places in todo for agent_id, _ in places})
    in_containers, runtimes = _container_runtimes(fx, s, todo, rows)
    defaults = {pool: fx.config.task_defaults(pool) for pool in {row.resource_pool for row, _ in todo}}
    task_users = TaskUsers.of(fx.config.security)
    for row, _ in todo[:1]:  # every one of the batch takes this edge
        check_transition("allocation", row.id, A.PENDING, A.ASSIGNED)
    tokens = _tokens(len(todo))
    for row, places in todo:
        lacking = (
            [agent_id for agent_id, _ in places if runtimes[agent_id] != "docker"] if row.id in in_containers else []
        )
        if lacking:  # it stays PENDING, saying why; never started half-way on an agent that cannot run it
            why = (
                f"its experiment names an environment.image, and agent(s) {', '.join(lacking)} run no "
                f"containers (start them with Docker, or --container-runtime docker)"
            )
            if row.wait_kind != WaitKind.NEEDS_CONTAINERS:
                out.waits.append(
                    WaitUpdate(
                        row.id,
                        row.resource_pool,
                        row.trial_id,
                        row.wait_kind,
                        WaitKind.NEEDS_CONTAINERS,
                        why,
                        "warning",
                    )
                )
            continue
        port = None
        # a trial's chief gets a port of its own for torch.distributed.run's store, even on one agent: Determined's
        # launcher listens on C10D_PORT (29400 unless set), where two trials of one host would collide
        if len(places) > 1 or row.trial_id is not None:
            port = _rendezvous_port(fx, row.id, places[0][0], rows)
            if port is None:  # it stays PENDING; the rest of the batch goes on
                continue
        token = next(tokens)
        out.assigned.append(
            (
                row.id,
                row.resource_pool,
                token_hash(token),
                [
                    {"agent_id": a, "slot_ids": slots, **({"port": port} if i == 0 and port else {})}
                    for i, (a, slots) in enumerate(places)
                ],
                "assigned to " + ", ".join(f"{a}{slots}" for a, slots in places),
            )
        )
        spec = task_spec(fx.cluster_id, row, token, rows, defaults[row.resource_pool], task_users=task_users)
        ranks = (
            [{}]
            if port is None
            else [{"C10D_PORT": str(port)}]
            if len(places) == 1
            else node_envs(places, addresses=rows.agent_addresses, port=port)
        )
        messages = out.starts[row.id] = []
        for (agent_id, slot_ids), rank_env in zip(places, ranks, strict=True):
            conn = hub.get(agent_id)
            base = conn.master_url if conn else ""
            messages.append(
                (
                    agent_id,
                    proto.StartTask(
                        allocation_id=row.id,
                        task_id=row.task_id,
                        name=row.name,
                        entrypoint=spec["entrypoint"],
                        env={**spec["env"], **rank_env} if rank_env else spec["env"],
                        slot_ids=slot_ids,
                        session_token=token,
                        device_env=spec["device_env"],
                        container=spec["container"],
                        run_as=spec["run_as"],
                        startup_hook=defaults[row.resource_pool].startup_hook or "",
                        shm_size_bytes=spec["shm_size"],
                        bind_mounts=[] if spec["container"] else spec["bind_mounts"],
                        bind_mount_roots=fx.config.security.bind_mounts.allowed_roots,
                        context_url=f"{base}/api/v1/tasks/{row.task_id}/context_directory",
                    ),
                )
            )
    return out


def write(fx: ClusterEffects, s: Session, prepared: Prepared) -> set[str]:
    """Write a prepared batch in the session's transaction (the pass: under the lock): ASSIGNED, the
    token hash and the assignment in one statement that takes only allocations still PENDING in the
    pool they were placed for, their events, StartTask for those; the wait reasons. Returns the
    allocations assigned."""
    now = fx.now
    done = _write_assigned(s, now, prepared.assigned)
    for allocation_id in done:
        for agent_id, msg in prepared.starts[allocation_id]:
            fx.send(agent_id, msg)
    expire_allocations(s, done | wait_records.store(s, now, prepared.waits))
    return done


def _write_assigned(s: Session, now: float, assigned: list[tuple[Any, ...]]) -> set[str]:
    if not assigned:
        return set()
    dialect = dialect_of(s)
    done = set(
        s.execute(
            _assign_statement(dialect), params(dialect, ASSIGN_COLUMNS, [a[:4] for a in assigned], now=now)
        ).scalars()
    )
    insert_rows(
        s,
        EVENT,
        wait_records.EVENT_COLUMNS,
        [
            ("allocation", aid, now, A.PENDING.value, A.ASSIGNED.value, "info", message)
            for aid, _, _, _, message in assigned
            if aid in done
        ],
    )
    return done


ASSIGN_COLUMNS = (("id", TEXT), ("pool", TEXT), ("token_hash", TEXT), ("assignment", JSON_VALUE))


@functools.cache
def _assign_statement(dialect: str) -> Executable:
    pending = ((ALLOC.c.state, A.PENDING),)
    v = rows_table(dialect, ASSIGN_COLUMNS, conditions=pending)
    return (
        update(ALLOC)
        .where(ALLOC.c.id == v.c.id, ALLOC.c.resource_pool == v.c.pool, *by_key(ALLOC.c.id, dialect, *pending, rows=v))
        .values(
            state=A.ASSIGNED,
            session_token_hash=v.c.token_hash,
            assignment=v.c.assignment,
            assigned_at=bindparam("now"),
            wait_kind=None,
            wait_reason=None,
        )
        .returning(ALLOC.c.id)
    )


def _tokens(n: int) -> Iterator[str]:
    """n task tokens, each as secrets.token_urlsafe(32) makes one, from one read of the OS's random source."""
    raw = secrets.token_bytes(TOKEN_BYTES * n)
    for i in range(0, len(raw), TOKEN_BYTES):
        yield base64.urlsafe_b64encode(raw[i : i + TOKEN_BYTES]).rstrip(b"=").decode("ascii")


def expire_allocations(s: Session, ids: Collection[str]) -> None:
    """Allocations this session holds as objects go stale when their rows are written by column:
    expire them, so the next access reads the row (a pass's own sessions hold none)."""
    if not ids or not len(s.identity_map):
        return
    for obj in list(s.identity_map.values()):
        if isinstance(obj, models.Allocation) and obj.id in ids:
            s.expire(obj)


def _usable_agents(s: Session, hub: AgentHub, agent_ids: set[str]) -> dict[str, str]:
    """agent id -> pool, for the agents that may still take work: connected (in the hub and the
    database), enabled, not draining."""
    if not agent_ids:
        return {}
    connected = hub.connected_ids()
    dialect = dialect_of(s)
    return {
        aid: pool
        for aid, pool in s.execute(_usable_agents_query(dialect), {"ids": id_list(dialect, agent_ids)})
        if aid in connected
    }


@functools.cache
def _usable_agents_query(dialect: str) -> Select[str, str]:
    return select(AGENT.c.id, AGENT.c.resource_pool).where(
        in_list(AGENT.c.id, dialect),
        AGENT.c.state == AgentState.CONNECTED,
        AGENT.c.enabled.is_(True),
        AGENT.c.draining.is_(False),
    )


def _container_runtimes(
    fx: ClusterEffects, s: Session, todo: list[tuple[Any, list[tuple[str, list[str]]]]], rows: SpecRows
) -> tuple[set[str], dict[str, str]]:
    """The allocations whose task runs in a container, and the container runtime ("" none, also for
    an agent that is gone) of each of their agents; agents of process tasks are not read."""
    in_containers: set[str] = set()
    wanted: set[str] = set()
    by_pool: dict[str, TaskContainerDefaults] = {}
    for row, places in todo:
        if row.resource_pool not in by_pool:
            by_pool[row.resource_pool] = fx.config.task_defaults(row.resource_pool)
        defaults = by_pool[row.resource_pool]
        trial = rows.trials.get(row.trial_id) if row.trial_id else None
        exp = rows.experiments.get(trial.experiment_id) if trial else None
        generic = rows.generic.tasks.get(row.task_id) if row.trial_id is None else None
        if (exp is not None and rows.runtime(exp, defaults).container is not None) or (
            generic is not None and generic_task_specs.container_of(generic, defaults) is not None
        ):
            in_containers.add(row.id)
            wanted.update(agent_id for agent_id, _ in places)
    if not wanted:
        return in_containers, {}
    dialect = dialect_of(s)
    found = dict(
        s.execute(
            select(AGENT.c.id, AGENT.c.container_runtime).where(in_list(AGENT.c.id, dialect)),
            {"ids": id_list(dialect, wanted)},
        ).all()
    )
    return in_containers, {agent_id: found.get(agent_id) or "" for agent_id in wanted}


def _load_rendezvous(s: Session, rows: SpecRows, agent_ids: set[str]) -> None:
    """The placements' agents' addresses and the rendezvous ports already taken, for distributed
    placements."""
    dialect = dialect_of(s)
    rows.agent_addresses = dict(
        s.execute(
            select(AGENT.c.id, AGENT.c.address).where(in_list(AGENT.c.id, dialect)),
            {"ids": id_list(dialect, agent_ids)},
        ).all()
    )
    rows.ports_in_use = {}
    for (text,) in s.execute(select(as_text(ALLOC.c.assignment)).where(ALLOC.c.state.in_(HELD))):
        if not text or '"port"' not in text:
            continue
        places = loads(text)
        if places and places[0].get("port"):
            rows.ports_in_use.setdefault(places[0]["agent_id"], set()).add(places[0]["port"])


def _rendezvous_port(fx: ClusterEffects, allocation_id: str, chief: str, rows: SpecRows) -> int | None:
    """A free rendezvous port on the chief agent (see rendezvous.py), taken for the rest of the batch;
    None when the range is used up there (logged: the allocation waits for a port to be freed)."""
    taken = rows.ports_in_use.setdefault(chief, set())
    port = pick_port(fx.config.port_range(), taken, seed=allocation_id)
    if port is None:
        log.warning(
            "allocation %s waits: no free rendezvous port on agent %s in %s",
            allocation_id,
            chief,
            fx.config.rendezvous_port_range,
        )
        return None
    taken.add(port)
    return port

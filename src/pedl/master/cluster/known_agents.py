"""The agents' rows as the scheduling pass last read them, kept from one pass to the next while no
commit wrote the agents table but the pass's own heartbeats (QUIET writes: db/change_counters.py).

With 1,000 agents, reading them all was most of a one-trial pass, and a pass read them three times:
check_agents (who fell silent), the snapshot (who takes work) and each batch (who still does). A
registration, a disconnection, an agent enabled, disabled or drained, anything written to the table
otherwise than as a heartbeat, makes the next use read them again. Only the pass uses it (one at a
time, under the controller's pass lock)."""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from sqlalchemy import String, select, type_coerce
from sqlalchemy.orm import Session

from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.db import models
from pedl.master.db.base import table_of
from pedl.master.db.change_counters import ChangeCounters
from pedl.master.db.json_columns import as_text, loads
from pedl.master.lifecycle.states import AgentState

AGENT = table_of(models.Agent)


class KnownAgent(NamedTuple):
    id: str
    state: str
    last_heartbeat: float
    disconnected_at: float | None
    resource_pool: str
    slot_ids: tuple[str, ...]
    container_runtime: str
    takes_work: bool  # enabled and not draining (its state and connection apart)

    @property
    def usable(self) -> bool:
        """CONNECTED in the database, enabled, not draining (the hub's connection apart)."""
        return self.takes_work and self.state == AgentState.CONNECTED


class SlotIdsCache:
    """Each agent's enabled slot ids by its slots column as last read: an agent's slots change only when
    it registers again or an admin enables or disables one, and parsing 1,000 agents' slots is most of
    reading them. Holds the agents of the last read only."""

    def __init__(self) -> None:
        self._ids: dict[str, tuple[str, tuple[str, ...]]] = {}

    def read(self, rows: Collection[tuple[str, str, str, str]]) -> list[tuple[str, str, tuple[str, ...], str]]:
        """(id, pool, slots text, runtime) rows -> (id, pool, slot ids, runtime)."""
        seen: dict[str, tuple[str, tuple[str, ...]]] = {}
        out = []
        for aid, pool, text, runtime in rows:
            cached = self._ids.get(aid)
            if cached is None or cached[0] != text:
                # a slot an admin disabled (det slot disable) is not the scheduler's to place on
                cached = (text, tuple(sl["id"] for sl in loads(text) or [] if sl.get("enabled", True)))
            seen[aid] = cached
            out.append((aid, pool, cached[1], runtime))
        self._ids = seen
        return out


_QUERY = (
    select(
        AGENT.c.id,
        # the state as its text: an enum made for each of 1,000 agents costs a third of the read
        type_coerce(AGENT.c.state, String),
        AGENT.c.last_heartbeat,
        AGENT.c.disconnected_at,
        AGENT.c.resource_pool,
        as_text(AGENT.c.slots),
        AGENT.c.container_runtime,
        AGENT.c.enabled,
        AGENT.c.draining,
    )
    .where(AGENT.c.state != AgentState.GONE)
    .order_by(AGENT.c.id)
)


def read_agents(s: Session, slot_ids: SlotIdsCache | None = None) -> dict[str, KnownAgent]:
    """Every agent not GONE, as the session sees it, by id: placement takes equal agents in this order,
    so it places the same way on SQLite and PostgreSQL, whatever order the table's rows lie in."""
    rows = s.execute(_QUERY).all()
    ids = (slot_ids or SlotIdsCache()).read([(r[0], r[4], r[5], r[6]) for r in rows])
    return {
        aid: KnownAgent(aid, state, beat, gone_at, pool, slots, runtime or "", bool(enabled) and not draining)
        for (aid, state, beat, gone_at, _, _, _, enabled, draining), (_, pool, slots, runtime) in zip(
            rows, ids, strict=True
        )
    }


class KnownAgents:
    """The agents not GONE, as committed, while the agents table's loud version is the one read with
    them. `rows` may read them, so it must be the first statement of its transaction: a transaction
    that already has its snapshot could read rows older than the version it records (a registration
    committed in between would go unseen until the next change), or see its own uncommitted writes."""

    def __init__(self, changes: ChangeCounters) -> None:
        self._changes = changes
        self._rows: dict[str, KnownAgent] | None = None
        self._version = -1
        self._slot_ids = SlotIdsCache()
        self.reads = 0  # how often the table was read (tests, benchmarks)

    def rows(self, s: Session) -> dict[str, KnownAgent]:
        # the version before the read: a commit after it, seen by the read or not, makes the next use read again
        version = self._changes.loud_version(AGENT.name)
        if self._rows is None or version != self._version:
            self._rows, self._version = read_agents(s, self._slot_ids), version
            self.reads += 1
        return self._rows

    def beats_written(self, beats: dict[str, float]) -> None:
        """The pass wrote these heartbeats (QUIET) in its transaction: call `forget` if it rolls back."""
        if self._rows is not None:
            for agent_id, beat in beats.items():
                row = self._rows.get(agent_id)
                if row is not None:
                    self._rows[agent_id] = row._replace(last_heartbeat=beat)

    def forget(self) -> None:
        self._rows = None

    def usable(self, s: Session, hub: AgentHub, agent_ids: Collection[str]) -> dict[str, str]:
        """agent id -> pool, for those of `agent_ids` that may still take work: connected (in the hub
        and the database), enabled, not draining."""
        rows, connected = self.rows(s), hub.connected_ids()
        return {
            aid: row.resource_pool
            for aid in agent_ids
            if (row := rows.get(aid)) is not None and row.usable and aid in connected
        }

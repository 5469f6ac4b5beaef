"""What a scheduling pass reads: the pending allocations, the usable agents, the allocations holding
slots and the experiments' scheduling settings, as plain columns (no ORM objects, JSON parsed once).

`read` takes it in one read-only transaction, outside the cluster lock and without SQLite's write
lock, so API requests and agent reports go on while a large pass is planned (see placement.py for
what is checked again under the lock before anything is written)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from pedl.config.master_config import MasterConfig
from pedl.master.cluster import job_queue
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.known_agents import KnownAgents, read_agents
from pedl.master.db import models
from pedl.master.db.bulk_rows import dialect_of, id_list, in_list
from pedl.master.db.engine import Database
from pedl.master.db.json_columns import as_text, loads
from pedl.master.lifecycle.states import HELD, LIVE_INSTANCE, AllocationState, InstanceState
from pedl.master.provisioner import moves

ALLOC = models.Allocation.__table__
TRIAL = models.Trial.__table__


class PendingRow(NamedTuple):
    id: str
    task_id: str
    trial_id: int | None
    name: str
    experiment_id: int | None
    resource_pool: str
    slots_needed: int
    priority: int
    queued_at: float
    wait_kind: str | None
    wait_reason: str | None
    wait_since: float | None


class HeldRow(NamedTuple):
    id: str
    experiment_id: int | None
    resource_pool: str
    priority: int
    assignment: list[dict[str, Any]]
    since: float  # started_at, else assigned_at
    preempt_requested: bool
    trial_id: int | None = None  # None: a command, notebook, shell or TensorBoard


class AgentRow(NamedTuple):
    id: str
    resource_pool: str
    slot_ids: tuple[str, ...]
    runs_containers: bool


class ExperimentSettings(NamedTuple):
    weight: float  # fair share
    max_slots: int | None
    position: float  # its job's queue position (cluster/job_queue.py)
    image: bool  # it names an image of its own (environment.image)


@dataclass
class PassSnapshot:
    pending: list[PendingRow] = field(default_factory=list)
    # connected (in the database and in the hub), enabled, not draining, not on an instance being emptied
    agents: list[AgentRow] = field(default_factory=list)
    held: list[HeldRow] = field(default_factory=list)  # read only where the scheduler reads running tasks
    used: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # agent -> held slot ids
    zero_slot: Counter[str] = field(default_factory=Counter)  # agent -> held allocations of no slots on it
    experiments: dict[int, ExperimentSettings] = field(default_factory=dict)
    spot: set[str] = field(default_factory=set)  # agents on live spot instances
    instances: dict[str, dict[str, int]] = field(default_factory=dict)  # pool -> live/booting counts
    dynamic: bool = False  # some pool has a provider
    # pending allocations that resume a trial which yielded its slots to new work: they queue from their
    # own arrival, behind that work, not at their experiment's place (scheduling/yielding.py)
    behind: set[str] = field(default_factory=set)


def read(db: Database, config: MasterConfig, hub: AgentHub, known: KnownAgents | None = None) -> PassSnapshot:
    """The snapshot in one read-only transaction (REPEATABLE READ on PostgreSQL, where each statement
    would otherwise see its own; SQLite's read transaction is one snapshot already). `known`: the
    agents' rows kept from the last pass (cluster/known_agents.py), read again where they changed."""
    with db.read_session() as s:
        if not db.is_sqlite:
            s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        return load(s, config, hub, known)


def load(s: Session, config: MasterConfig, hub: AgentHub, known: KnownAgents | None = None) -> PassSnapshot:
    """Everything the pass decides on; nothing but the pending allocations when there are none (and
    the agents first, where `known` must read them again)."""
    # first: the rows kept must be as new as their version, which a snapshot taken before could miss
    kept = known.rows(s) if known is not None else None
    pending = [
        PendingRow(*r)
        for r in s.execute(
            select(
                ALLOC.c.id,
                ALLOC.c.task_id,
                ALLOC.c.trial_id,
                ALLOC.c.name,
                TRIAL.c.experiment_id,
                ALLOC.c.resource_pool,
                ALLOC.c.slots_needed,
                ALLOC.c.priority,
                ALLOC.c.queued_at,
                ALLOC.c.wait_kind,
                ALLOC.c.wait_reason,
                ALLOC.c.wait_since,
            )
            .select_from(ALLOC.outerjoin(TRIAL, TRIAL.c.id == ALLOC.c.trial_id))
            .where(ALLOC.c.state == AllocationState.PENDING)
        )
    ]
    if not pending:
        return PassSnapshot()
    snap = PassSnapshot(pending=pending, dynamic=any(p.provider for p in config.resource_pools))
    snap.experiments = _experiments(s, config, {r.experiment_id for r in pending})
    # the scheduler reads running tasks for fair share, preemption and max_slots (placement.decide);
    # otherwise only the slots they hold, read as one string: thousands of rows cost more to fetch
    if any(p.scheduler.type == "fair_share" or p.scheduler.preemption for p in config.resource_pools) or any(
        x.max_slots is not None for x in snap.experiments.values()
    ):
        snap.held = [
            HeldRow(
                aid,
                exp_id,
                pool,
                priority,
                loads(assignment) or [],
                started or assigned or 0.0,
                bool(preempting),
                trial_id,
            )
            for aid, exp_id, pool, priority, assignment, started, assigned, preempting, trial_id in s.execute(
                select(
                    ALLOC.c.id,
                    TRIAL.c.experiment_id,
                    ALLOC.c.resource_pool,
                    ALLOC.c.priority,
                    as_text(ALLOC.c.assignment),
                    ALLOC.c.started_at,
                    ALLOC.c.assigned_at,
                    ALLOC.c.preempt_requested,
                    ALLOC.c.trial_id,
                )
                .select_from(ALLOC.outerjoin(TRIAL, TRIAL.c.id == ALLOC.c.trial_id))
                .where(ALLOC.c.state.in_(HELD))
            )
        ]
        places = [place for h in snap.held for place in h.assignment]
        snap.experiments |= _experiments(s, config, {h.experiment_id for h in snap.held} - snap.experiments.keys())
    else:
        held = s.scalar(select(func.aggregate_strings(as_text(ALLOC.c.assignment), ",")).where(ALLOC.c.state.in_(HELD)))
        places = [place for assignment in (loads(f"[{held}]") if held else []) for place in assignment or []]
    for place in places:
        if place["slot_ids"]:
            snap.used[place["agent_id"]].update(place["slot_ids"])
        else:
            snap.zero_slot[place["agent_id"]] += 1
    draining: set[str] = set()
    if snap.dynamic:
        snap.instances = _instance_counts(s)
        snap.behind = moves.resumes_yield(s, pending)
        # agents on spot instances take work first: it costs a fraction of on-demand
        snap.spot = set(
            s.scalars(
                select(models.Instance.id).where(
                    models.Instance.spot.is_(True), models.Instance.state.in_(LIVE_INSTANCE)
                )
            )
        )
        # an instance the move planner empties takes no new work
        draining = set(
            s.scalars(
                select(models.Instance.id).where(
                    or_(models.Instance.draining_since.is_not(None), models.Instance.cordoned_since.is_not(None)),
                    models.Instance.state.in_(LIVE_INSTANCE),
                )
            )
        )
    connected = hub.connected_ids()
    agents = kept if kept is not None else read_agents(s)
    snap.agents = [
        AgentRow(a.id, a.resource_pool, a.slot_ids, a.container_runtime == "docker")
        for a in agents.values()
        if a.usable and a.id in connected and a.id not in draining
    ]
    return snap


def _experiments(s: Session, config: MasterConfig, ids: Iterable[int | None]) -> dict[int, ExperimentSettings]:
    """Each experiment's weight and max_slots (resources), queue position and whether it runs in a
    container by its own environment.image (or else by its pool's task_container_defaults: placement)."""
    ids = sorted(i for i in ids if i is not None)
    if not ids:
        return {}
    X = models.Experiment
    out: dict[int, ExperimentSettings] = {}
    dialect = dialect_of(s)
    for eid, text, position in s.execute(
        select(X.id, as_text(X.config), job_queue.POSITION).where(in_list(X.id, dialect)),
        {"ids": id_list(dialect, ids)},
    ):
        cfg = loads(text) or {}
        resources = cfg.get("resources") or {}
        max_slots = resources.get("max_slots")
        out[eid] = ExperimentSettings(
            float(resources.get("weight", 1.0)),
            int(max_slots) if max_slots is not None else None,
            position,
            bool((cfg.get("environment") or {}).get("image")),
        )
    return out


def _instance_counts(s: Session) -> dict[str, dict[str, int]]:
    """pool -> live_instances and booting_instances, for the wait reasons of dynamic pools."""
    out: dict[str, dict[str, int]] = {}
    for pool, state, n in s.execute(
        select(models.Instance.resource_pool, models.Instance.state, func.count())
        .where(models.Instance.state.in_(LIVE_INSTANCE))
        .group_by(models.Instance.resource_pool, models.Instance.state)
    ):
        counts = out.setdefault(pool, {"live_instances": 0, "booting_instances": 0})
        counts["live_instances"] += n
        if state in (InstanceState.REQUESTED, InstanceState.STARTING):
            counts["booting_instances"] += n
    return out

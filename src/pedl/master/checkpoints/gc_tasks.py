"""Checkpoint GC as a task on an agent, the way Determined runs it: where a deletion runs (`on_agent`,
pure), the task that runs it (`launch`: a GenericTask of kind "checkpoint_gc", 0 slots, in the
experiment's pool, run as the owner's agent user) and what its end means (`ended`, `outcome`).

The master decides and checks everything before: the task is given only the exact directories it
resolved (and, to remove files, the exact entries), ships pedl/launch/checkpoint_gc_task.py with
pedl/common's local_removal.py and checkpoint_files.py, and trusts the task for one thing only: what
each of its checkpoints has left, reported on POST /api/v1/allocations/{id}/checkpoint_gc
(checkpoints/gc_reports.py). The uuids given, who asked and the uuids reported are kept in the
task's secrets."""

from __future__ import annotations

import base64
import json
import uuid as uuid_lib
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common.checkpoint_storage import SharedFSStorage, storage_from_config
from pedl.master.db import models
from pedl.master.lifecycle import allocations as cluster_allocations
from pedl.master.lifecycle import checkpoint_gc_holds
from pedl.master.lifecycle.checkpoint_gc_task_rows import (
    KIND,
    ORIGIN_GC,
    SCRIPT_PATH,
    SECRET,
    SPEC_PATH,
    description,
    ended,
    overdue,
)
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import LIVE_ALLOCATION, AgentState, AllocationState
from pedl.master.lifecycle.transitions import record_event
from pedl.master.model_registry.versions import is_registered
from pedl.master.tasks import model_definitions

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

FILESYSTEM_TYPES = ("shared_fs", "directory")


def on_agent(storage: Mapping[str, Any], pool_has_agent: bool) -> bool:
    """Whether a deletion runs as a task on an agent (else the master does it itself): the checkpoints
    are on a filesystem an agent can reach, and an agent of the pool is up to run it (pedl boots no
    instance just to delete files)."""
    return (storage.get("type") or "shared_fs") in FILESYSTEM_TYPES and pool_has_agent


def pool_has_agent(s: Session, pool: str, connected: Collection[str]) -> bool:
    """Whether an agent of `pool` is connected (in the hub: `connected`, and the database) and enabled."""
    a = models.Agent
    ids = s.scalars(
        select(a.id).where(
            a.resource_pool == pool, a.state == AgentState.CONNECTED, a.enabled.is_(True), a.draining.is_(False)
        )
    )
    return any(i in connected for i in ids)


def runs_on_agent(ctx: MasterContext, experiment_id: int, storage: Mapping[str, Any]) -> bool:
    """`on_agent` for an experiment's checkpoints now (its pool's agents read in a short transaction)."""
    if not ctx.config.checkpoint_gc_tasks or not on_agent(storage, pool_has_agent=True):
        return False
    with ctx.db.read_session() as s:
        exp = s.get(models.Experiment, experiment_id)
        return exp is not None and pool_has_agent(s, exp.resource_pool, ctx.hub.connected_ids())


def directory(storage: Mapping[str, Any], uuid: str) -> str:
    """A checkpoint's directory, resolved as storage_roots.checkpoint_problem checked it."""
    fs = storage_from_config(storage)
    assert isinstance(fs, SharedFSStorage)
    return str(fs.path_of(uuid))


def start(ctx: MasterContext, job: Job) -> str | None:
    """`launch` in its own transaction under the cluster lock; the task's id (None: nothing to do)."""

    def work(s: Session) -> str | None:
        task = launch(ctx.controller, s, job)
        return task.id if task is not None else None

    task_id = ctx.controller.run(work)
    ctx.controller.wake()
    return task_id


@dataclass(frozen=True)
class Item:
    """One checkpoint's share: its directory as the master resolved it, and either the whole of it
    (`delete`) or the `entries` of its listing to remove (none: only list it again)."""

    uuid: str
    dir: str
    delete: bool = True
    entries: tuple[str, ...] = ()


@dataclass(frozen=True)
class Job:
    experiment_id: int
    items: list[Item]
    origin: str = ORIGIN_GC
    what: str = "deleted"  # how the rows' events name it (a user's request)
    by: str = ""  # the user who asked
    policy: dict[str, int] = field(default_factory=dict)  # the worker's RetentionPolicy


def launch(fx: ClusterEffects, s: Session, job: Job) -> models.GenericTask | None:
    """The GC task of `job` with its PENDING allocation, in the caller's transaction (under the cluster
    lock); None when nothing is left to do (each checkpoint registered as a model version, or deleted,
    meanwhile). Each checkpoint whose files it changes is held first (checkpoint_gc_holds.hold: out of
    COMPLETED, not served) until the task's report marks it."""
    exp = s.get(models.Experiment, job.experiment_id)
    items = [i for i in job.items if not is_registered(s, i.uuid)]
    if exp is None or not items:
        return None
    task_id = str(uuid_lib.uuid4())
    changing = [i.uuid for i in items if i.delete or i.entries]
    held = set(checkpoint_gc_holds.hold(s, fx.now, changing, task_id, job.what))
    items = [i for i in items if i.uuid in held or not (i.delete or i.entries)]
    if not items:
        return None
    pool = fx.config.pool(exp.resource_pool)
    priority = pool.scheduler.default_priority if pool is not None else cluster_allocations.DEFAULT_PRIORITY
    project = s.get(models.Project, exp.project_id)
    spec = {"checkpoints": [{**asdict(i), "entries": list(i.entries)} for i in items]}
    secret = {
        "origin": job.origin,
        "uuids": [i.uuid for i in items],
        "what": job.what,
        "by": job.by,
        "policy": dict(job.policy),
        "reported": [],
    }
    config = {
        "resources": {"slots": 0, "resource_pool": exp.resource_pool, "priority": priority},
        "description": description(exp.id),
    }
    task = models.GenericTask(
        id=task_id,
        kind=KIND,
        owner_id=exp.owner_id,
        workspace_id=project.workspace_id if project else 1,
        description=description(exp.id),
        config=config,
        context=_context(spec),
        experiment_ids=[exp.id],
        trial_ids=[],
        secrets={SECRET: secret},
        start_time=fx.now,
        last_activity=fx.now,
    )
    s.add(task)
    s.flush()
    cluster_allocations.new_generic(fx, s, task)
    record_event(s, fx.now, "experiment", exp.id, f"checkpoint GC task {task_id} queued for {len(items)} checkpoint(s)")
    return task


def _file(path: str, data: bytes) -> dict[str, Any]:
    return {"path": path, "type": 48, "mode": 0o644, "content": base64.b64encode(data).decode()}


def _context(spec: dict[str, Any]) -> bytes:
    """.pedl/ with the script, the two pedl/common modules it imports and its spec."""

    def source(package: str, name: str) -> bytes:
        return resources.files(package).joinpath(name).read_bytes()

    files = [
        {"path": ".pedl", "type": 53, "mode": 0o755},
        _file(SCRIPT_PATH, source("pedl.launch", "checkpoint_gc_task.py")),
        _file(".pedl/pedl_local_removal.py", source("pedl.common", "local_removal.py")),
        _file(".pedl/pedl_checkpoint_files.py", source("pedl.common", "checkpoint_files.py")),
        _file(SPEC_PATH, json.dumps(spec).encode()),
    ]
    tgz, _, _ = model_definitions.files_to_tgz(files, None)
    return tgz


def _live_rows(s: Session) -> list[tuple[models.Allocation, str]]:
    return list(
        s.execute(
            select(models.Allocation, models.GenericTask.id)
            .join(models.GenericTask, models.GenericTask.id == models.Allocation.task_id)
            .where(models.Allocation.state.in_(sorted(LIVE_ALLOCATION)), models.GenericTask.kind == KIND)
        ).all()
    )


def end_overdue(ctx: MasterContext) -> list[str]:
    """End every live GC task `overdue` says must end; returns their ids. They are looked for in a read
    (no cluster lock: the worker asks on every pass), and only if there are any, read again and ended in
    one transaction under the lock. A waiting one ends at once (its end is handled here as an agent's
    report would be: a collection is asked again, a user's request warns); a running one is killed and its
    agent's report of the end does the same."""

    def due(rows: list[tuple[models.Allocation, str]], now: float) -> list[tuple[models.Allocation, str, str]]:
        return [
            (alloc, task_id, why)
            for alloc, task_id in rows
            if (why := overdue(alloc.state, alloc.queued_at, alloc.assigned_at, now)) is not None
        ]

    with ctx.db.read_session() as s:
        if not due(_live_rows(s), ctx.controller.now):
            return []

    def work(s: Session) -> list[str]:
        done = []
        for alloc, task_id, why in due(_live_rows(s), ctx.controller.now):
            cluster_allocations.kill(ctx.controller, s, alloc, f"checkpoint GC task {task_id} ended: {why}")
            if alloc.state == AllocationState.TERMINATED:
                ended(ctx.controller, s, alloc)
            done.append(task_id)
        return done

    ended_ids = ctx.controller.run(work)
    if ended_ids:
        ctx.controller.wake()
    return ended_ids

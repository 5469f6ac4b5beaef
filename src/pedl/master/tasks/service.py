"""Commands, notebooks, shells and TensorBoards (Determined's NTSC tasks): launch, list, describe,
kill and reprioritise. Each is a GenericTask row run by one allocation (trial_id NULL) in a resource
pool, scheduled, provisioned for and ended like a trial's; what differs by kind (its entrypoint, its
default slots, what it is started with) is in lifecycle/task_kinds.py.

Anyone signed in may list and describe tasks (as Determined does, and as experiments are); only the
owner or an admin may kill one, change it, read a shell's key, or pass the proxy to its service."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from pedl.common.agent_protocol import AgentUserGroup
from pedl.config.task_config import KINDS, TaskConfig, parse_task_config
from pedl.config.task_container import per_device
from pedl.errors import Conflict, InvalidArgument, NotFound, TooManyRequests
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.identity.authz import require_owner, require_user
from pedl.master.lifecycle import agent_user_groups, task_kinds
from pedl.master.lifecycle import allocations as cluster_allocations
from pedl.master.lifecycle.agent_user_groups import TaskUsers
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import LIVE_ALLOCATION, AllocationState
from pedl.master.tasks import bind_mount_roots, model_definitions, to_wire
from pedl.master.wire.generic_task import AnyTask
from pedl.master.workspaces import templates

if TYPE_CHECKING:
    from pedl.config.master_config import MasterConfig
    from pedl.master.context import MasterContext

A = AllocationState
G = models.GenericTask
ALLOC = models.Allocation
DEFAULT_WORKSPACE = 1  # Uncategorized
MAX_LISTED = 1000  # a list answers the newest this many (bounded work per request)
# an ended task stays listed, TERMINATED, this long after its end (Determined's lists show them too: `det cmd
# list` after a `det cmd run`); the task and its logs stay readable by id for as long as they are stored
ENDED_LISTED_FOR = 24 * 3600.0


@dataclass(frozen=True)
class Shown:
    """A task as the API shows it: the row, its allocation (None: never queued), its owner's name and
    who it runs as on the agent (the owner's agent user group, else security.default_task; None: the
    agent's own user)."""

    task: models.GenericTask
    alloc: models.Allocation | None
    username: str
    run_as: AgentUserGroup | None = None

    def wire(self, who: Caller | None) -> AnyTask:
        """As its routes show it to `who`: a shell's private key only to its owner and admins."""
        mine = who is not None and who.user is not None and (who.user.admin or who.user.id == self.task.owner_id)
        return to_wire.generic_task(self.task, self.alloc, self.username, self.run_as, private_key=mine)


@dataclass(frozen=True)
class Described:
    """A task as its launch and get routes answer: the message and the config it runs with."""

    task: AnyTask
    config: dict[str, Any]


@dataclass(frozen=True)
class LaunchRequest:
    config: Any = None  # the request's config object (None: the defaults)
    files: Any = None  # Determined's v1File list: the task's context directory
    template: str | None = None
    workspace_id: int | None = None
    experiment_ids: tuple[int, ...] = ()  # a TensorBoard's
    trial_ids: tuple[int, ...] = ()


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise InvalidArgument(f"unknown task kind {kind!r} (kinds: {', '.join(KINDS)})")


def launch(ctx: MasterContext, who: Caller, kind: str, req: LaunchRequest) -> Described:
    """Start a task of `kind` for the caller: validated whole (each problem names its field), then one
    row and its PENDING allocation in one transaction under the cluster lock."""
    check_kind(kind)
    owner = require_user(who, f"start a {kind}")

    def work(s: Session) -> Described:
        data = req.config if req.config is not None else {}
        if req.template:
            template = templates.usable(s, req.template, owner, "templateName")
            if isinstance(data, dict):
                data = templates.merged(template.config, data)
        cfg = parse_task_config(kind, data, limits=ctx.config.limits)
        workspace_id = _open_workspace(s, req.workspace_id)
        fx: ClusterEffects = ctx.controller
        stored = effective_config(fx, kind, cfg)
        if stored["resources"]["slots"] == 0:
            _check_zero_slot(s, owner, fx.config.limits.max_zero_slot_tasks_per_user)
        now = fx.now
        task_id = str(uuid.uuid4())
        prepared = task_kinds.prepare(kind, s, owner, cfg, req.experiment_ids, req.trial_ids)
        stored.update(prepared.config)
        bind_mount_roots.check(stored.get("bind_mounts") or [], fx.config.security.bind_mounts, "config.bind_mounts")
        environment = stored.get("environment") or {}
        if environment.get("image") is not None:  # `det tensorboard config` shows {cpu, cuda, rocm}
            stored["environment"] = {**environment, "image": per_device(environment["image"])}
        context = _context(
            req.files, [*task_kinds.context_files(kind), *prepared.files], fx.config.limits.max_model_definition_bytes
        )
        task = G(
            id=task_id,
            kind=kind,
            owner_id=owner.id,
            workspace_id=workspace_id,
            description=cfg.description or task_kinds.default_description(kind, task_id, prepared),
            config=stored,
            context=context,
            experiment_ids=list(prepared.experiment_ids),
            trial_ids=list(prepared.trial_ids),
            secrets=prepared.secrets,
            start_time=now,
            last_activity=now,
        )
        s.add(task)
        s.flush()
        alloc = cluster_allocations.new_generic(fx, s, task)
        return Described(Shown(task, alloc, owner.username, _run_as(fx.config, owner)).wire(who), task.config)

    out = ctx.controller.run(work)
    ctx.controller.wake()
    return out


def effective_config(fx: ClusterEffects, kind: str, cfg: TaskConfig) -> dict[str, Any]:
    """The config as stored and run: pool, slots and priority filled in, the pool known."""
    master = fx.config
    data = cfg.model_dump(mode="json")
    slots = cfg.resources.slots if cfg.resources.slots is not None else task_kinds.default_slots(kind)
    pool_name = cfg.resources.resource_pool or (
        master.default_compute_resource_pool if slots > 0 else master.default_aux_resource_pool
    )
    pool = master.pool(pool_name)
    if pool is None:
        names = ", ".join(p.pool_name for p in master.resource_pools)
        raise InvalidArgument.at(
            "config.resources.resource_pool", f"no resource pool named {pool_name!r} (pools: {names})"
        )
    if pool.max_slots_per_trial and slots > pool.max_slots_per_trial:
        raise InvalidArgument.at(
            "config.resources.slots", f"{slots} exceeds pool {pool_name}'s limit of {pool.max_slots_per_trial}"
        )
    data["resources"].update(
        slots=slots, resource_pool=pool_name, priority=cfg.resources.priority or pool.scheduler.default_priority
    )
    return data


def _check_zero_slot(s: Session, owner: models.User, limit: int) -> None:
    """A user's live tasks of no slots (commands, notebooks, shells, TensorBoards; not the master's
    checkpoint GC tasks) are bounded: past limits.max_zero_slot_tasks_per_user a launch is a 429 naming it.
    Counted in the launch's transaction, under the cluster lock."""
    live = (
        s.scalar(
            select(func.count())
            .select_from(ALLOC)
            .join(G, G.id == ALLOC.task_id)
            .where(
                G.owner_id == owner.id,
                G.kind != task_kinds.CHECKPOINT_GC,
                ALLOC.state.in_(sorted(LIVE_ALLOCATION)),
                ALLOC.slots_needed == 0,
            )
        )
        or 0
    )
    if live >= limit:
        message = (
            f"you have {live} live tasks of no slots, the most a user may have "
            "(limits.max_zero_slot_tasks_per_user); kill some and retry, or ask for slots"
        )
        raise TooManyRequests(
            f"config.resources.slots: {message}", fields=[{"field": "config.resources.slots", "message": message}]
        )


def _open_workspace(s: Session, workspace_id: int | None) -> int:
    """The workspace a task is started in: it must exist and not be archived (Determined: 404)."""
    wid = workspace_id or DEFAULT_WORKSPACE
    ws = s.get(models.Workspace, wid)
    if ws is None:
        raise NotFound(
            f"workspaceId: workspace {wid} not found", fields=[{"field": "workspaceId", "message": "not found"}]
        )
    if ws.archived:
        raise NotFound(
            f"workspaceId: workspace {wid} is archived; no task can start in it",
            fields=[{"field": "workspaceId", "message": "archived"}],
        )
    return wid


def _context(files: Any, added: list[dict[str, Any]], max_bytes: int) -> bytes | None:
    """The task's context directory as a gzipped tar: the request's files (Determined's v1File list,
    each problem named as files[i]...) and the kind's own (under .pedl/)."""
    if files is not None and not isinstance(files, list):
        raise InvalidArgument.at("files", "must be a list of files")
    if not files and not added:
        return None
    try:
        tgz, _, _ = model_definitions.files_to_tgz([*(files or []), *added], max_bytes)
    except InvalidArgument as exc:
        raise InvalidArgument(
            str(exc).replace("modelDefinition", "files"),
            fields=[{**f, "field": f["field"].replace("modelDefinition", "files")} for f in exc.fields or []],
        ) from None
    return tgz


def _run_as(master: MasterConfig, owner: models.User | None) -> AgentUserGroup | None:
    """Who the owner's tasks run as (as task_specs tells the agent)."""
    if owner is None:
        return None
    return TaskUsers.of(master.security).run_as(owner.id, owner.username, agent_user_groups.of_user(owner))


def _shown(s: Session, task: models.GenericTask, master: MasterConfig) -> Shown:
    alloc = s.scalar(select(ALLOC).where(ALLOC.task_id == task.id).order_by(ALLOC.queued_at.desc()).limit(1))
    owner = s.get(models.User, task.owner_id)
    return Shown(task, alloc, owner.username if owner else "", _run_as(master, owner))


def _get(s: Session, kind: str | None, task_id: str) -> models.GenericTask:
    task = s.get(G, task_id) if len(task_id) <= 128 else None
    if task is None or (kind is not None and task.kind != kind):
        raise NotFound(f"{kind or 'task'} {task_id} not found")
    return task


def describe(ctx: MasterContext, who: Caller, kind: str | None, task_id: str) -> Described:
    with ctx.db.read_session() as s:
        task = _get(s, kind, task_id)
        return Described(_shown(s, task, ctx.config).wire(who), task.config)


def find(ctx: MasterContext, task_id: str) -> Shown | None:
    """The generic task of this id, or None (a trial's task, or no task)."""
    with ctx.db.read_session() as s:
        task = s.get(G, task_id) if len(task_id) <= 128 else None
        return _shown(s, task, ctx.config) if task is not None else None


def listing(
    ctx: MasterContext,
    who: Caller,
    kind: str,
    *,
    usernames: list[str],
    user_ids: list[int],
    workspace_id: int | None,
) -> list[AnyTask]:
    """The kind's live tasks and those that ended in the last ENDED_LISTED_FOR, newest first; a
    workspace that does not exist is a 404, and the tasks of a deleted workspace (killed with it) are not
    listed (Determined's test_workspace_delete_notebook); each stays readable by its id."""
    check_kind(kind)
    with ctx.db.read_session() as s:
        if workspace_id and s.get(models.Workspace, workspace_id) is None:
            raise NotFound(f"workspace {workspace_id} not found")
        recent = ctx.clock.now() - ENDED_LISTED_FOR
        stmt = (
            select(G, ALLOC, models.User)
            .join(ALLOC, ALLOC.task_id == G.id)
            .join(models.User, models.User.id == G.owner_id)
            .join(models.Workspace, models.Workspace.id == G.workspace_id)
            .where(G.kind == kind, or_(ALLOC.state.in_(LIVE_ALLOCATION), ALLOC.ended_at >= recent))
        )
        if usernames:
            stmt = stmt.where(models.User.username.in_(usernames))
        if user_ids:
            stmt = stmt.where(G.owner_id.in_(user_ids))
        if workspace_id:
            stmt = stmt.where(G.workspace_id == workspace_id)
        rows = s.execute(stmt.order_by(G.start_time.desc()).limit(MAX_LISTED)).all()
        return [Shown(t, a, owner.username, _run_as(ctx.config, owner)).wire(who) for t, a, owner in rows]


def kill(ctx: MasterContext, who: Caller, kind: str | None, task_id: str) -> AnyTask:
    """Kill a task (its owner or an admin); killing one that has ended changes nothing."""

    def work(s: Session) -> AnyTask:
        task = _get(s, kind, task_id)
        require_owner(who, task.owner_id, f"kill {task.kind} {task_id}")
        shown = _shown(s, task, ctx.config)
        if shown.alloc is not None and shown.alloc.state in LIVE_ALLOCATION:
            cluster_allocations.kill(ctx.controller, s, shown.alloc, f"{task.kind} killed by {who.user.username}")
        return _shown(s, task, ctx.config).wire(who)

    out = ctx.controller.run(work)
    ctx.controller.wake()
    return out


def set_priority(ctx: MasterContext, who: Caller, kind: str, task_id: str, priority: int) -> AnyTask:
    if not 1 <= priority <= 99:
        raise InvalidArgument.at("priority", "must be from 1 (most urgent) to 99")

    def work(s: Session) -> AnyTask:
        task = _get(s, kind, task_id)
        require_owner(who, task.owner_id, f"change {kind} {task_id}")
        shown = _shown(s, task, ctx.config)
        if shown.alloc is None or shown.alloc.state not in LIVE_ALLOCATION:
            raise Conflict(f"{kind} {task_id} has ended; its priority cannot change")
        shown.alloc.priority = priority
        task.config = {**task.config, "resources": {**task.config.get("resources", {}), "priority": priority}}
        return _shown(s, task, ctx.config).wire(who)

    out = ctx.controller.run(work)
    ctx.controller.wake()
    return out


def kill_in_workspace(fx: ClusterEffects, s: Session, workspace_id: int, reason: str) -> int:
    """Kill every live task started in a workspace (it is being deleted); returns how many."""
    live = s.scalars(
        select(ALLOC)
        .join(G, G.id == ALLOC.task_id)
        .where(G.workspace_id == workspace_id, ALLOC.state.in_(LIVE_ALLOCATION))
    ).all()
    for alloc in live:
        cluster_allocations.kill(fx, s, alloc, reason)
    return len(live)

"""What users change of checkpoints (Determined's SDK and det): metadata (add_metadata/remove_metadata send
the whole new metadata), delete (DELETE /checkpoints) and remove files by glob (det checkpoint rm, the SDK's
remove_files). Only the owner of the checkpoint's experiment or an admin may; a checkpoint registered as a
model version is refused, naming the version.

Deleting and removing files go as checkpoint garbage collection goes (checkpoint_deletion.delete_from_storage):
the checkpoints are read and checked in a short transaction, their storage (shared_fs or S3, inside the
master's storage roots) is changed with no transaction open, and the rows are marked in another. Where an
agent of the experiment's pool is up and the storage is a filesystem, the master hands the exact directories
(and entries) to a checkpoint GC task and answers at once, as Determined does (checkpoints/gc_tasks.py);
otherwise (S3, no agent) the request returns when the files are gone."""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.config.checkpoint_storage import experiment_storage
from pedl.errors import Forbidden, InvalidArgument, NotFound, Unavailable
from pedl.master.caller_cache import Caller
from pedl.master.checkpoints import gc_tasks as checkpoint_gc_tasks
from pedl.master.checkpoints import service as checkpoints
from pedl.master.checkpoints.deletion import Deletion, Outcome, delete_from_storage
from pedl.master.checkpoints.file_removal import remove_entries
from pedl.master.checkpoints.globs import check_globs, doomed
from pedl.master.checkpoints.storage_roots import allowed_roots, checkpoint_problem
from pedl.master.db import models
from pedl.master.identity.authz import require_admin, require_owner, require_user
from pedl.master.lifecycle import checkpoint_gc_task_rows
from pedl.master.lifecycle.checkpoint_gc_holds import BY_REQUEST, hold, release, repoint_latest
from pedl.master.lifecycle.states import CheckpointState
from pedl.master.lifecycle.transitions import record_event, set_checkpoint_state
from pedl.master.model_registry.service import check_metadata
from pedl.master.model_registry.versions import is_registered
from pedl.master.wire.checkpoint import Checkpoint

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

C = CheckpointState
MAX_UUIDS = 100  # checkpoints per request: each is storage I/O while the request waits
StorageFor = Callable[[Mapping[str, Any]], CheckpointStorage]


def check_uuids(uuids: Iterable[str], field: str = "checkpointUuids") -> list[str]:
    """The uuids asked for, canonical and without repeats."""
    uuids = list(uuids)
    if not uuids:
        raise InvalidArgument.at(field, "name at least one checkpoint")
    if len(uuids) > MAX_UUIDS:
        raise InvalidArgument.at(field, f"{len(uuids)} checkpoints, more than the limit of {MAX_UUIDS} per request")
    out = []
    for i, text in enumerate(uuids):
        try:
            out.append(str(uuid_lib.UUID(text)))
        except (TypeError, ValueError, AttributeError):
            raise InvalidArgument.at(f"{field}[{i}]", f"{text!r} is not a checkpoint UUID") from None
    return list(dict.fromkeys(out))


def _named(uuids: list[str]) -> str:
    return f"checkpoint {uuids[0]}" if len(uuids) == 1 else f"checkpoints {', '.join(uuids)}"


def _require_editor(s: Session, who: Caller, row: models.Checkpoint, action: str) -> models.Experiment | None:
    exp = s.get(models.Experiment, row.experiment_id) if row.experiment_id is not None else None
    if exp is None:
        require_admin(who, f"{action} checkpoint {row.uuid}, which belongs to no experiment")
    else:
        require_owner(who, exp.owner_id, f"{action} checkpoint {row.uuid} (of experiment {exp.id})")
    return exp


def _refuse_registered(s: Session, uuids: list[str], action: str) -> None:
    """Determined refuses to delete (or remove files of) a model version's checkpoint; so does pedl."""
    version, model = models.ModelVersion, models.RegisteredModel
    rows = s.execute(
        select(version.checkpoint_uuid, model.name, version.version)
        .join(model, model.id == version.model_id)
        .where(version.checkpoint_uuid.in_(uuids))
        .order_by(model.name, version.version)
        .limit(6)
    )
    named = [f"checkpoint {u} is {name!r} version {n}" for u, name, n in rows]
    if named:
        more = " and more" if len(named) > 5 else ""
        raise InvalidArgument(
            f"cannot {action} a checkpoint registered in the model registry: "
            f"{'; '.join(named[:5])}{more}; delete those model versions first",
            fields=[{"field": "checkpointUuids", "message": "registered as a model version"}],
        )


# -- metadata -----------------------------------------------------------------------------------


def set_metadata(ctx: MasterContext, who: Caller, uuid: str, metadata: dict[str, Any]) -> Checkpoint:
    """Replace the checkpoint's metadata (the SDK sends the whole new one). `steps_completed` is the
    step the checkpoint was taken at: it may be left out (it is shown anyway), never changed."""
    check_metadata(metadata, "checkpoint.metadata")
    with ctx.db.session() as s:
        require_user(who, "change a checkpoint's metadata")
        row = checkpoints.get(s, uuid)
        _require_editor(s, who, row, "change the metadata of")
        if "steps_completed" in metadata and str(metadata["steps_completed"]) != str(row.steps_completed):
            raise InvalidArgument.at(
                "checkpoint.metadata.steps_completed",
                f"is the step checkpoint {uuid} was taken at ({row.steps_completed}); it cannot change",
            )
        if metadata != row.meta:
            row.meta = dict(metadata)
            record_event(
                s, ctx.clock.now(), "checkpoint", uuid, f"metadata set by {who.user.username} ({len(metadata)} keys)"
            )
        s.flush()
        return checkpoints.shown(s, [row])[0]


# -- deleting files ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Targets:
    deletions: list[Deletion]  # those that still have files
    already_deleted: list[str]
    experiment_of: dict[str, int] = field(default_factory=dict)  # uuid -> its experiment


def _targets(ctx: MasterContext, who: Caller, uuids: list[str], action: str) -> _Targets:
    """Read and check, in one short transaction: every checkpoint exists (404 naming those that do
    not), the caller may change each, none is a model version's, and each lies inside the roots."""
    default = ctx.config.effective_checkpoint_storage().model_dump(mode="json")
    roots = allowed_roots(ctx.config)
    with ctx.db.read_session() as s:
        require_user(who, f"{action} checkpoints")
        rows = {c.uuid: c for c in s.scalars(select(models.Checkpoint).where(models.Checkpoint.uuid.in_(uuids)))}
        missing = [u for u in uuids if u not in rows]
        if missing:
            raise NotFound(f"{_named(missing)} not found")
        out = _Targets([], [])
        for uuid in uuids:
            row = rows[uuid]
            exp = _require_editor(s, who, row, action)
            if row.state == C.DELETED:
                out.already_deleted.append(uuid)
                continue
            if exp is None or row.trial_id is None:
                raise Forbidden(
                    f"cannot {action} checkpoint {uuid}: it belongs to no experiment, so the master "
                    "does not know where its files are"
                )
            storage = experiment_storage(exp.config, default)
            why = checkpoint_problem(storage, uuid, roots, recorded=row.storage or {})
            if why is not None:
                raise Forbidden(f"cannot {action} checkpoint {uuid}: {why}; the master leaves it alone")
            out.deletions.append(Deletion(uuid, row.trial_id, storage, dict(row.storage or {})))
            out.experiment_of[uuid] = exp.id
        _refuse_registered(s, [d.uuid for d in out.deletions], action)
    return out


def _registered(ctx: MasterContext) -> Callable[[str], bool]:
    def check(uuid: str) -> bool:
        with ctx.db.read_session() as s:
            return is_registered(s, uuid)

    return check


def _mark(ctx: MasterContext, who: Caller, left: dict[str, dict[str, int]], what: str) -> None:
    ctx.controller.run(lambda s: mark_left(s, ctx.clock.now(), left, f"{what} by {who.user.username}"))


def mark_left(s: Session, now: float, left: Mapping[str, Mapping[str, int]], reason: str) -> None:
    """Record what storage now holds of each checkpoint, ending its hold (checkpoint_gc_holds): nothing ->
    DELETED; other files than stored -> the new files and PARTIALLY_DELETED; the same -> unchanged. A trial
    whose latest checkpoint lost files resumes from its newest complete one. A user's request done here or
    by its checkpoint GC task (checkpoints/gc_reports.py) marks the rows with this."""
    trials = set()
    for uuid, files in left.items():
        row = s.get(models.Checkpoint, uuid)
        if row is None or row.state == C.DELETED:  # deleted meanwhile (garbage collection): stays so
            continue
        row.deleting_by = None
        if not files:
            set_checkpoint_state(s, now, row, C.DELETED, reason)
        elif files != {k: int(v) for k, v in (row.resources or {}).items()}:
            gone = len(set(row.resources or {}) - set(files))
            row.resources, row.size_bytes = dict(files), sum(files.values())
            why = f"{reason}: {gone} entries removed, {len(files)} left"
            if not set_checkpoint_state(s, now, row, C.PARTIALLY_DELETED, why):
                record_event(s, now, "checkpoint", uuid, why)
        else:
            continue
        if row.trial_id is not None:
            trials.add(row.trial_id)
    repoint_latest(s, trials)


def _hold(ctx: MasterContext, who: Caller, deletions: list[Deletion], what: str) -> set[str]:
    """Hold the checkpoints the master itself is about to change (checkpoint_gc_holds.hold); -> those held."""
    uuids = [d.uuid for d in deletions]
    return set(
        ctx.controller.run(lambda s: hold(s, ctx.clock.now(), uuids, BY_REQUEST, f"{what} by {who.user.username}"))
    )


def _release_failed(ctx: MasterContext, outcome: Outcome) -> None:
    failed = [*outcome.failed, *outcome.refused]
    if failed:
        ctx.controller.run(lambda s: release(s, ctx.clock.now(), failed, "the master could not change its files"))


def _raise_failures(outcome: Outcome, targets: _Targets, action: str) -> None:
    kept = {
        d.uuid: "it was registered as a model version meanwhile"
        for d in targets.deletions
        if d.uuid not in outcome.deleted and d.uuid not in outcome.failed and d.uuid not in outcome.refused
    }
    problems = {**outcome.refused, **outcome.failed, **kept}
    if not problems:
        return
    uuid, why = next(iter(problems.items()))
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    done = f"; done for {_named(outcome.deleted)}" if outcome.deleted else ""
    raise Unavailable(f"could not {action} checkpoint {uuid}: {why}{more}{done}; try again")


def _to_agents(
    ctx: MasterContext, who: Caller, targets: _Targets, what: str, item: Callable[[Deletion], checkpoint_gc_tasks.Item]
) -> _Targets:
    """Hand each experiment's checkpoints to a checkpoint GC task where checkpoint_gc_tasks.runs_on_agent
    says so (the request answers at once; the task's report marks the rows); the rest, as returned, the
    master does itself."""
    by_experiment: dict[int, list[Deletion]] = {}
    for d in targets.deletions:
        by_experiment.setdefault(targets.experiment_of[d.uuid], []).append(d)
    rest = []
    for experiment_id, deletions in by_experiment.items():
        if not checkpoint_gc_tasks.runs_on_agent(ctx, experiment_id, deletions[0].storage):
            rest.extend(deletions)
            continue
        checkpoint_gc_tasks.start(
            ctx,
            checkpoint_gc_tasks.Job(
                experiment_id,
                [item(d) for d in deletions],
                checkpoint_gc_task_rows.ORIGIN_USER,
                what,
                who.user.username,
            ),
        )
    return _Targets(rest, targets.already_deleted, targets.experiment_of)


def delete(ctx: MasterContext, who: Caller, uuids: list[str], storage_for: StorageFor = storage_from_config) -> None:
    """Delete the checkpoints' files and mark them DELETED (those already deleted: nothing to do)."""
    uuids = check_uuids(uuids)
    targets = _targets(ctx, who, uuids, "delete")
    targets = _to_agents(
        ctx,
        who,
        targets,
        "deleted",
        lambda d: checkpoint_gc_tasks.Item(d.uuid, checkpoint_gc_tasks.directory(d.storage, d.uuid)),
    )
    outcome = Outcome()
    held = _hold(ctx, who, targets.deletions, "deleted")
    done = delete_from_storage(
        [d for d in targets.deletions if d.uuid in held],
        allowed_roots(ctx.config),
        storage_for,
        outcome,
        registered=_registered(ctx),
    )
    _mark(ctx, who, {d.uuid: {} for d in done}, "deleted")
    _release_failed(ctx, outcome)
    _raise_failures(outcome, targets, "delete")


def remove_files(
    ctx: MasterContext, who: Caller, uuids: list[str], globs: list[str], storage_for: StorageFor = storage_from_config
) -> None:
    """Delete the files of each checkpoint that `globs` name (none: only read what storage holds), then
    record what is left: nothing -> DELETED, fewer files -> PARTIALLY_DELETED, as Determined does."""
    uuids, globs = check_uuids(uuids), check_globs(globs)
    targets = _targets(ctx, who, uuids, "remove files of")
    named = ", ".join(globs)
    named = named if len(named) <= 200 else named[:200] + "..."  # an event names them, within reason
    what = f"files removed ({named})" if globs else "files read again"

    def item(d: Deletion) -> checkpoint_gc_tasks.Item:
        before = storage_for(d.storage).resources(d.uuid)  # the master matches the globs, the task deletes
        names = doomed(before, globs)
        return checkpoint_gc_tasks.Item(
            d.uuid,
            checkpoint_gc_tasks.directory(d.storage, d.uuid),
            delete=bool(names) and len(names) == len(before),
            entries=tuple(names),
        )

    targets = _to_agents(ctx, who, targets, what, item)
    left: dict[str, dict[str, int]] = {}

    def act(storage: CheckpointStorage, uuid: str) -> None:
        before = storage.resources(uuid)
        names = doomed(before, globs)
        if names and len(names) == len(before):
            storage.delete(uuid)
            left[uuid] = {}
            return
        remove_entries(storage, uuid, names)
        after = storage.resources(uuid) if names else before
        if not after:
            storage.delete(uuid)  # an empty directory: gone, as Determined's storage managers leave it
        left[uuid] = after

    def changes(d: Deletion) -> bool:
        try:
            return bool(doomed(storage_for(d.storage).resources(d.uuid), globs))
        except Exception:  # `act` meets the same failure and reports it
            return True

    # those with files to remove are held first; the others are only listed again
    changing = [d for d in targets.deletions if globs and changes(d)]
    held = _hold(ctx, who, changing, what)
    outcome = Outcome()
    delete_from_storage(
        [d for d in targets.deletions if d.uuid in held or d not in changing],
        allowed_roots(ctx.config),
        storage_for,
        outcome,
        registered=_registered(ctx),
        act=act,
    )
    _mark(ctx, who, left, what)
    _release_failed(ctx, outcome)
    _raise_failures(outcome, targets, "remove files of")

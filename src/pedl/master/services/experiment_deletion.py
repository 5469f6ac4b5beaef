"""Deleting an experiment, as Determined does: DELETE marks an ended experiment DELETING and answers at
once; a worker of the master then deletes its checkpoints' files (shared_fs or S3, as checkpoint
garbage collection does), its TensorBoard files (services/tensorboard_files.py) and its rows
(services/experiment_purge.py, in bounded transactions).

A failure leaves the experiment DELETE_FAILED with the reason (an event, and its endReason); deleting
it again retries. The worker finds the DELETING experiments when it starts, so a master restarted in
the middle of a deletion finishes it. Checkpoints registered as model versions block the deletion."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.config.checkpoint_storage import experiment_storage
from pedl.errors import InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.lifecycle import DELETING_EXPERIMENT, ENDED_EXPERIMENT, LIVE_ALLOCATION, CheckpointState
from pedl.master.lifecycle import ExperimentState as E
from pedl.master.services.authz import require_owner
from pedl.master.services.experiment_listing import reported_state
from pedl.master.services.experiment_purge import purge
from pedl.master.services.experiments import get
from pedl.master.services.storage_roots import allowed_roots, checkpoint_problem
from pedl.master.services.tensorboard_files import storage_of as tensorboard_storage
from pedl.master.services.transitions import record_event, set_experiment_state
from pedl.master.worker_passes import run_pass

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

IDLE_WAIT = 60.0  # seconds between looks for DELETING experiments nobody asked the worker about
NAMED = 5  # registered checkpoints an error names


# -- the request (DELETE /api/v1/experiments/{id}) ------------------------------------------------


def _state(s: Session, exp: models.Experiment) -> str:
    """As the API shows it: an ACTIVE experiment is QUEUED, STARTING or RUNNING there."""
    return reported_state(s, exp).removeprefix("STATE_")


def registered_versions(s: Session, experiment_id: int) -> list[str]:
    """'<model> version <n> (checkpoint <uuid>)' for the experiment's checkpoints that are model
    versions in the registry: Determined refuses to delete an experiment while any are."""
    version, model = models.ModelVersion, models.RegisteredModel
    rows = s.execute(select(model.name, version.version, version.checkpoint_uuid)
                     .join(model, model.id == version.model_id)
                     .join(models.Checkpoint, models.Checkpoint.uuid == version.checkpoint_uuid)
                     .where(models.Checkpoint.experiment_id == experiment_id)
                     .order_by(model.name, version.version).limit(NAMED + 1))
    return [f"{name!r} version {n} (checkpoint {uuid})" for name, n, uuid in rows]


def mark_deleting(s: Session, now: float, who: Caller, exp: models.Experiment) -> bool:
    """Mark an ended experiment DELETING (False: it is already); refuse one that has not ended, still has a
    task or has registered checkpoints, naming why. The caller checked the caller may delete it."""
    experiment_id = exp.id
    if exp.state == E.DELETING:
        return False
    if exp.state not in ENDED_EXPERIMENT and exp.state != E.DELETE_FAILED:
        raise InvalidArgument(f"experiment {experiment_id} is {_state(s, exp)}: only an experiment that has ended "
                              "(COMPLETED, CANCELED or ERROR) can be deleted; kill it first")
    live = s.scalar(select(models.Allocation.id).join(models.Trial, models.Trial.id == models.Allocation.trial_id)
                    .where(models.Trial.experiment_id == experiment_id,
                           models.Allocation.state.in_(sorted(LIVE_ALLOCATION))).limit(1))
    if live is not None:
        raise InvalidArgument(f"experiment {experiment_id} still has a task that has not exited ({live}); "
                              "delete it once the task has ended")
    registered = registered_versions(s, experiment_id)
    if registered:
        more = " and more" if len(registered) > NAMED else ""
        raise InvalidArgument(f"experiment {experiment_id} cannot be deleted: its checkpoints are registered as "
                              f"model versions: {', '.join(registered[:NAMED])}{more}; delete those versions first")
    set_experiment_state(s, now, exp, E.DELETING, f"deletion requested by {who.user.username}")
    return True


def mark_all(s: Session, now: float, who: Caller, exps: list[models.Experiment], *, orphan_to: int = 0,
             why: str = "") -> list[int]:
    """Mark every one DELETING (all or none: the first refusal raises) -> the ids the worker must purge.
    With `orphan_to` (their project is being deleted) they move to that project meanwhile: a project id
    left dangling could be taken by a new project (SQLite reuses the highest id), and one whose deletion
    fails stays where its owner can see it and delete it again."""
    for exp in exps:
        mark_deleting(s, now, who, exp)
        if orphan_to and exp.project_id != orphan_to:
            exp.project_id = orphan_to
            record_event(s, now, "experiment", exp.id, f"moved to project {orphan_to} while it is deleted: {why}")
    return [exp.id for exp in exps]


def request_deletion(ctx: MasterContext, who: Caller, experiment_id: int, wake: Callable[[int], None]) -> None:
    """Mark the experiment DELETING for its owner or an admin, then `wake` the worker. Only an ended
    experiment (COMPLETED, CANCELED, ERROR), or one whose deletion failed, is deleted; asking again
    while it is DELETING changes nothing."""

    def mark(s: Session) -> bool:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"delete experiment {experiment_id}")
        return mark_deleting(s, ctx.clock.now(), who, exp)

    if ctx.controller.run(mark):
        wake(experiment_id)


# -- the worker ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointFiles:
    uuid: str
    storage: dict[str, Any]  # the experiment's checkpoint_storage section: where the files are
    recorded: dict[str, Any] = field(default_factory=dict)  # the row's storage column
    what: str = ""  # how failures name it; "" for "checkpoint <uuid>"


def _files_to_delete(s: Session, experiment_id: int, default_storage: Mapping[str, Any],
                     cluster_id: str) -> list[CheckpointFiles] | None:
    """The checkpoints whose files may still exist (all but DELETED ones), then the experiment's
    TensorBoard directory; None when the experiment is gone or no longer DELETING (nothing to do)."""
    exp = s.get(models.Experiment, experiment_id)
    if exp is None or exp.state != E.DELETING:
        return None
    storage = experiment_storage(exp.config, default_storage)
    rows = s.execute(select(models.Checkpoint.uuid, models.Checkpoint.storage).where(
        models.Checkpoint.experiment_id == experiment_id, models.Checkpoint.state != CheckpointState.DELETED))
    tensorboard = CheckpointFiles(str(experiment_id), tensorboard_storage(storage, cluster_id),
                                  what=f"the TensorBoard directory of experiment {experiment_id}")
    return [*(CheckpointFiles(uuid, storage, dict(recorded or {})) for uuid, recorded in rows), tensorboard]


class ExperimentDeleter:
    """Deletes the experiments asked for (and any found DELETING), one at a time, in a worker thread.
    `request` is cheap and may be called from any thread."""

    def __init__(self, ctx: MasterContext,
                 storage_for: Callable[[Mapping[str, Any]], CheckpointStorage] = storage_from_config) -> None:
        self.ctx = ctx
        self.storage_for = storage_for
        self._pending: set[int] = set()
        self._lock = threading.Lock()  # guards _pending
        self._busy = threading.Lock()  # one deletion at a time
        self._wake: Callable[[], None] = lambda: None

    def request(self, experiment_id: int) -> None:
        with self._lock:
            self._pending.add(experiment_id)
        self._wake()

    def sweep(self) -> None:
        """Ask for every DELETING experiment: those a restart (or a lost request) left half deleted."""
        with self.ctx.db.read_session() as s:
            ids = list(s.scalars(select(models.Experiment.id).where(models.Experiment.state == E.DELETING)))
        for experiment_id in ids:
            self.request(experiment_id)

    def run_pending(self) -> None:
        with self._busy:
            with self._lock:
                due, self._pending = sorted(self._pending), set()
            for experiment_id in due:
                self.delete(experiment_id)

    def delete(self, experiment_id: int) -> bool:
        """One experiment: its files, then its rows. -> whether it is gone; on a failure it is left
        DELETE_FAILED with the reason."""
        default_storage = self.ctx.config.effective_checkpoint_storage().model_dump(mode="json")
        with self.ctx.db.read_session() as s:
            files = _files_to_delete(s, experiment_id, default_storage, self.ctx.cluster_id)
        if files is None:
            return False
        try:
            failed = self._delete_files(experiment_id, files)
            if failed:
                self._failed(experiment_id, failed)
                return False
            done = purge(self.ctx.db, experiment_id)
        except Exception as exc:  # noqa: BLE001 - recorded on the experiment; deleting it again retries
            log.exception("deleting experiment %s failed", experiment_id)
            self._failed(experiment_id, f"{type(exc).__name__}: {exc}")
            return False
        log.info("experiment %s deleted: %d checkpoint(s) of files, rows %s", experiment_id, len(files) - 1,
                 ", ".join(f"{k} {v}" for k, v in done.items() if v))
        return True

    def _delete_files(self, experiment_id: int, files: list[CheckpointFiles]) -> str | None:
        """Delete each checkpoint's files; -> why the first failure failed (None: all gone). Files outside
        the master's storage roots are left alone (logged), as garbage collection leaves them."""
        roots = allowed_roots(self.ctx.config)
        storages: dict[str, CheckpointStorage] = {}
        failures: list[str] = []
        for f in files:
            why = checkpoint_problem(f.storage, f.uuid, roots, recorded=f.recorded)
            if why is not None:
                log.warning("deleting experiment %s: %s left alone: %s", experiment_id,
                            f.what or f"checkpoint {f.uuid}", why)
                continue
            key = json.dumps(f.storage, sort_keys=True, default=str)
            try:
                if key not in storages:
                    storages[key] = self.storage_for(f.storage)
                storages[key].delete(f.uuid)
            except Exception as exc:  # noqa: BLE001 - whatever the storage raised fails the deletion
                why = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                failures.append(f"{f.what or f'checkpoint {f.uuid}'}: {why}")
        if not failures:
            return None
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        return f"could not delete the files of {failures[0]}{more}"

    def _failed(self, experiment_id: int, why: str) -> None:
        def mark(s: Session) -> None:
            exp = s.get(models.Experiment, experiment_id)
            if exp is None or exp.state not in DELETING_EXPERIMENT:
                return
            exp.end_reason = f"deletion failed: {why}"
            set_experiment_state(s, self.ctx.clock.now(), exp, E.DELETE_FAILED, exp.end_reason)
            record_event(s, self.ctx.clock.now(), "experiment", experiment_id,
                         "delete the experiment again to retry", level="error")

        self.ctx.controller.run(mark)

    async def run_loop(self, stop: asyncio.Event) -> None:
        """The worker: the start-up sweep, then deletions as they are asked for (and a sweep every
        IDLE_WAIT seconds, in case a request was lost)."""
        wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._wake = lambda: loop.call_soon_threadsafe(wake.set)
        while not stop.is_set():
            wake.clear()
            try:
                await run_pass(self.sweep)
                await run_pass(self.run_pending)
            except Exception:  # noqa: BLE001 - keep the worker alive; the next pass retries
                log.exception("experiment deletion pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=IDLE_WAIT)

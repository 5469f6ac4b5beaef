"""The experiment deletion worker: deletes the files and rows of the experiments marked DELETING
(experiments/deletion.py), one at a time in a thread, and finds them again after a restart."""

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
from pedl.master.checkpoints.storage_roots import allowed_roots, checkpoint_problem
from pedl.master.db import models
from pedl.master.experiments.purge import purge
from pedl.master.experiments.tensorboard_files import storage_of as tensorboard_storage
from pedl.master.lifecycle.states import DELETING_EXPERIMENT, CheckpointState
from pedl.master.lifecycle.states import ExperimentState as E
from pedl.master.lifecycle.transitions import record_event, set_experiment_state
from pedl.master.worker_passes import run_pass

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

IDLE_WAIT = 60.0  # seconds between looks for DELETING experiments nobody asked the worker about


@dataclass(frozen=True)
class CheckpointFiles:
    uuid: str
    storage: dict[str, Any]  # the experiment's checkpoint_storage section: where the files are
    recorded: dict[str, Any] = field(default_factory=dict)  # the row's storage column
    what: str = ""  # how failures name it; "" for "checkpoint <uuid>"


def _files_to_delete(
    s: Session, experiment_id: int, default_storage: Mapping[str, Any], cluster_id: str
) -> list[CheckpointFiles] | None:
    """The checkpoints whose files may still exist (all but DELETED ones), then the experiment's
    TensorBoard directory; None when the experiment is gone or no longer DELETING (nothing to do)."""
    exp = s.get(models.Experiment, experiment_id)
    if exp is None or exp.state != E.DELETING:
        return None
    storage = experiment_storage(exp.config, default_storage)
    rows = s.execute(
        select(models.Checkpoint.uuid, models.Checkpoint.storage).where(
            models.Checkpoint.experiment_id == experiment_id, models.Checkpoint.state != CheckpointState.DELETED
        )
    )
    tensorboard = CheckpointFiles(
        str(experiment_id),
        tensorboard_storage(storage, cluster_id),
        what=f"the TensorBoard directory of experiment {experiment_id}",
    )
    return [*(CheckpointFiles(uuid, storage, dict(recorded or {})) for uuid, recorded in rows), tensorboard]


class ExperimentDeleter:
    """Deletes the experiments asked for (and any found DELETING), one at a time, in a worker thread.
    `request` is cheap and may be called from any thread."""

    def __init__(
        self, ctx: MasterContext, storage_for: Callable[[Mapping[str, Any]], CheckpointStorage] = storage_from_config
    ) -> None:
        self.ctx = ctx
        self.storage_for = storage_for
        self._pending: set[int] = set()
        self._lock = threading.Lock()  # guards _pending
        self._busy = threading.Lock()  # one deletion at a time
        self._wake: Callable[[], object] = lambda: None

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
        except Exception as exc:  # recorded on the experiment; deleting it again retries
            log.exception("deleting experiment %s failed", experiment_id)
            self._failed(experiment_id, f"{type(exc).__name__}: {exc}")
            return False
        log.info(
            "experiment %s deleted: %d checkpoint(s) of files, rows %s",
            experiment_id,
            len(files) - 1,
            ", ".join(f"{k} {v}" for k, v in done.items() if v),
        )
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
                log.warning(
                    "deleting experiment %s: %s left alone: %s", experiment_id, f.what or f"checkpoint {f.uuid}", why
                )
                continue
            key = json.dumps(f.storage, sort_keys=True, default=str)
            try:
                if key not in storages:
                    storages[key] = self.storage_for(f.storage)
                storages[key].delete(f.uuid)
            except Exception as exc:  # whatever the storage raised fails the deletion
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
            exp.end_reason = end_reason = f"deletion failed: {why}"
            set_experiment_state(s, self.ctx.clock.now(), exp, E.DELETE_FAILED, end_reason)
            record_event(
                s,
                self.ctx.clock.now(),
                "experiment",
                experiment_id,
                "delete the experiment again to retry",
                level="error",
            )

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
            except Exception:  # keep the worker alive; the next pass retries
                log.exception("experiment deletion pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=IDLE_WAIT)

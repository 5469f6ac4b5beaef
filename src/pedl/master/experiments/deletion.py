"""Deleting an experiment, as Determined does: DELETE marks an ended experiment DELETING and answers at
once; a worker of the master then deletes its checkpoints' files (shared_fs or S3, as checkpoint
garbage collection does), its TensorBoard files (experiments/tensorboard_files.py) and its rows
(experiments/purge.py, in bounded transactions).

A failure leaves the experiment DELETE_FAILED with the reason (an event, and its endReason); deleting
it again retries. The worker finds the DELETING experiments when it starts, so a master restarted in
the middle of a deletion finishes it. Checkpoints registered as model versions block the deletion."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments.listing import reported_state
from pedl.master.experiments.service import get
from pedl.master.identity.authz import require_owner
from pedl.master.lifecycle.states import ENDED_EXPERIMENT, LIVE_ALLOCATION
from pedl.master.lifecycle.states import ExperimentState as E
from pedl.master.lifecycle.transitions import record_event, set_experiment_state

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


NAMED = 5  # registered checkpoints an error names


# -- the request (DELETE /api/v1/experiments/{id}) ------------------------------------------------


def _state(s: Session, exp: models.Experiment) -> str:
    """As the API shows it: an ACTIVE experiment is QUEUED, STARTING or RUNNING there."""
    return reported_state(s, exp).removeprefix("STATE_")


def registered_versions(s: Session, experiment_id: int) -> list[str]:
    """'<model> version <n> (checkpoint <uuid>)' for the experiment's checkpoints that are model
    versions in the registry: Determined refuses to delete an experiment while any are."""
    version, model = models.ModelVersion, models.RegisteredModel
    rows = s.execute(
        select(model.name, version.version, version.checkpoint_uuid)
        .join(model, model.id == version.model_id)
        .join(models.Checkpoint, models.Checkpoint.uuid == version.checkpoint_uuid)
        .where(models.Checkpoint.experiment_id == experiment_id)
        .order_by(model.name, version.version)
        .limit(NAMED + 1)
    )
    return [f"{name!r} version {n} (checkpoint {uuid})" for name, n, uuid in rows]


def mark_deleting(s: Session, now: float, who: Caller, exp: models.Experiment) -> bool:
    """Mark an ended experiment DELETING (False: it is already); refuse one that has not ended, still has a
    task or has registered checkpoints, naming why. The caller checked the caller may delete it."""
    experiment_id = exp.id
    if exp.state == E.DELETING:
        return False
    if exp.state not in ENDED_EXPERIMENT and exp.state != E.DELETE_FAILED:
        raise InvalidArgument(
            f"experiment {experiment_id} is {_state(s, exp)}: only an experiment that has ended "
            "(COMPLETED, CANCELED or ERROR) can be deleted; kill it first"
        )
    live = s.scalar(
        select(models.Allocation.id)
        .join(models.Trial, models.Trial.id == models.Allocation.trial_id)
        .where(models.Trial.experiment_id == experiment_id, models.Allocation.state.in_(sorted(LIVE_ALLOCATION)))
        .limit(1)
    )
    if live is not None:
        raise InvalidArgument(
            f"experiment {experiment_id} still has a task that has not exited ({live}); "
            "delete it once the task has ended"
        )
    registered = registered_versions(s, experiment_id)
    if registered:
        more = " and more" if len(registered) > NAMED else ""
        raise InvalidArgument(
            f"experiment {experiment_id} cannot be deleted: its checkpoints are registered as "
            f"model versions: {', '.join(registered[:NAMED])}{more}; delete those versions first"
        )
    set_experiment_state(s, now, exp, E.DELETING, f"deletion requested by {who.user.username}")
    return True


def mark_all(
    s: Session, now: float, who: Caller, exps: list[models.Experiment], *, orphan_to: int = 0, why: str = ""
) -> list[int]:
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

"""What ends with a user's credentials (a deactivation, a new password): the tokens of the user's running
tasks, DET_SESSION_TOKEN and the DET_USER_TOKEN made from it, and with them the tasks, which could no
longer report, checkpoint or be reached. Experiments pause; commands, notebooks, shells and TensorBoards end."""

from __future__ import annotations

import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.lifecycle import allocations as cluster_allocations
from pedl.master.lifecycle import experiment_actions
from pedl.master.lifecycle.checkpoint_gc_task_rows import KIND as CHECKPOINT_GC
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import LIVE_ALLOCATION, ExperimentState
from pedl.master.lifecycle.tokens import token_hash

# experiments whose trials may run: paused first, so that a trial stopped now waits for its experiment's
# activation instead of counting a failure or restarting with a new token
RUNNING_EXPERIMENT = (ExperimentState.ACTIVE,)


def end_tasks(fx: ClusterEffects, s: Session, user_id: int, why: str) -> list[str]:
    """End the task tokens of every live allocation the user owns, at once (each allocation holds the
    hash of a token nobody has from now on), and stop those allocations: the user's active experiments are
    paused, so their trials go on from their latest checkpoints once activated, and every other task of
    theirs is killed. Checkpoint GC tasks, the master's own clean-up of their experiments, run on.
    Returns the allocations ended, whose cached callers must go after the commit."""
    for exp in s.scalars(
        select(models.Experiment).where(
            models.Experiment.owner_id == user_id, models.Experiment.state.in_(RUNNING_EXPERIMENT)
        )
    ):
        experiment_actions.pause(fx, s, exp)
    gc_tasks = select(models.GenericTask.id).where(models.GenericTask.kind == CHECKPOINT_GC)
    live = s.scalars(
        select(models.Allocation).where(
            models.Allocation.owner_id == user_id,
            models.Allocation.state.in_(LIVE_ALLOCATION),
            models.Allocation.task_id.not_in(gc_tasks),
        )
    ).all()
    for alloc in live:
        if alloc.session_token_hash:
            alloc.session_token_hash = token_hash(secrets.token_urlsafe(32))
        cluster_allocations.kill(fx, s, alloc, why)
    return [alloc.id for alloc in live]

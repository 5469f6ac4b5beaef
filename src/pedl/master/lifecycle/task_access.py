"""The one check behind every task route: the caller holds the session token of a live allocation,
and that allocation is the one (or belongs to the trial or task) the request names."""

from __future__ import annotations

from sqlalchemy.orm import Session

from pedl.errors import Forbidden, Unauthenticated
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.lifecycle.states import LIVE_ALLOCATION

# DET_USER_TOKEN, Determined's token of a task's owner (det inside a notebook or a trial acts as them):
# this prefix and the task's own token. It is a distinct string, so the task token alone is never taken
# for the user; it is no wider exposed than the task token (the same environment, the same StartTask),
# and it dies with the allocation, as the task token does.
TASK_USER_PREFIX = "pedl-task-user."


def task_user_token(task_token: str) -> str:
    return TASK_USER_PREFIX + task_token


TASK_TOKEN_ONLY = "this route takes the task token of a running task (DET_SESSION_TOKEN), not a user's login token"


def require_task(
    s: Session,
    who: Caller,
    *,
    trial_id: int | None = None,
    allocation_id: str | None = None,
    task_id: str | None = None,
) -> models.Allocation:
    """The caller's allocation, read in the caller's own transaction (so a token revoked by a
    commit that came first is refused, whatever the caller cache still holds).

    Raises Forbidden for a user token or a task token of another trial/allocation/task, and
    Unauthenticated for the token of an allocation that has ended (lost agent, kill, exit)."""
    if who.allocation_id is None:
        raise Forbidden(TASK_TOKEN_ONLY)
    alloc = s.get(models.Allocation, who.allocation_id)
    if alloc is None or alloc.state not in LIVE_ALLOCATION:
        raise Unauthenticated(f"allocation {who.allocation_id} has ended; its task token is revoked")
    if who.token_hash is not None and alloc.session_token_hash != who.token_hash:
        raise Unauthenticated(f"the task token of allocation {alloc.id} was revoked with its owner's credentials")
    if trial_id is not None and alloc.trial_id != trial_id:
        raise Forbidden(f"this task token belongs to allocation {alloc.id}, not to trial {trial_id}")
    if allocation_id is not None and alloc.id != allocation_id:
        raise Forbidden(f"this task token belongs to allocation {alloc.id}, not to {allocation_id}")
    if task_id is not None and alloc.task_id != task_id:
        raise Forbidden(f"this task token belongs to task {alloc.task_id}, not to task {task_id}")
    return alloc

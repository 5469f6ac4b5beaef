"""Who may do what to users' things: any user reads, the owner or an admin changes, admins alone
see the master's config. Task tokens act only through lifecycle/task_access.py."""

from __future__ import annotations

from pedl.errors import Forbidden
from pedl.master.caller_cache import Caller
from pedl.master.db import models


def require_user(who: Caller, action: str) -> models.User:
    """A logged-in user, not a task: tasks only report on their own allocation."""
    if who.allocation_id is not None:
        raise Forbidden(f"a task token cannot {action}; log in as a user")
    return who.user


def require_owner(who: Caller, owner_id: int, action: str) -> models.User:
    user = require_user(who, action)
    if not user.admin and user.id != owner_id:
        raise Forbidden(f"only its owner or an admin may {action}")
    return user


def require_admin(who: Caller, action: str) -> models.User:
    user = require_user(who, action)
    if not user.admin:
        raise Forbidden(f"only an admin may {action}")
    return user

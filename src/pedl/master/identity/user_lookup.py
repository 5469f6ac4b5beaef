"""Looking a user up by username (Determined's GET /users/{username}/by-username, the SDK's
get_user_by_name): whoever may list the users may (a logged-in user, or a task: Determined scripts
use the SDK inside their tasks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from pedl.errors import NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.identity import to_wire
from pedl.master.wire.user import User

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def by_username(ctx: MasterContext, _who: Caller, username: str) -> User:
    """The user of exactly that name (as login matches it); NotFound naming it otherwise."""
    with ctx.db.read_session() as s:
        user = s.scalar(select(models.User).where(models.User.username == username))
        if user is None:
            raise NotFound(f"user {username!r} not found", fields=[{"field": "username", "message": "not found"}])
        return to_wire.user(user)

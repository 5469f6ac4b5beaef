"""Editing a user (Determined's PATCH /api/v1/users/{userId}): who may change which field, each
field's rules, and what a change revokes. Admins change anything of anyone; a user changes their
own display name and password only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from pedl.errors import Conflict, Forbidden, InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.identity import passwords, to_wire, user_revocation
from pedl.master.identity.authz import require_user
from pedl.master.identity.users import check_username, get_user
from pedl.master.lifecycle import agent_user_groups
from pedl.master.lifecycle.tokens import token_hash
from pedl.master.wire.user import User

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

RESERVED_DISPLAY_NAMES = ("admin", "determined")


@dataclass
class UserEdit:
    """The fields a request sets (None: left alone). `agent_user_group` holds the raw object when
    the request names one ({} or all-null fields unlink the user)."""

    username: str | None = None
    display_name: str | None = None
    active: bool | None = None
    admin: bool | None = None
    remote: bool | None = None
    password: str | None = None
    is_hashed: bool = False
    agent_user_group: dict[str, Any] | None = field(default=None)


def _refusal(actor: models.User, target: models.User, edit: UserEdit) -> str | None:
    """Why `actor` may not make `edit` to `target` (Determined's basic authorization), or None."""
    if actor.admin:
        return None
    own = actor.id == target.id
    if edit.admin is not None:
        return "only an admin may grant or remove admin rights"
    if edit.active is not None:
        return "only an admin may activate or deactivate users"
    if edit.remote is not None:
        return "only an admin may make a user remote"
    if edit.agent_user_group is not None:
        return "only an admin may link a user with an agent user and group"
    if edit.username is not None and edit.username != target.username:
        return "only an admin may rename users"
    if not own and (edit.display_name is not None or edit.password is not None):
        return "only an admin may change another user's display name or password"
    return None


def _display_name(s: Session, target: models.User, value: str) -> str | None:
    """Determined's rules: printable ASCII, 'admin' only for admins, 'determined' only for that
    user, and not another user's name or display name whatever the case. "" clears it."""
    name = value.strip()
    if len(name) > 255:
        raise InvalidArgument.at("displayName", "at most 255 characters")
    if any(not (c.isascii() and (c.isprintable() or c == " ")) for c in name):
        raise InvalidArgument.at("displayName", "printable ASCII characters only")
    if not name:
        return None
    lower = name.lower()
    if lower == "admin" and not target.admin:
        raise InvalidArgument.at("displayName", "only an admin may be called 'admin'")
    if lower == "determined" and target.username != "determined":
        raise InvalidArgument.at("displayName", "only the user 'determined' may be called 'determined'")
    taken = s.scalar(
        select(models.User.id)
        .where(
            models.User.id != target.id,
            or_(func.lower(models.User.username) == lower, func.lower(models.User.display_name) == lower),
        )
        .limit(1)
    )
    if taken is not None:
        raise InvalidArgument.at("displayName", f"{name!r} is another user's name or display name")
    return name


def patch_user(
    s: Session,
    now: float,
    who: Caller,
    user_id: int,
    edit: UserEdit,
    *,
    current_token: str = "",
    fresh_login_window: float = 0.0,
    uid_base: int | None = None,
) -> tuple[models.User, bool]:
    """Apply `edit`; returns the user and whether their login sessions were revoked. Nothing is
    written unless every field may be changed and is valid."""
    actor = require_user(who, "edit users")
    target = get_user(s, user_id)
    refusal = _refusal(actor, target, edit)
    if refusal:
        raise Forbidden(refusal)
    if edit.remote:
        raise InvalidArgument.at("remote", "pedl has no external identity provider: users log in with passwords")
    # pedl's guard (Determined has none): an admin locking themselves out could leave no admin at all
    if actor.id == target.id and edit.active is False:
        raise InvalidArgument.at("active", "you cannot deactivate yourself; another admin can")
    if actor.id == target.id and edit.admin is False and target.admin:
        raise InvalidArgument.at("admin", "you cannot remove your own admin rights; another admin can")
    own_password = edit.password is not None and actor.id == target.id and not actor.admin
    if own_password and (who.issued_at is None or now - who.issued_at > fresh_login_window):
        raise Forbidden(
            f"changing your own password needs a login made in the last {fresh_login_window:g} s "
            "(or the old one: POST /api/v1/users/{id}/password with oldPassword): log in again"
        )
    username = None
    if edit.username is not None and edit.username != target.username:
        username = check_username(edit.username, "username")
        if s.scalar(select(models.User.id).where(models.User.username == username)) is not None:
            raise Conflict(
                f"username: user {username!r} already exists", fields=[{"field": "username", "message": "taken"}]
            )
    display_name = target.display_name
    if edit.display_name is not None and edit.display_name != (target.display_name or ""):
        display_name = _display_name(s, target, edit.display_name)
    group = agent_user_groups.parse(edit.agent_user_group) if edit.agent_user_group is not None else None
    agent_user_groups.refuse_users_range(group, uid_base, "agentUserGroup")

    if username is not None:
        target.username = username
    target.display_name = display_name
    if edit.admin is not None:
        target.admin = edit.admin
    if edit.active is not None:
        target.active = edit.active
    if edit.agent_user_group is not None:
        agent_user_groups.store(target, group)
    revoke = edit.active is False
    if edit.password is not None:
        target.password_hash = passwords.hash_password(passwords.normalize(edit.password, edit.is_hashed))
        revoke = True
    target.modified_at = now
    if revoke:
        # a deactivated user is logged out everywhere; a new password ends the user's other sessions
        q = delete(models.UserSession).where(models.UserSession.user_id == target.id)
        if edit.active is not False and actor.id == target.id and current_token:
            q = q.where(models.UserSession.token_hash != token_hash(current_token))
        s.execute(q)
    s.flush()
    return target, revoke


def edit_user(ctx: MasterContext, who: Caller, user_id: int, edit: UserEdit, current_token: str) -> User:
    """Apply `edit`. A deactivation or a new password also ends the user's tasks' tokens and stops the
    tasks (user_revocation.py), in the same transaction, under the cluster lock."""

    def work(s: Session) -> User:
        user, revoked = patch_user(
            s,
            ctx.clock.now(),
            who,
            user_id,
            edit,
            current_token=current_token,
            fresh_login_window=ctx.config.security.fresh_login_window,
            uid_base=ctx.config.security.task_uid_base,
        )
        if revoked:
            why = "its owner was deactivated" if edit.active is False else "its owner's password changed"
            ended.extend(user_revocation.end_tasks(ctx.controller, s, user.id, why))
        return to_wire.user(user)

    ended: list[str] = []
    user = ctx.controller.run(work)
    # after the commit: cached callers carry the user's old name, rights and state, and ended tokens
    ctx.caller_cache.drop_user(user_id)
    for allocation_id in ended:
        ctx.caller_cache.drop_allocation(allocation_id)
    if ended:
        ctx.controller.wake()
    return user

"""Users and login sessions."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from pedl.common.agent_protocol import AgentUserGroup
from pedl.errors import Conflict, Forbidden, InvalidArgument, NotFound, Unauthenticated
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.identity import passwords, to_wire, user_revocation
from pedl.master.identity.authz import require_user
from pedl.master.identity.login_limiter import LoginLimiter
from pedl.master.lifecycle import agent_user_groups
from pedl.master.lifecycle.states import LIVE_ALLOCATION
from pedl.master.lifecycle.task_access import TASK_USER_PREFIX
from pedl.master.lifecycle.tokens import token_hash
from pedl.master.wire import user as wire

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

DEFAULT_USERS = (("admin", True), ("determined", False))


def ensure_default_users(s: Session, now: float) -> list[str]:
    """Create admin and determined with blank passwords on first start; return names created."""
    created = []
    for name, admin in DEFAULT_USERS:
        if s.scalar(select(models.User).where(models.User.username == name)) is None:
            s.add(
                models.User(
                    username=name,
                    admin=admin,
                    active=True,
                    password_hash=passwords.hash_password(""),
                    created_at=now,
                    modified_at=now,
                )
            )
            created.append(name)
    return created


def users_with_blank_password(s: Session) -> list[str]:
    """The default users (created blank) that still have a blank password. Only those are checked: a
    verify is a deliberately slow hash, so checking every user would make a master's start grow with them."""
    names = [name for name, _ in DEFAULT_USERS]
    return [
        u.username
        for u in s.scalars(select(models.User).where(models.User.active.is_(True), models.User.username.in_(names)))
        if passwords.verify_password(u.password_hash, "")
    ]


def login(
    s: Session,
    now: float,
    ttl: float,
    username: str,
    password: str,
    is_hashed: bool,
    limiter: LoginLimiter | None = None,
    address: str = "",
) -> tuple[str, models.User]:
    """A new login token; failures count towards the delays of the user name at that address and of the
    address (login_limiter; none without a limiter: the console socket's logins). As Determined: wrong
    credentials are Unauthenticated (401, `invalid credentials`), a deactivated user's right password
    Forbidden (403, `user is not active`); a login that must wait is TooManyRequests (429). A user name
    that does not exist costs the same argon2 verification as one that does."""
    if limiter is not None:
        limiter.check(username, address, now)
    user = s.scalar(select(models.User).where(models.User.username == username))
    normalized = passwords.normalize(password or "", is_hashed)
    stored = user.password_hash if user is not None else passwords.dummy_hash()
    if not passwords.verify_password(stored, normalized) or user is None:
        if limiter is not None:
            limiter.failed(username, address, now)
        raise Unauthenticated("invalid credentials")
    if not user.active:
        raise Forbidden(f"user is not active: {username!r} was deactivated by an admin")
    if limiter is not None:
        limiter.succeeded(username, address)
    token = secrets.token_urlsafe(32)
    s.add(models.UserSession(user_id=user.id, token_hash=token_hash(token), created_at=now, expires_at=now + ttl))
    return token, user


def logout(s: Session, token: str) -> None:
    s.execute(delete(models.UserSession).where(models.UserSession.token_hash == token_hash(token)))


def session_for_token(s: Session, now: float, token: str) -> tuple[models.User, models.UserSession]:
    """The user a login token belongs to and its session row (issued and expiry times)."""
    sess = s.scalar(select(models.UserSession).where(models.UserSession.token_hash == token_hash(token)))
    if sess is None:
        raise Unauthenticated("invalid or unknown token; log in again")
    if sess.expires_at < now:
        raise Unauthenticated("token expired; log in again")
    user = s.get(models.User, sess.user_id)
    if user is None or not user.active:
        raise Unauthenticated("user is no longer active")
    return user, sess


def list_users(
    s: Session, *, active: bool | None = None, admin: bool | None = None, name: str = ""
) -> list[models.User]:
    """Determined's GetUsers filters: by state, by admin rights, and by a part of the username or
    display name (any case)."""
    q = select(models.User).order_by(models.User.id)
    if active is not None:
        q = q.where(models.User.active.is_(active))
    if admin is not None:
        q = q.where(models.User.admin.is_(admin))
    if name:
        part = name.lower()
        q = q.where(
            func.lower(models.User.username).contains(part, autoescape=True)
            | func.lower(func.coalesce(models.User.display_name, "")).contains(part, autoescape=True)
        )
    return list(s.scalars(q))


def get_user(s: Session, user_id: int) -> models.User:
    user = s.get(models.User, user_id)
    if user is None:
        raise NotFound(f"user {user_id} not found")
    return user


def check_username(username: str | None, field: str) -> str:
    """A new username, stripped: 1-255 characters without spaces or control characters."""
    username = (username or "").strip()
    if not username or len(username) > 255 or any(c.isspace() or not c.isprintable() for c in username):
        raise InvalidArgument(
            f"{field}: must be 1-255 characters without spaces or control characters",
            fields=[{"field": field, "message": "invalid username"}],
        )
    return username


def create_user(
    s: Session,
    now: float,
    actor: models.User,
    username: str,
    password: str,
    is_hashed: bool,
    admin: bool = False,
    active: bool = True,
    display_name: str | None = None,
    agent_user_group: AgentUserGroup | None = None,
) -> models.User:
    if not actor.admin:
        raise Forbidden("only an admin can create users")
    username = check_username(username, "user.username")
    if s.scalar(select(models.User).where(models.User.username == username)) is not None:
        raise Conflict(f"user {username!r} already exists")
    user = models.User(
        username=username,
        admin=admin,
        active=active,
        display_name=display_name,
        password_hash=passwords.hash_password(passwords.normalize(password or "", is_hashed)),
        created_at=now,
        modified_at=now,
    )
    agent_user_groups.store(user, agent_user_group)
    s.add(user)
    s.flush()
    return user


def set_password(
    s: Session,
    now: float,
    who: Caller,
    user_id: int,
    password: str,
    is_hashed: bool,
    *,
    old_password: str | None = None,
    old_is_hashed: bool = True,
    current_token: str = "",
    fresh_login_window: float = 0.0,
) -> None:
    """Set a password and revoke the user's other login sessions.

    An admin may set anyone's. A user changing their own proves it is them: with the old password,
    or (for Determined's clients, which send none) with a login token issued within
    `fresh_login_window`, so a stolen long-lived token cannot lock its owner out."""
    actor = require_user(who, "change passwords")
    user = get_user(s, user_id)
    if actor.id != user.id and not actor.admin:
        raise Forbidden("only an admin can change another user's password")
    if actor.id == user.id and not actor.admin:
        if old_password is not None:
            if not passwords.verify_password(user.password_hash, passwords.normalize(old_password, old_is_hashed)):
                raise Forbidden("oldPassword: the old password is wrong")
        elif who.issued_at is None or now - who.issued_at > fresh_login_window:
            raise Forbidden(
                f"changing your own password needs the old one (oldPassword), or a login made "
                f"in the last {fresh_login_window:g} s: log in again, then change it"
            )
    user.password_hash = passwords.hash_password(passwords.normalize(password, is_hashed))
    user.modified_at = now
    keep = token_hash(current_token) if actor.id == user.id and current_token else None
    q = delete(models.UserSession).where(models.UserSession.user_id == user.id)
    if keep is not None:
        q = q.where(models.UserSession.token_hash != keep)
    s.execute(q)


# What the routers call: each opens its own session.


def resolve_caller(ctx: MasterContext, token: str) -> Caller:
    """Who a bearer token is: a logged-in user, else the owner of the live allocation it was issued to
    (a task caller), or, for a task's DET_USER_TOKEN, that owner as a user while the allocation lives."""
    with ctx.db.read_session() as s:
        if token.startswith(TASK_USER_PREFIX):
            alloc = _live_allocation(s, token[len(TASK_USER_PREFIX) :])
            if alloc is None:
                raise Unauthenticated("this task's user token ended with its task")
            user = s.get(models.User, alloc.owner_id)
            if user is None or not user.active:
                raise Unauthenticated("user is no longer active")
            return Caller(user, for_allocation=alloc.id)
        try:
            user, sess = session_for_token(s, ctx.clock.now(), token)
            return Caller(user, expires_at=sess.expires_at, issued_at=sess.created_at)
        except Unauthenticated:
            alloc = _live_allocation(s, token)
            if alloc is None:
                raise
            user = s.get(models.User, alloc.owner_id)
            if user is None:
                raise
            if not user.active:
                raise Unauthenticated("this task's owner was deactivated") from None
            return Caller(user, alloc.id, token_hash=alloc.session_token_hash)


def _live_allocation(s: Session, task_token: str) -> models.Allocation | None:
    alloc = s.scalar(select(models.Allocation).where(models.Allocation.session_token_hash == token_hash(task_token)))
    return alloc if alloc is not None and alloc.state in LIVE_ALLOCATION else None


def log_in(
    ctx: MasterContext, username: str, password: str, is_hashed: bool, address: str, *, console: bool = False
) -> wire.LoginResponse:
    """A login from `address`, or (`console`) through the master's console socket, which only the master's
    own OS user can open: never held up by failed logins elsewhere, so an admin can always log in."""
    with ctx.db.session() as s:
        token, user = login(
            s,
            ctx.clock.now(),
            ctx.config.session_ttl,
            username,
            password,
            is_hashed,
            None if console else ctx.login_limiter,
            address,
        )
        return wire.LoginResponse(token=token, user=to_wire.user(user))


def log_out(ctx: MasterContext, who: Caller, token: str) -> None:
    require_user(who, "log out")
    with ctx.db.session() as s:
        logout(s, token)
    ctx.caller_cache.drop(token)


# GetUsers' sortBy: what each sorts by (the id breaks ties)
SORT_KEYS: dict[str, Callable[[models.User], Any]] = {
    "SORT_BY_UNSPECIFIED": lambda u: u.id,
    "SORT_BY_USER_NAME": lambda u: u.username,
    "SORT_BY_DISPLAY_NAME": lambda u: u.display_name or "",
    "SORT_BY_ADMIN": lambda u: u.admin,
    "SORT_BY_ACTIVE": lambda u: u.active,
    "SORT_BY_MODIFIED_TIME": lambda u: u.modified_at,
    "SORT_BY_NAME": lambda u: u.display_name or u.username,
    "SORT_BY_REMOTE": lambda u: False,
}


@dataclass(frozen=True)
class UserQuery:
    """Determined's GetUsers: filters, a sort key of SORT_KEYS, and a page (limit 0: no limit)."""

    active: bool | None = None
    admin: bool | None = None
    name: str = ""
    sort_by: str = "SORT_BY_UNSPECIFIED"
    descending: bool = False
    offset: int = 0
    limit: int = 0


@dataclass(frozen=True)
class UserPage:
    users: list[wire.User]
    total: int


def users_page(ctx: MasterContext, query: UserQuery) -> UserPage:
    with ctx.db.read_session() as s:
        rows = list_users(s, active=query.active, admin=query.admin, name=query.name)
        key = SORT_KEYS[query.sort_by]
        rows.sort(key=lambda u: (key(u), u.id), reverse=query.descending)
        end = query.offset + query.limit if query.limit else None
        return UserPage([to_wire.user(u) for u in rows[query.offset : end]], len(rows))


def create_by(
    ctx: MasterContext,
    who: Caller,
    username: str,
    password: str,
    is_hashed: bool,
    *,
    admin: bool,
    active: bool,
    display_name: str | None,
    agent_user_group: AgentUserGroup | None = None,
) -> wire.User:
    with ctx.db.session() as s:
        actor = require_user(who, "create users")
        agent_user_groups.refuse_users_range(agent_user_group, ctx.config.security.task_uid_base, "user.agentUserGroup")
        return to_wire.user(
            create_user(
                s,
                ctx.clock.now(),
                actor,
                username,
                password,
                is_hashed,
                admin=admin,
                active=active,
                display_name=display_name,
                agent_user_group=agent_user_group,
            )
        )


def user_by_id(ctx: MasterContext, user_id: int) -> wire.User:
    with ctx.db.read_session() as s:
        return to_wire.user(get_user(s, user_id))


def change_password(
    ctx: MasterContext,
    who: Caller,
    user_id: int,
    password: str,
    is_hashed: bool,
    old_password: str | None,
    current_token: str,
) -> None:
    """A new password: the user's other sessions end, and so do their tasks' tokens and the tasks
    (user_revocation.py), in the same transaction, under the cluster lock."""

    def work(s: Session) -> list[str]:
        set_password(
            s,
            ctx.clock.now(),
            who,
            user_id,
            password,
            is_hashed,
            old_password=old_password,
            old_is_hashed=is_hashed,
            current_token=current_token,
            fresh_login_window=ctx.config.security.fresh_login_window,
        )
        return user_revocation.end_tasks(ctx.controller, s, user_id, "its owner's password changed")

    ended = ctx.controller.run(work)
    ctx.caller_cache.drop_user(user_id)  # after the commit: revoked sessions and task tokens stop at once
    for allocation_id in ended:
        ctx.caller_cache.drop_allocation(allocation_id)
    ctx.controller.wake()

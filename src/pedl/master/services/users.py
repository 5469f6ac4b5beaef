"""Users and login sessions."""

from __future__ import annotations

import hashlib
import logging
import secrets

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from pedl.errors import Conflict, Forbidden, InvalidArgument, NotFound, Unauthenticated
from pedl.master.db import models
from pedl.master.services import passwords

log = logging.getLogger(__name__)

DEFAULT_USERS = (("admin", True), ("determined", False))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def ensure_default_users(s: Session, now: float) -> list[str]:
    """Create admin and determined with blank passwords on first start; return names created."""
    created = []
    for name, admin in DEFAULT_USERS:
        if s.scalar(select(models.User).where(models.User.username == name)) is None:
            s.add(models.User(username=name, admin=admin, active=True,
                              password_hash=passwords.hash_password(""), created_at=now, modified_at=now))
            created.append(name)
    return created


def users_with_blank_password(s: Session) -> list[str]:
    return [u.username for u in s.scalars(select(models.User).where(models.User.active.is_(True)))
            if passwords.verify_password(u.password_hash, "")]


def login(s: Session, now: float, ttl: float, username: str, password: str, is_hashed: bool) -> tuple[str, models.User]:
    user = s.scalar(select(models.User).where(models.User.username == username))
    normalized = passwords.normalize(password or "", is_hashed)
    if user is None or not passwords.verify_password(user.password_hash, normalized):
        raise Forbidden("invalid credentials")
    if not user.active:
        raise Forbidden(f"user {username!r} is deactivated")
    token = secrets.token_urlsafe(32)
    s.add(models.UserSession(user_id=user.id, token_hash=token_hash(token), created_at=now, expires_at=now + ttl))
    return token, user


def logout(s: Session, token: str) -> None:
    s.execute(delete(models.UserSession).where(models.UserSession.token_hash == token_hash(token)))


def user_for_token(s: Session, now: float, token: str) -> models.User:
    return session_for_token(s, now, token)[0]


def session_for_token(s: Session, now: float, token: str) -> tuple[models.User, float]:
    """The user a login token belongs to and when the token expires."""
    sess = s.scalar(select(models.UserSession).where(models.UserSession.token_hash == token_hash(token)))
    if sess is None:
        raise Unauthenticated("invalid or unknown token; log in again")
    if sess.expires_at < now:
        raise Unauthenticated("token expired; log in again")
    user = s.get(models.User, sess.user_id)
    if user is None or not user.active:
        raise Unauthenticated("user is no longer active")
    return user, sess.expires_at


def list_users(s: Session) -> list[models.User]:
    return list(s.scalars(select(models.User).order_by(models.User.id)))


def get_user(s: Session, user_id: int) -> models.User:
    user = s.get(models.User, user_id)
    if user is None:
        raise NotFound(f"user {user_id} not found")
    return user


def create_user(s: Session, now: float, actor: models.User, username: str, password: str, is_hashed: bool,
                admin: bool = False, active: bool = True, display_name: str | None = None) -> models.User:
    if not actor.admin:
        raise Forbidden("only an admin can create users")
    username = (username or "").strip()
    if not username or len(username) > 255 or any(c.isspace() for c in username):
        raise InvalidArgument("user.username: must be 1-255 characters without spaces",
                              fields=[{"field": "user.username", "message": "invalid username"}])
    if s.scalar(select(models.User).where(models.User.username == username)) is not None:
        raise Conflict(f"user {username!r} already exists")
    user = models.User(username=username, admin=admin, active=active, display_name=display_name,
                       password_hash=passwords.hash_password(passwords.normalize(password or "", is_hashed)),
                       created_at=now, modified_at=now)
    s.add(user)
    s.flush()
    return user


def set_password(s: Session, now: float, actor: models.User, user_id: int, password: str, is_hashed: bool) -> None:
    user = get_user(s, user_id)
    if actor.id != user.id and not actor.admin:
        raise Forbidden("only an admin can change another user's password")
    user.password_hash = passwords.hash_password(passwords.normalize(password, is_hashed))
    user.modified_at = now

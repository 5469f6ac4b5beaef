"""Logins (identity/users.py), on both databases: failed logins hold up a user name at the guesser's own
address only, an unknown name costs the same argon2 work as a known one, and the console socket's
logins are never held up."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from pedl.errors import TooManyRequests, Unauthenticated
from pedl.master.db.engine import Database
from pedl.master.identity import passwords, users
from pedl.master.identity.login_limiter import LoginLimiter
from pedl.master.identity.passwords import client_hash

GUESSER = "203.0.113.66"
ADMIN_DESK = "10.0.0.9"


@pytest.fixture
def limiter(master_config) -> LoginLimiter:
    return LoginLimiter(master_config.security.login_rate_limit)


def log_in(
    db: Database, limiter: LoginLimiter | None, username: str, password: str, address: str, now: float = 100.0
) -> str:
    with db.session() as s:
        token, _ = users.login(s, now, 3600.0, username, client_hash(password), True, limiter, address)
        s.commit()
    return token


def test_a_guesser_elsewhere_cannot_lock_the_admin_out(database: Database, limiter: LoginLimiter) -> None:
    with database.session() as s:
        users.ensure_default_users(s, 0.0)
        s.commit()
    for _ in range(50):
        with pytest.raises((Unauthenticated, TooManyRequests)):
            log_in(database, limiter, "admin", "guess", GUESSER)
    with pytest.raises(TooManyRequests):
        log_in(database, limiter, "admin", "", GUESSER)  # the guesser's own address waits, right password or not
    assert log_in(database, limiter, "admin", "", ADMIN_DESK)  # the admin's desk does not


def test_an_unknown_user_name_costs_the_same_verification_as_a_known_one(
    database: Database, limiter: LoginLimiter, monkeypatch: pytest.MonkeyPatch
) -> None:
    with database.session() as s:
        users.ensure_default_users(s, 0.0)
        s.commit()
    verified: list[str] = []
    real = passwords.verify_password

    def recording(stored: str, normalized: str) -> bool:
        verified.append(stored)
        return real(stored, normalized)

    monkeypatch.setattr(passwords, "verify_password", recording)
    for name in ("admin", "no-such-user"):
        with pytest.raises(Unauthenticated, match="invalid credentials"):
            log_in(database, limiter, name, "wrong", GUESSER)
    known, unknown = verified
    assert unknown == passwords.dummy_hash() and unknown != known
    assert unknown.split("$")[:4] == known.split("$")[:4]  # argon2id, the same version and costs


def test_console_logins_are_never_held_up(app: FastAPI) -> None:
    ctx = app.state.ctx
    with ctx.db.session() as s:
        users.ensure_default_users(s, 0.0)
        s.commit()
    for _ in range(30):
        ctx.login_limiter.failed("admin", "", ctx.clock.now())  # a console client has no address
    with pytest.raises(TooManyRequests):
        users.log_in(ctx, "admin", "", False, "")
    logged_in = users.log_in(ctx, "admin", "", False, "", console=True)
    assert logged_in.token and logged_in.user.username == "admin"

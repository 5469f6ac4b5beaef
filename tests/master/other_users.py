"""Users besides the fixtures' `determined` and `admin`, for tests of what one user's config or load may do
to another's: each made by the admin and logged in."""

from __future__ import annotations

from fastapi.testclient import TestClient

from pedl.master.identity.passwords import client_hash
from tests.master.fakes import bearer, login, post


def make_user(client: TestClient, admin: dict, name: str, *, is_admin: bool = False) -> dict[str, str]:
    """Headers of a new user `name` (password "pw-<name>")."""
    body = {
        "user": {"username": name, "admin": is_admin, "active": True},
        "password": client_hash("pw-" + name),
        "isHashed": True,
    }
    r = post(client, "/api/v1/users", body, admin)
    assert r.status_code == 200, r.text
    return bearer(login(client, name, "pw-" + name))

"""Users: listing, creation (admin only), and password changes in both det's and pedl's shapes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig
from pedl.master.identity.passwords import DET_CLIENT_SALT, client_hash
from tests.master.fakes import bearer, login, post


def user_id(client: TestClient, headers: dict, username: str) -> int:
    users = client.get("/api/v1/users", headers=headers).json()["users"]
    return next(u["id"] for u in users if u["username"] == username)


def login_status(client: TestClient, username: str, password: str, hashed: bool = True) -> int:
    sent = client_hash(password) if hashed else password
    r = post(client, "/api/v1/auth/login", {"username": username, "password": sent, "isHashed": hashed})
    return r.status_code


def test_det_client_hash_matches_determined() -> None:
    import hashlib

    assert DET_CLIENT_SALT == "GubPEmmotfiK9TMD6Zdw"
    assert client_hash("Secret123") == hashlib.sha512(b"GubPEmmotfiK9TMD6ZdwSecret123").hexdigest()
    assert client_hash("Secret123").startswith("00427e90")
    assert client_hash("") == ""


def test_default_users_exist(client: TestClient, user: dict) -> None:
    r = client.get("/api/v1/users", headers=user)
    assert r.status_code == 200
    names = {u["username"]: u for u in r.json()["users"]}
    assert names["admin"]["admin"] is True
    assert names["determined"]["admin"] is False
    assert all(u["id"] > 0 for u in names.values())
    assert r.json()["pagination"]["total"] == len(names)


def test_change_password_det_style_bare_json_string(client: TestClient, user: dict) -> None:
    me = user_id(client, user, "determined")
    r = post(client, f"/api/v1/users/{me}/password", client_hash("n3w-Pass"), user)
    assert r.status_code == 200, r.text
    assert login_status(client, "determined", "") == 401
    assert login_status(client, "determined", "n3w-Pass") == 200  # det: hashed client side
    assert login_status(client, "determined", "n3w-Pass", hashed=False) == 200  # plain text
    assert login_status(client, "determined", "wrong") == 401


@pytest.mark.parametrize("hashed", [True, False])
def test_change_password_object_body(client: TestClient, user: dict, hashed: bool) -> None:
    me = user_id(client, user, "determined")
    sent = client_hash("abc-123") if hashed else "abc-123"
    r = post(client, f"/api/v1/users/{me}/password", {"password": sent, "isHashed": hashed}, user)
    assert r.status_code == 200, r.text
    assert login_status(client, "determined", "abc-123") == 200
    assert login_status(client, "determined", "") == 401


def test_set_back_to_blank(client: TestClient, admin: dict) -> None:
    me = user_id(client, admin, "admin")
    post(client, f"/api/v1/users/{me}/password", client_hash("x"), admin)
    assert login_status(client, "admin", "") == 401
    post(client, f"/api/v1/users/{me}/password", "", admin)
    assert login_status(client, "admin", "") == 200


def test_only_admin_changes_other_users_passwords(client: TestClient, user: dict, admin: dict) -> None:
    admin_id = user_id(client, admin, "admin")
    r = post(client, f"/api/v1/users/{admin_id}/password", client_hash("hijack"), user)
    assert r.status_code == 403
    assert login_status(client, "admin", "") == 200  # unchanged
    determined_id = user_id(client, admin, "determined")
    r = post(client, f"/api/v1/users/{determined_id}/password", client_hash("set-by-admin"), admin)
    assert r.status_code == 200
    assert login_status(client, "determined", "set-by-admin") == 200


def test_change_password_of_unknown_user_is_404(client: TestClient, admin: dict) -> None:
    assert post(client, "/api/v1/users/9999/password", client_hash("x"), admin).status_code == 404


def test_own_password_change_keeps_this_session_and_revokes_the_others(client: TestClient, user: dict) -> None:
    other_session = bearer(login(client, "determined"))
    assert client.get("/api/v1/me", headers=other_session).status_code == 200  # cached from here on
    me = user_id(client, user, "determined")
    assert post(client, f"/api/v1/users/{me}/password", client_hash("p"), user).status_code == 200
    assert client.get("/api/v1/me", headers=user).status_code == 200
    assert client.get("/api/v1/me", headers=other_session).status_code == 401


def test_admin_password_reset_revokes_every_session_of_the_user(client: TestClient, user: dict, admin: dict) -> None:
    assert client.get("/api/v1/me", headers=user).status_code == 200
    me = user_id(client, admin, "determined")
    assert post(client, f"/api/v1/users/{me}/password", client_hash("reset"), admin).status_code == 200
    r = client.get("/api/v1/me", headers=user)
    assert r.status_code == 401, r.text
    assert client.get("/api/v1/me", headers=admin).status_code == 200  # the admin's own session stays


def test_own_password_change_with_a_stale_token_needs_the_old_password(
    client: TestClient, user: dict, clock: ManualClock, master_config: MasterConfig
) -> None:
    me = user_id(client, user, "determined")
    clock.advance(master_config.security.fresh_login_window + 1)
    r = post(client, f"/api/v1/users/{me}/password", client_hash("stolen"), user)
    assert r.status_code == 403
    assert "old" in r.json()["message"]
    assert login_status(client, "determined", "") == 200  # unchanged
    wrong = {"password": client_hash("stolen"), "isHashed": True, "oldPassword": client_hash("guess")}
    assert post(client, f"/api/v1/users/{me}/password", wrong, user).status_code == 403
    assert login_status(client, "determined", "") == 200
    right = {"password": client_hash("mine"), "isHashed": True, "oldPassword": ""}
    assert post(client, f"/api/v1/users/{me}/password", right, user).status_code == 200, "blank old password"
    assert login_status(client, "determined", "mine") == 200


def test_a_fresh_login_may_change_its_own_password_without_the_old_one(client: TestClient) -> None:
    fresh = bearer(login(client, "determined"))  # det's `user change-password` sends no old password
    me = user_id(client, fresh, "determined")
    assert post(client, f"/api/v1/users/{me}/password", client_hash("n3w"), fresh).status_code == 200
    assert login_status(client, "determined", "n3w") == 200


def test_failed_logins_of_a_user_wait_longer_and_longer(
    client: TestClient, clock: ManualClock, master_config: MasterConfig
) -> None:
    limit = master_config.security.login_rate_limit
    for _ in range(limit.failures_per_user):
        assert login_status(client, "determined", "wrong") == 401
    r = post(client, "/api/v1/auth/login", {"username": "determined", "password": "", "isHashed": True})
    assert r.status_code == 429, "even the right password waits: the wait is checked first"
    assert r.headers["Retry-After"] == "1"
    assert login_status(client, "admin", "") == 200  # another user is not held up
    clock.advance(1)
    assert login_status(client, "determined", "wrong") == 401
    assert post(client, "/api/v1/auth/login", {"username": "determined"}).headers["Retry-After"] == "2"
    clock.advance(2)
    assert login_status(client, "determined", "") == 200


def test_failed_logins_are_rate_limited_per_address(client: TestClient, master_config: MasterConfig) -> None:
    limit = master_config.security.login_rate_limit
    for i in range(limit.failures_per_address):
        assert login_status(client, f"nobody-{i}", "x") == 401
    r = post(client, "/api/v1/auth/login", {"username": "admin", "password": "", "isHashed": True})
    assert r.status_code == 429
    assert int(r.headers["Retry-After"]) >= 1


def test_admin_creates_a_user_who_can_log_in(client: TestClient, admin: dict) -> None:
    r = post(
        client,
        "/api/v1/users",
        {
            "user": {"username": "alice", "admin": False, "active": True},
            "password": client_hash("wonderland"),
            "isHashed": True,
        },
        admin,
    )
    assert r.status_code == 200, r.text
    created = r.json()["user"]
    assert created["username"] == "alice" and created["id"] > 0 and created["admin"] is False
    token = login(client, "alice", "wonderland")
    me = client.get("/api/v1/me", headers=bearer(token)).json()["user"]
    assert me["id"] == created["id"]


def test_create_user_with_plaintext_password(client: TestClient, admin: dict) -> None:
    r = post(client, "/api/v1/users", {"user": {"username": "bob"}, "password": "pw", "isHashed": False}, admin)
    assert r.status_code == 200
    assert login_status(client, "bob", "pw") == 200


def test_non_admin_cannot_create_users(client: TestClient, user: dict) -> None:
    r = post(client, "/api/v1/users", {"user": {"username": "mallory"}, "password": ""}, user)
    assert r.status_code == 403
    assert login_status(client, "mallory", "") == 401


def test_duplicate_user_is_409(client: TestClient, admin: dict) -> None:
    body = {"user": {"username": "carol"}, "password": ""}
    assert post(client, "/api/v1/users", body, admin).status_code == 200
    r = post(client, "/api/v1/users", body, admin)
    assert r.status_code == 409
    assert "carol" in r.json()["message"]
    assert post(client, "/api/v1/users", {"user": {"username": "admin"}}, admin).status_code == 409


@pytest.mark.parametrize("username", ["", "   ", "has space", "x" * 256])
def test_bad_usernames_are_400(client: TestClient, admin: dict, username: str) -> None:
    r = post(client, "/api/v1/users", {"user": {"username": username}}, admin)
    assert r.status_code == 400
    assert "user.username" in r.json()["message"]


def test_inactive_user_cannot_log_in(client: TestClient, admin: dict) -> None:
    post(client, "/api/v1/users", {"user": {"username": "dave", "active": False}}, admin)
    r = post(client, "/api/v1/auth/login", {"username": "dave", "password": "", "isHashed": True})
    assert r.status_code == 403, r.text  # as Determined: the right password of a deactivated user is forbidden
    assert "user is not active" in r.json()["message"]  # the text det's users match on
    assert login_status(client, "dave", "wrong") == 401  # a wrong password says nothing about the account


def test_a_listed_user_has_exactly_v1users_keys(client: TestClient, user: dict) -> None:
    listed = client.get("/api/v1/users", headers=user).json()
    assert set(listed) == {"users", "pagination"}
    assert set(listed["users"][0]) == {
        "id",
        "username",
        "admin",
        "active",
        "displayName",
        "remote",
        "modifiedAt",
        "agentUserGroup",
    }
    assert listed["pagination"] == {
        "offset": 0,
        "limit": 0,
        "startIndex": 0,
        "endIndex": len(listed["users"]),
        "total": len(listed["users"]),
    }
    me = client.get("/api/v1/me", headers=user).json()
    assert set(me) == {"user"} and me["user"] in listed["users"]

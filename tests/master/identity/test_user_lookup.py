"""GET /users/{username}/by-username (the SDK's client.get_user_by_name): the user in the shape of the
other user routes, for any logged-in user; 404 naming an unknown name; names match exactly."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.master.fakes import post


def test_a_user_looks_another_up_by_name(client: TestClient, user: dict, admin: dict) -> None:
    body = {"user": {"username": "dana.k", "admin": False, "displayName": "Dana"}, "password": "", "isHashed": True}
    made = post(client, "/api/v1/users", body, admin).json()["user"]
    listed = {u["username"]: u for u in client.get("/api/v1/users", headers=user).json()["users"]}
    for name in ("dana.k", "admin", "determined"):
        r = client.get(f"/api/v1/users/{name}/by-username", headers=user)
        assert r.status_code == 200, r.text
        assert r.json() == {"user": listed[name]}
    assert listed["dana.k"]["id"] == made["id"] and listed["dana.k"]["displayName"] == "Dana"


def test_an_unknown_name_is_a_404_naming_it(client: TestClient, user: dict) -> None:
    r = client.get("/api/v1/users/nobody-here/by-username", headers=user)
    assert r.status_code == 404 and "nobody-here" in r.json()["message"]
    r = client.get("/api/v1/users/ADMIN/by-username", headers=user)  # names match exactly, as login does
    assert r.status_code == 404 and "ADMIN" in r.json()["message"]


def test_a_name_with_url_escapes_and_no_token(client: TestClient, user: dict, admin: dict) -> None:
    body = {"user": {"username": "a@b%c", "admin": False}, "password": "", "isHashed": True}
    assert post(client, "/api/v1/users", body, admin).status_code == 200
    r = client.get("/api/v1/users/a%40b%25c/by-username", headers=user)  # as det's parse.quote sends it
    assert r.status_code == 200 and r.json()["user"]["username"] == "a@b%c"
    assert client.get("/api/v1/users/admin/by-username").status_code == 401

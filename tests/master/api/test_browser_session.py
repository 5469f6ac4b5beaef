"""The WebUI's cookie session: HttpOnly and SameSite cookies, CSRF protection for state changes,
logout, and the conditional GETs (ETag, 304) that keep polling pages cheap."""

from __future__ import annotations

from fastapi.testclient import TestClient

from pedl.master.api.browser_session import CSRF_COOKIE, SESSION_COOKIE, csrf_for
from tests.master.fakes import create_experiment


def open_session(client: TestClient, username: str = "admin", password: str = "") -> str:
    r = client.post("/api/v1/auth/session", json={"username": username, "password": password})
    assert r.status_code == 200, r.text
    return r.cookies[SESSION_COOKIE]


def test_login_sets_an_httponly_strict_session_cookie_and_a_readable_csrf_cookie(client: TestClient) -> None:
    r = client.post("/api/v1/auth/session", json={"username": "admin", "password": ""})
    assert r.status_code == 200 and r.json()["user"]["username"] == "admin"
    cookies = {c.split("=", 1)[0]: c.lower() for c in r.headers.get_list("set-cookie")}
    assert "httponly" in cookies[SESSION_COOKIE] and "samesite=strict" in cookies[SESSION_COOKIE]
    assert "httponly" not in cookies[CSRF_COOKIE] and "samesite=strict" in cookies[CSRF_COOKIE]
    assert "path=/" in cookies[SESSION_COOKIE] and "max-age=" in cookies[SESSION_COOKIE]
    assert "secure" not in cookies[SESSION_COOKIE]  # plain HTTP here; over HTTPS it is Secure
    assert r.cookies[CSRF_COOKIE] == csrf_for(r.cookies[SESSION_COOKIE])
    assert "token" not in r.json()  # the page never holds the token
    me = client.get("/api/v1/me")
    assert me.status_code == 200 and me.json()["user"]["username"] == "admin"


def test_wrong_password_and_a_form_post_are_refused(client: TestClient) -> None:
    r = client.post("/api/v1/auth/session", json={"username": "admin", "password": "wrong"})
    assert r.status_code == 401 and SESSION_COOKIE not in r.cookies
    form = client.post(
        "/api/v1/auth/session", content='{"username": "admin", "password": ""}', headers={"Content-Type": "text/plain"}
    )
    assert form.status_code == 400 and "Content-Type" in form.json()["message"]
    assert client.get("/api/v1/me").status_code == 401


def test_a_state_change_with_the_cookie_needs_the_csrf_header(client: TestClient) -> None:
    token = open_session(client)
    exp = create_experiment(client, {"Authorization": f"Bearer {token}"})
    exp_id = exp["id"]
    refused = client.post(f"/api/v1/experiments/{exp_id}/pause")
    assert refused.status_code == 403 and "X-CSRF-Token" in refused.json()["message"]
    wrong = client.post(f"/api/v1/experiments/{exp_id}/pause", headers={"X-CSRF-Token": csrf_for("other")})
    assert wrong.status_code == 403
    ok = client.post(f"/api/v1/experiments/{exp_id}/pause", headers={"X-CSRF-Token": csrf_for(token)})
    assert ok.status_code == 200, ok.text
    assert client.get(f"/api/v1/experiments/{exp_id}").json()["experiment"]["state"] == "STATE_PAUSED"


def test_a_bearer_token_needs_no_csrf_header(client: TestClient, admin: dict) -> None:
    exp_id = create_experiment(client, admin)["id"]
    r = client.post(f"/api/v1/experiments/{exp_id}/pause", headers=admin)
    assert r.status_code == 200, r.text


def test_logout_revokes_the_session_and_clears_the_cookies(client: TestClient) -> None:
    token = open_session(client)
    assert client.delete("/api/v1/auth/session").status_code == 403  # it changes state: CSRF first
    r = client.delete("/api/v1/auth/session", headers={"X-CSRF-Token": csrf_for(token)})
    assert r.status_code == 200
    assert SESSION_COOKIE not in client.cookies
    assert client.get("/api/v1/me").status_code == 401
    assert client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_an_unchanged_view_answers_304_until_a_write_changes_it(client: TestClient, admin: dict) -> None:
    # paused: an active experiment's trials are scheduled meanwhile, and its reported state (and so the
    # list's ETag) follows its allocations
    exp_id = create_experiment(client, admin, activate=False)["id"]
    first = client.get("/api/v1/experiments", headers=admin)
    etag = first.headers["etag"]
    assert first.status_code == 200 and etag.startswith('W/"')
    again = client.get("/api/v1/experiments", headers={**admin, "If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    r = client.patch(f"/api/v1/experiments/{exp_id}", json={"description": "changed"}, headers=admin)
    assert r.status_code == 200, r.text
    changed = client.get("/api/v1/experiments", headers={**admin, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert changed.json()["experiments"][0]["description"] == "changed"


def test_the_etag_is_per_caller(client: TestClient, admin: dict, user: dict) -> None:
    etag = client.get("/api/v1/experiments", headers=admin).headers["etag"]
    other = client.get("/api/v1/experiments", headers={**user, "If-None-Match": etag})
    assert other.status_code == 200 and other.headers["etag"] != etag
    assert client.get("/api/v1/experiments", headers={"If-None-Match": etag}).status_code == 401

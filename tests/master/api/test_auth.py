"""Authentication: /info is open, everything else needs a valid, unexpired token; login in the
det dialect (blank and sha512-hashed passwords); /me; logout."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from packaging.version import Version

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from pedl.version import __version__
from tests.master.fakes import bearer, login, post

OPEN_ROUTES = {
    ("get", "/info"),
    ("get", "/api/v1/master"),
    ("post", "/api/v1/auth/login"),
    ("post", "/api/v1/auth/session"),
}


def all_routes(app: FastAPI) -> list[tuple[str, str]]:
    out = []
    for path, ops in app.openapi()["paths"].items():
        for method in ops:
            if (method, path) in OPEN_ROUTES:
                continue
            concrete = path.replace("{action}", "kill")
            concrete = re.sub(r"\{[^}]*_id\}", "1", concrete)
            concrete = re.sub(r"\{[^}]+\}", "x", concrete)
            out.append((method, concrete))
    return out


def test_info_needs_no_auth(client: TestClient) -> None:
    r = client.get("/info")
    assert r.status_code == 200
    body = r.json()
    # det parses it as PEP 440 and warns unless it equals its own 0.38.1; pedl's own version beside it
    assert Version(body["version"]) == Version("0.38.1") and body["pedlVersion"] == __version__
    assert body["cluster_id"] and body["master_id"]
    assert "cluster_name" in body


def test_cluster_id_is_stable_across_restarts(master_config: MasterConfig) -> None:
    with TestClient(create_app(master_config)) as c:
        first = c.get("/info").json()
    with TestClient(create_app(master_config)) as c:
        second = c.get("/info").json()
    assert first["cluster_id"] == second["cluster_id"]
    assert first["master_id"] != second["master_id"]


BAD_HEADERS = [
    pytest.param({}, id="no-token"),
    pytest.param({"Authorization": "Bearer not-a-real-token"}, id="unknown-token"),
    pytest.param({"Authorization": "Bearer "}, id="empty-bearer"),
    pytest.param({"Authorization": "Basic YWRtaW46"}, id="basic-scheme"),
    pytest.param({"Authorization": "garbage"}, id="garbage"),
    pytest.param({"Grpc-Metadata-x-allocation-token": "Bearer nope"}, id="unknown-task-token"),
]


@pytest.mark.parametrize("headers", BAD_HEADERS)
def test_every_other_route_refuses_bad_or_missing_tokens(app: FastAPI, client: TestClient, headers: dict) -> None:
    routes = all_routes(app)
    assert len(routes) > 25  # the table really covers the API
    wrong = []
    for method, path in routes:
        r = client.request(method.upper(), path, headers=headers)
        if r.status_code != 401:
            wrong.append((method, path, r.status_code))
        else:
            body = r.json()
            assert body["message"] and body["code"] == 16  # gRPC UNAUTHENTICATED
    assert wrong == []


@pytest.mark.parametrize("username", ["determined", "admin"])
def test_login_with_blank_password(client: TestClient, username: str) -> None:
    r = post(client, "/api/v1/auth/login", {"username": username, "password": "", "isHashed": True})
    assert r.status_code == 200
    body = r.json()
    assert body["token"]
    assert body["user"]["username"] == username
    assert body["user"]["admin"] is (username == "admin")
    assert body["user"]["active"] is True
    me = client.get("/api/v1/me", headers=bearer(body["token"]))
    assert me.status_code == 200
    assert me.json()["user"]["username"] == username
    assert me.json()["user"]["id"] > 0  # det's whoami asserts a non-zero id


def test_login_with_plain_blank_password_and_no_is_hashed(client: TestClient) -> None:
    r = post(client, "/api/v1/auth/login", {"username": "determined"})
    assert r.status_code == 200


def test_login_body_without_content_type(client: TestClient) -> None:
    r = client.post("/api/v1/auth/login", content=b'{"username": "admin", "password": "", "isHashed": true}')
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("username", "password"),
    [("admin", "wrong"), ("determined", "x"), ("nobody", ""), ("", "")],
)
def test_wrong_credentials_are_401_invalid_credentials(client: TestClient, username: str, password: str) -> None:
    """Determined answers Unauthenticated (det: UnauthenticatedException, "Invalid username/password
    combination"); an unknown user and a wrong password look the same."""
    from pedl.master.identity.passwords import client_hash

    r = post(client, "/api/v1/auth/login", {"username": username, "password": client_hash(password), "isHashed": True})
    assert r.status_code == 401
    assert r.json()["message"] == "invalid credentials"
    assert "token" not in r.json()


def test_tokens_are_distinct_per_login(client: TestClient) -> None:
    a, b = login(client, "admin"), login(client, "admin")
    assert a != b
    assert client.get("/api/v1/me", headers=bearer(a)).status_code == 200
    assert client.get("/api/v1/me", headers=bearer(b)).status_code == 200


def test_bearer_scheme_is_case_insensitive(client: TestClient) -> None:
    token = login(client, "admin")
    assert client.get("/api/v1/me", headers={"Authorization": f"bearer {token}"}).status_code == 200


def test_expired_token_is_401(client: TestClient, clock: ManualClock, master_config: MasterConfig) -> None:
    token = login(client, "determined")
    clock.advance(master_config.session_ttl - 1)
    assert client.get("/api/v1/me", headers=bearer(token)).status_code == 200
    clock.advance(2)
    r = client.get("/api/v1/me", headers=bearer(token))
    assert r.status_code == 401
    assert "expired" in r.json()["message"]
    # a fresh login works again
    assert client.get("/api/v1/me", headers=bearer(login(client, "determined"))).status_code == 200


def test_expired_session_row_is_401(app: FastAPI, client: TestClient) -> None:
    from pedl.master.db import models
    from pedl.master.lifecycle.tokens import token_hash

    ctx = app.state.ctx
    with ctx.db.session() as s:
        user = s.query(models.User).filter_by(username="admin").one()
        s.add(
            models.UserSession(
                user_id=user.id,
                token_hash=token_hash("old-token"),
                created_at=ctx.clock.now() - 100,
                expires_at=ctx.clock.now() - 1,
            )
        )
    assert client.get("/api/v1/me", headers=bearer("old-token")).status_code == 401


def test_logout_ends_the_session(client: TestClient) -> None:
    token = login(client, "admin")
    assert post(client, "/api/v1/auth/logout", headers=bearer(token)).status_code == 200
    assert client.get("/api/v1/me", headers=bearer(token)).status_code == 401


def test_tokens_survive_a_master_restart(master_config: MasterConfig) -> None:
    with TestClient(create_app(master_config)) as c:
        token = login(c, "determined")
    with TestClient(create_app(master_config)) as c:
        assert c.get("/api/v1/me", headers=bearer(token)).status_code == 200


# GET /api/v1/master's fields: Determined's GetMasterResponse, and pedl's own version (as /info has it)
MASTER_FIELDS = {
    "version",
    "pedlVersion",
    "masterId",
    "clusterId",
    "clusterName",
    "hasCustomLogo",
    "strictJobQueueControl",
    "telemetryEnabled",
    "rbacEnabled",
    "userManagementEnabled",
    "product",
    "featureSwitches",
}


def test_master_info_shape(client: TestClient, user: dict) -> None:
    r = client.get("/api/v1/master", headers=user)
    assert r.status_code == 200
    body = r.json()
    for key, kind in (
        ("clusterId", str),
        ("clusterName", str),
        ("hasCustomLogo", bool),
        ("masterId", str),
        ("strictJobQueueControl", bool),
        ("version", str),
    ):
        assert isinstance(body[key], kind), key
    assert body["clusterId"] == client.get("/info").json()["cluster_id"]
    assert body["telemetryEnabled"] is False


@pytest.mark.parametrize("headers", BAD_HEADERS)
def test_master_info_needs_no_token_and_tells_a_stranger_nothing_more(
    client: TestClient, user: dict, admin: dict, headers: dict
) -> None:
    """As in Determined (the 0.38.1 SDK asks before it logs in): the same answer to anyone, whatever
    token comes with it, and only the fields above: no pools, database, paths or users."""
    r = client.get("/api/v1/master", headers=headers)
    assert r.status_code == 200, r.text
    assert set(r.json()) == MASTER_FIELDS
    assert r.json() == client.get("/api/v1/master", headers=user).json()
    assert r.json() == client.get("/api/v1/master", headers=admin).json()
    info = client.get("/info").json()
    assert (r.json()["masterId"], r.json()["version"]) == (info["master_id"], info["version"])


def test_master_config_is_admin_only(client: TestClient, user: dict, admin: dict) -> None:
    r = client.get("/api/v1/master/config", headers=user)
    assert r.status_code == 403
    assert "admin" in r.json()["message"]
    assert "config" not in r.json()
    r = client.get("/api/v1/master/config", headers=admin)
    assert r.status_code == 200
    # as Determined names it: det's clients tell Kubernetes apart by resource_manager.type
    assert r.json()["config"]["resource_manager"] == {
        "type": "agent",
        "default_aux_resource_pool": "default",
        "default_compute_resource_pool": "default",
    }


@pytest.mark.parametrize(
    ("access", "anonymous", "user_status"), [("public", 200, 200), ("authenticated", 401, 200), ("admin", 401, 403)]
)
def test_prometheus_metrics_access_is_set_in_master_yaml(
    master_config: MasterConfig, access: str, anonymous: int, user_status: int
) -> None:
    security = master_config.security.model_copy(update={"metrics_access": access})
    with TestClient(create_app(master_config.model_copy(update={"security": security}))) as c:
        assert c.get("/metrics").status_code == anonymous
        assert c.get("/metrics", headers=bearer(login(c, "determined"))).status_code == user_status
        r = c.get("/metrics", headers=bearer(login(c, "admin")))
        assert r.status_code == 200
        assert "python_info" in r.text or "process_" in r.text or "# HELP" in r.text


def test_password_hashes_take_the_costs_master_yaml_gives(
    master_config: MasterConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """security.password_hashing sets the argon2id costs of the hashes the master makes from then on
    (a hash records its own costs, so older ones still verify); below OWASP's floor is refused."""
    from pydantic import ValidationError

    from pedl.config.security_config import PasswordHashing, SecurityConfig
    from pedl.master.identity import passwords

    monkeypatch.undo()  # this test is about the costs: the real configure, restored after it by monkeypatch
    monkeypatch.setattr(passwords, "_hasher", passwords._hasher)
    old = passwords.hash_password("")
    security = master_config.security.model_copy(
        update={"password_hashing": PasswordHashing(time_cost=2, memory_kib=19456, parallelism=1)}
    )
    with TestClient(create_app(master_config.model_copy(update={"security": security}))) as c:
        r = post(
            c,
            "/api/v1/users",
            {"user": {"username": "costed", "active": True}, "password": "s3cret!x"},
            bearer(login(c, "admin")),
        )
        assert r.status_code == 200, r.text
        assert login(c, "costed", "s3cret!x")
    assert passwords.hash_password("").startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert passwords.verify_password(old, "")
    for bad in ({"memory_kib": 1024}, {"time_cost": 1}, {"parallelism": 0}):
        with pytest.raises(ValidationError, match="password_hashing"):
            SecurityConfig.model_validate({"password_hashing": bad})


def test_the_start_checks_only_the_default_users_for_blank_passwords(
    app: FastAPI, client: TestClient, admin: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A verify is a deliberately slow hash: the start's check looks at admin and determined (created
    blank) only, so its work does not grow with the number of users."""
    from pedl.master.identity import passwords, users

    for name in ("u1", "u2", "u3"):
        assert (
            post(
                client, "/api/v1/users", {"user": {"username": name, "active": True}, "password": ""}, admin
            ).status_code
            == 200
        )
    verified: list[str] = []
    real = passwords.verify_password
    monkeypatch.setattr(passwords, "verify_password", lambda h, p: verified.append(h) or real(h, p))
    with app.state.ctx.db.session() as s:
        blank = users.users_with_blank_password(s)
    assert sorted(blank) == ["admin", "determined"] and len(verified) == 2


@pytest.mark.parametrize(
    ("peer", "forwarded", "counted_as"),
    [
        ("10.1.2.3", "192.0.2.9", "192.0.2.9"),  # a trusted proxy names its client
        ("10.1.2.3", "192.0.2.9, 10.7.7.7", "192.0.2.9"),  # through two of them: the first address no proxy of ours
        ("198.51.100.7", "192.0.2.10", "198.51.100.7"),  # anyone else: the peer, whatever the header says
        ("127.0.0.1", "192.0.2.11", "127.0.0.1"),  # loopback too (uvicorn's own default trusted it)
    ],
)
def test_x_forwarded_for_is_trusted_from_security_trusted_proxies_only(
    master_config: MasterConfig, clock: ManualClock, peer: str, forwarded: str, counted_as: str
) -> None:
    """The client address that failed logins are counted against: a client cannot pick its own address
    to start a fresh count, unless the master is told the connection is from a proxy of its own."""
    import asyncio
    import json

    config = master_config.model_copy(
        update={"security": master_config.security.model_copy(update={"trusted_proxies": ["10.0.0.0/8"]})}
    )
    app = create_app(config, clock=clock)
    body = json.dumps({"username": "admin", "password": "wrong"}).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/auth/login",
        "raw_path": b"/api/v1/auth/login",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-length", str(len(body)).encode()), (b"x-forwarded-for", forwarded.encode())],
        "client": (peer, 40000),
        "server": ("master", 8080),
    }
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    try:
        with TestClient(app):  # the lifespan: the default users exist
            asyncio.run(app(scope, receive, send))
    finally:
        app.state.ctx.db.dispose()
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [401]
    assert set(app.state.ctx.login_limiter._addresses) == {counted_as}

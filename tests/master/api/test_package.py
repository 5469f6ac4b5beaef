"""GET /api/v1/pedl/package: the agent token or a login gets the master's wheel; nobody else."""

from __future__ import annotations

import hashlib

from fastapi.testclient import TestClient

from pedl.version import __version__
from tests.master.fakes import ctx_of


def test_a_login_gets_the_wheel(client: TestClient, user: dict) -> None:
    r = client.get("/api/v1/pedl/package", headers=user)
    assert r.status_code == 200
    assert r.headers["content-disposition"] == f'attachment; filename="pedl-{__version__}-py3-none-any.whl"'
    assert r.headers["x-pedl-package-sha256"] == hashlib.sha256(r.content).hexdigest()
    assert r.headers["x-pedl-version"] == __version__
    assert r.content[:2] == b"PK"


def test_the_agent_token_gets_the_wheel_and_a_wrong_one_nothing(client: TestClient) -> None:
    token = ctx_of(client.app).agent_token
    assert token
    assert client.get("/api/v1/pedl/package", headers={"X-Pedl-Agent-Token": token}).status_code == 200
    assert client.get("/api/v1/pedl/package", headers={"X-Pedl-Agent-Token": token + "x"}).status_code == 401
    assert client.get("/api/v1/pedl/package").status_code == 401

"""A task's service reached through the master's proxy, on real processes: a trial whose entrypoint
serves HTTP and WebSocket on a free port and registers it, on a real agent behind a real master."""

from __future__ import annotations

import asyncio
import hashlib
import json

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from pedl.devcluster import wait_for
from tests.e2e.conftest import MODELS

pytestmark = pytest.mark.e2e

CONFIG = {
    "name": "proxied",
    "entrypoint": "python3 service.py",
    "max_restarts": 0,
    "searcher": {"name": "single", "metric": "x", "max_length": {"batches": 1}},
    "resources": {"slots_per_trial": 1},
}


def _login(url: str, username: str, password: str = "") -> dict[str, str]:
    r = httpx.post(
        f"{url}/api/v1/auth/login", content=json.dumps({"username": username, "password": password, "isHashed": False})
    )
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['token']}"}


def test_a_tasks_service_through_the_proxy(cluster) -> None:
    c = cluster
    c.add_agent("a1")
    exp_id = c.create(CONFIG, MODELS / "proxied_service")

    def task_id() -> str | None:
        summaries = c.master.api("GET", "/api/v1/tasks")["allocationIdToSummary"].values()
        return next((s["taskId"] for s in summaries if s["taskId"].startswith(f"{exp_id}.")), None)

    wait_for(lambda: task_id() is not None, 60, what="the trial's allocation")
    base = f"{c.master.url}/proxy/{task_id()}/"
    owner = {"Authorization": f"Bearer {c.master.token()}"}  # `determined` created the experiment
    wait_for(
        lambda: httpx.get(base + "ping", headers=owner).status_code == 200, 60, what="the service to register its port"
    )

    r = httpx.get(base + "some/path?q=1", headers=owner)
    assert r.json()["path"] == f"/proxy/{task_id()}/some/path" and r.json()["query"] == "q=1"

    chunk = b"0123456789abcdef" * 65536  # 1 MiB
    r = httpx.post(base + "upload", content=(chunk for _ in range(32)), headers=owner, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json() == {"bytes": 32 * len(chunk), "sha256": hashlib.sha256(chunk * 32).hexdigest()}

    admin = _login(c.master.url, "admin")
    body = {"user": {"username": "bob", "admin": False, "active": True}, "password": "", "isHashed": False}
    assert httpx.post(f"{c.master.url}/api/v1/users", content=json.dumps(body), headers=admin).status_code == 200
    bob = _login(c.master.url, "bob")
    other = httpx.get(base, headers=bob)
    assert other.status_code == 404 and other.json()["message"] == f"task {task_id()} not found"
    assert httpx.get(base).status_code == 401
    assert httpx.get(base, headers=admin).status_code == 200

    ws_url = base.replace("http://", "ws://") + "ws"

    async def echo_then_kill() -> tuple[str, bytes, bool]:
        async with connect(ws_url, additional_headers=owner) as ws:
            await ws.send("hello")
            text = await ws.recv()
            await ws.send(b"\x00\xffbin")
            data = await ws.recv()
            await asyncio.to_thread(c.master.api, "POST", f"/api/v1/experiments/{exp_id}/kill")
            closed = False
            try:
                await asyncio.wait_for(ws.recv(), 60)
            except ConnectionClosed:
                closed = True
            return text, data, closed

    text, data, closed = asyncio.run(echo_then_kill())
    assert (text, data) == ("hello", b"\x00\xffbin")
    assert closed  # the relay ended with the task
    wait_for(lambda: httpx.get(base, headers=owner).status_code == 404, 60, what="the proxy to forget the task")

"""Notebooks on real processes: a real master, a local agent and a real JupyterLab (from PyPI). The
notebook is reached only through the master's proxy (its owner; another user gets a 404), runs a cell
over the kernel WebSocket relayed by the proxy, refuses whoever reaches its port directly without
the task's token, and one left unused for its idle_timeout is ended, saying why."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import pytest
from websockets.asyncio.client import connect

from pedl.devcluster import wait_for

pytestmark = pytest.mark.e2e

pytest.importorskip("jupyterlab", reason="jupyterlab is in the test extra (pyproject.toml)")


def _login(url: str, username: str, password: str = "") -> dict[str, str]:
    r = httpx.post(
        f"{url}/api/v1/auth/login", content=json.dumps({"username": username, "password": password, "isHashed": False})
    )
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['token']}"}


def _task_log(c, task_id: str) -> str:  # a Cluster
    text = c.master.api("GET", f"/api/v1/tasks/{task_id}/logs", follow="false")
    return "".join(json.loads(line)["result"]["log"] for line in text.splitlines() if line)


def _notebook(c, task_id: str) -> dict:
    return c.master.api("GET", f"/api/v1/notebooks/{task_id}")["notebook"]


async def _run_cell(ws_url: str, headers: dict[str, str], code: str) -> str:
    """Send an execute_request on the kernel's channels and gather its stream output until idle."""
    msg_id = uuid.uuid4().hex
    request = {
        "header": {
            "msg_id": msg_id,
            "username": "test",
            "session": uuid.uuid4().hex,
            "msg_type": "execute_request",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "channel": "shell",
        "content": {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
    }
    out = []
    async with connect(ws_url, additional_headers=headers, max_size=None) as ws:
        await ws.send(json.dumps(request))
        while True:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)


def test_a_notebook_through_the_proxy(cluster) -> None:
    c = cluster
    c.add_agent("nb-agent")
    nb = c.master.api("POST", "/api/v1/notebooks", {"config": {"resources": {"slots": 0}}})["notebook"]
    task_id = nb["id"]
    assert nb["serviceAddress"] == f"/proxy/{task_id}/"
    wait_for(lambda: _notebook(c, task_id)["isReady"], 120, what="the notebook to be ready")
    wait_for(lambda: "is running at" in _task_log(c, task_id), 30, what="Jupyter's banner in the task log")
    log = _task_log(c, task_id)
    assert "Jupyter Server" in log and "?token=..." in log, log  # the token itself is never printed

    base = f"{c.master.url}/proxy/{task_id}/"
    owner = {"Authorization": f"Bearer {c.master.token()}"}
    r = httpx.get(base + "api/status", headers=owner)
    assert r.status_code == 200 and "started" in r.json(), r.text
    # the page Determined's test_notebook_proxy asks for: Jupyter sends it on to JupyterLab's
    r = httpx.get(base, headers=owner, follow_redirects=True, timeout=60)
    assert r.status_code == 200 and r.url.path == f"/proxy/{task_id}/lab" and "JupyterLab" in r.text, r.text[:500]

    # a cell runs on a kernel, over the kernel WebSocket relayed by the master
    r = httpx.post(base + "api/kernels", headers=owner, json={"name": "python3"}, timeout=60)
    assert r.status_code == 201, r.text
    kernel = r.json()["id"]
    ws_url = base.replace("http://", "ws://") + f"api/kernels/{kernel}/channels"
    assert asyncio.run(_run_cell(ws_url, owner, "print(6 * 7)")).strip() == "42"

    # another user finds no such task; nobody without a login passes
    admin = _login(c.master.url, "admin")
    body = {"user": {"username": "bob", "admin": False, "active": True}, "password": "", "isHashed": False}
    assert httpx.post(f"{c.master.url}/api/v1/users", content=json.dumps(body), headers=admin).status_code == 200
    bob = _login(c.master.url, "bob")
    assert httpx.get(base + "api/status", headers=bob).status_code == 404
    assert httpx.get(base + "api/status").status_code == 401

    # Jupyter's own port, reached directly, wants the token the master keeps
    summary = c.master.api("GET", "/api/v1/tasks")["allocationIdToSummary"]
    (port,) = [p["port"] for s in summary.values() if s["taskId"] == task_id for p in s["proxyPorts"]]
    direct = httpx.get(f"http://127.0.0.1:{port}/proxy/{task_id}/api/kernels")
    assert direct.status_code == 403, direct.text

    c.master.api("POST", f"/api/v1/notebooks/{task_id}/kill")
    wait_for(lambda: _notebook(c, task_id)["state"] == "STATE_TERMINATED", 60, what="the notebook to end")


def test_an_unused_notebook_is_ended_after_its_idle_timeout(cluster) -> None:
    c = cluster
    c.add_agent("nb-agent")
    config = {"idle_timeout": "3s", "resources": {"slots": 0}}
    task_id = c.master.api("POST", "/api/v1/notebooks", {"config": config})["notebook"]["id"]
    # the idle clock starts once Jupyter answers (no wait for isReady here: 3 s is short)
    wait_for(lambda: _notebook(c, task_id)["state"] == "STATE_TERMINATED", 180, what="the idle notebook to end")
    reason = _notebook(c, task_id)["exitStatus"]
    assert "idle for" in reason and "idle_timeout 3s" in reason, reason
    log = _task_log(c, task_id)
    assert "is running at" in log and "notebook idle for" in log, log


def test_a_notebook_with_a_kernel_open_is_in_use(cluster) -> None:
    """kernels_or_terminals (the default): the task's watcher reports the open kernel, so the notebook
    outlives its idle_timeout several times over; once the kernel is shut down it is ended."""
    c = cluster
    c.add_agent("nb-agent")
    config = {"idle_timeout": "10s", "resources": {"slots": 0}}
    task_id = c.master.api("POST", "/api/v1/notebooks", {"config": config})["notebook"]["id"]
    wait_for(lambda: _notebook(c, task_id)["isReady"], 120, what="the notebook to be ready")
    base = f"{c.master.url}/proxy/{task_id}/"
    owner = {"Authorization": f"Bearer {c.master.token()}"}
    r = httpx.post(base + "api/kernels", headers=owner, json={"name": "python3"}, timeout=60)
    assert r.status_code == 201, r.text
    kernel = r.json()["id"]
    for _ in range(25):  # 25 s: over twice the idle_timeout, nothing passing the proxy
        time.sleep(1)
        assert _notebook(c, task_id)["state"] == "STATE_RUNNING", _notebook(c, task_id)
    assert httpx.delete(base + f"api/kernels/{kernel}", headers=owner, timeout=60).status_code == 204
    wait_for(lambda: _notebook(c, task_id)["state"] == "STATE_TERMINATED", 60, what="the notebook to end")
    assert "idle for" in _notebook(c, task_id)["exitStatus"]

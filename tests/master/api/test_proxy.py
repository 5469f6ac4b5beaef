"""The master's proxy to a task's service, served for real (uvicorn) in front of a real service on a
loopback port, with a fake agent: HTTP streamed both ways, WebSockets relayed, and who passes."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
import websockets
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from pedl.config.master_config import MasterConfig
from pedl.master.api.browser_session import CSRF_COOKIE, SESSION_COOKIE, csrf_for
from pedl.master.identity.passwords import client_hash
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, bearer, create_experiment, login, post
from tests.support.live_master import LiveMaster

SERVICE = Path(__file__).parents[2] / "e2e" / "models" / "proxied_service" / "service.py"


def _service_module():
    spec = importlib.util.spec_from_file_location("proxied_service", SERVICE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def proxy_overrides() -> dict:
    """`proxy:` settings of the test's master; a test parametrizes this to change them."""
    return {}


@pytest.fixture
def world(master_config: MasterConfig, proxy_overrides: dict) -> Iterator[SimpleNamespace]:
    config = master_config.model_copy(
        update={
            "proxy": master_config.proxy.model_copy(
                update={"max_relays_per_task": 3, "end_check_interval": 0.1, **proxy_overrides}
            )
        }
    )
    service = _service_module()
    sock, port = service.listen("127.0.0.1")
    srv, thread = service.serve_in_thread(sock)
    with LiveMaster(config) as master, httpx.Client(base_url=master.url, timeout=60) as client:
        app = master.server.config.app
        admin = bearer(login(client, "admin"))
        for name in ("alice", "bob"):
            body = {
                "user": {"username": name, "admin": False, "active": True},
                "password": client_hash("pw"),
                "isHashed": True,
            }
            assert post(client, "/api/v1/users", body, admin).status_code == 200
        alice, bob = (bearer(login(client, name, "pw")) for name in ("alice", "bob"))
        agent = FakeAgent(app, "agent-1", slots=1)
        create_experiment(client, alice, SINGLE_CONFIG)
        (task,) = agent.start_all()
        yield SimpleNamespace(
            master=master,
            client=client,
            app=app,
            admin=admin,
            alice=alice,
            bob=bob,
            agent=agent,
            task=task,
            port=port,
            service=service,
            url=f"/proxy/{task.task_id}/",
        )
        agent.close()
    srv.should_exit = True
    thread.join()
    sock.close()


def _register(w: SimpleNamespace, port: int | None = None) -> httpx.Response:
    return post(
        w.client,
        f"/api/v1/allocations/{w.task.allocation_id}/proxy_port",
        {"port": port or w.port},
        bearer(w.task.token),
    )


def test_before_the_port_is_registered_the_proxy_answers_503(world) -> None:
    r = world.client.get(world.url, headers=world.alice)
    assert r.status_code == 503
    assert "has not registered the port" in r.json()["message"]


def test_get_passes_the_whole_path_and_drops_credentials_and_hop_headers(world) -> None:
    assert _register(world).status_code == 200
    summary = world.client.get("/api/v1/tasks", headers=world.alice).json()["allocationIdToSummary"]
    assert summary[world.task.allocation_id]["proxyPorts"] == [
        {"port": world.port, "proxyTcp": False, "serviceId": world.task.task_id, "unauthenticated": False}
    ]
    r = world.client.get(
        world.url + "api/a%2Fb/c?x=1&y=%20",
        headers={
            **world.alice,
            "Connection": "x-gone",
            "X-Gone": "1",
            "X-Kept": "2",
            "Cookie": f"{SESSION_COOKIE}=s; jup=1",
        },
    )
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["raw_path"] == f"/proxy/{world.task.task_id}/api/a%2Fb/c" and got["query"] == "x=1&y=%20"
    headers = got["headers"]
    assert "authorization" not in headers and "x-gone" not in headers and headers["x-kept"] == "2"
    assert headers["cookie"] == "jup=1"
    assert headers["x-forwarded-for"] == "127.0.0.1" and headers["x-forwarded-proto"] == "http"
    # the service's answer: its own cookie passes, one of pedl's and its hop-by-hop header do not
    assert r.headers.get_list("set-cookie") == ["svc=1; Path=/"]
    assert "x-secret" not in r.headers


def test_post_streams_a_large_body_to_the_service(world) -> None:
    assert _register(world).status_code == 200
    chunk = bytes(range(256)) * 4096  # 1 MiB
    digest = hashlib.sha256()
    seen_midway = []

    def body():
        for i in range(24):
            if i == 12:
                # the service has had the first half before the rest is sent: the proxy does not buffer
                seen_midway.append(_wait_until(lambda: world.service.RECEIVED["bytes"] >= 8 * len(chunk)))
            digest.update(chunk)
            yield chunk

    r = world.client.post(world.url + "upload", content=body(), headers=world.alice)
    assert r.status_code == 200, r.text
    assert r.json() == {"bytes": 24 * len(chunk), "sha256": digest.hexdigest()}
    assert seen_midway == [True]


def test_the_answer_is_streamed_to_the_browser(world) -> None:
    assert _register(world).status_code == 200
    world.service.GATE.clear()
    with world.client.stream("GET", world.url + "halves", headers=world.alice) as r:
        chunks = r.iter_raw()
        assert next(chunks) == b"first-half;"  # arrived while the service still holds the second half
        world.service.GATE.set()
        assert b"".join(chunks) == b"second-half"


def test_an_answer_in_flight_ends_when_the_task_ends(world) -> None:
    assert _register(world).status_code == 200
    world.service.GATE.clear()
    try:
        with world.client.stream("GET", world.url + "halves", headers=world.alice) as r:
            chunks = r.iter_raw()
            assert next(chunks) == b"first-half;"
            world.agent.exit(world.task.allocation_id, 0)  # the service still holds its second half
            # the master cuts the answer off (an incomplete body, not one that looks whole)
            with pytest.raises(httpx.RemoteProtocolError):
                b"".join(chunks)
    finally:
        world.service.GATE.set()


def _wait_until(check, timeout: float = 30.0) -> bool:
    done = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if check():
            return True
        done.wait(0.02)
    return False


def test_who_passes(world) -> None:
    assert _register(world).status_code == 200
    c = world.client
    assert c.get(world.url).status_code == 401
    assert c.get(world.url, headers=bearer("garbage")).status_code == 401
    other = c.get(world.url, headers=world.bob)
    unknown = c.get("/proxy/no-such-task/", headers=world.bob)
    assert other.status_code == unknown.status_code == 404
    assert other.json()["message"].replace(world.task.task_id, "X") == unknown.json()["message"].replace(
        "no-such-task", "X"
    )
    assert c.get(world.url, headers=bearer(world.task.token)).status_code == 403  # its own task token
    assert c.get(world.url, headers=world.admin).status_code == 200


def test_the_tasks_user_token_does_not_pass_either(world) -> None:
    """DET_USER_TOKEN acts as the task's owner elsewhere, but passed the proxy (200) where the bare task
    token got 403: every script of a user was a key to that user's services."""
    assert _register(world).status_code == 200
    user_token = world.task.message["env"]["DET_USER_TOKEN"]
    assert world.client.get("/api/v1/me", headers=bearer(user_token)).status_code == 200  # the owner, elsewhere
    r = world.client.get(world.url, headers=bearer(user_token))
    assert r.status_code == 403 and "DET_USER_TOKEN" in r.json()["message"]

    async def status() -> int:
        try:
            async with connect(_ws_url(world), additional_headers=bearer(user_token)):
                return 101
        except InvalidStatus as exc:
            return exc.response.status_code

    assert asyncio.run(status()) == 403


def test_only_a_port_the_agent_finds_the_task_listening_on_is_registered(world) -> None:
    """Before, any port was taken: a shell registered another user's service's port and its credential-less
    tunnel reached that service."""
    world.agent.listening = {(world.task.allocation_id, world.port)}
    r = _register(world, 20001)
    assert r.status_code == 400 and "port 20001" in r.json()["message"] and "nothing listens" in r.json()["message"]
    assert world.client.get(world.url, headers=world.alice).status_code == 503  # nothing was registered
    assert world.agent.conn.questions == [(world.task.allocation_id, 20001)]
    assert _register(world).status_code == 200
    assert world.client.get(world.url, headers=world.alice).status_code == 200


def test_each_relay_checks_again_that_the_port_is_the_tasks(world) -> None:
    world.agent.listening = {(world.task.allocation_id, world.port)}
    assert _register(world).status_code == 200
    asked = len(world.agent.conn.questions)
    assert world.client.get(world.url, headers=world.alice).status_code == 200
    assert len(world.agent.conn.questions) == asked + 1
    world.agent.listening = set()  # the task closed it (another user's service may hold it now)
    r = world.client.get(world.url, headers=world.alice)
    assert r.status_code == 502 and "no longer listens" in r.json()["message"]

    async def status() -> int:
        try:
            async with connect(_ws_url(world), additional_headers=world.alice):
                return 101
        except InvalidStatus as exc:
            return exc.response.status_code

    assert asyncio.run(status()) == 502


def test_the_session_cookie_passes_for_the_owner_from_the_masters_pages(world) -> None:
    assert _register(world).status_code == 200
    token = world.alice["Authorization"].split()[1]
    jar = {SESSION_COOKIE: token, CSRF_COOKIE: csrf_for(token)}
    host = world.master.url.removeprefix("http://")
    with httpx.Client(base_url=world.master.url, cookies=jar) as browser:
        assert browser.get(world.url).status_code == 200
        assert browser.post(world.url + "x", content=b"a").status_code == 403  # no Origin: maybe another site
        assert browser.post(world.url + "x", content=b"a", headers={"Origin": "http://evil.example"}).status_code == 403
        assert browser.post(world.url + "x", content=b"a", headers={"Origin": f"http://{host}"}).status_code == 200
    admin = world.admin["Authorization"].split()[1]
    with httpx.Client(base_url=world.master.url, cookies={SESSION_COOKIE: admin}) as browser:
        r = browser.get(world.url)  # an admin's browser is not handed another user's pages
        assert r.status_code == 403 and "Bearer" in r.json()["message"]


def test_upstream_failure_is_502(world) -> None:
    service = world.service
    sock, free = service.listen("127.0.0.1")
    sock.close()  # nothing listens there
    assert _register(world, free).status_code == 200
    r = world.client.get(world.url, headers=world.alice)
    assert r.status_code == 502 and "refused" in r.json()["message"]


def test_register_port_takes_only_the_task_token_and_a_real_port(world) -> None:
    url = f"/api/v1/allocations/{world.task.allocation_id}/proxy_port"
    assert post(world.client, url, {"port": 8080}, world.alice).status_code == 403
    r = post(world.client, url, {"port": 80}, bearer(world.task.token))
    assert r.status_code == 400 and "port" in r.json()["message"]
    assert post(world.client, url, {"port": "x"}, bearer(world.task.token)).status_code == 400


def _ws_url(w: SimpleNamespace, path: str = "ws") -> str:
    return w.master.url.replace("http://", "ws://") + w.url + path


def test_websocket_echoes_text_and_binary_and_passes_close_codes(world) -> None:
    assert _register(world).status_code == 200

    async def run() -> tuple:
        async with connect(_ws_url(world), additional_headers=world.alice, subprotocols=["echo.v1"]) as ws:
            await ws.send("hello")
            text = await ws.recv()
            await ws.send(b"\x00\x01binary")
            data = await ws.recv()
            await ws.send("close:4321")
            with pytest.raises(ConnectionClosed):
                await ws.recv()
            return text, data, ws.subprotocol, ws.close_code, ws.close_reason

    assert asyncio.run(run()) == ("hello", b"\x00\x01binary", "echo.v1", 4321, "asked to")


def test_websocket_refusals_are_http_answers(world) -> None:
    assert _register(world).status_code == 200

    async def status(headers: dict) -> int:
        try:
            async with connect(_ws_url(world), additional_headers=headers):
                return 101
        except InvalidStatus as exc:
            return exc.response.status_code

    assert asyncio.run(status({})) == 401
    assert asyncio.run(status(world.bob)) == 404
    assert asyncio.run(status(bearer(world.task.token))) == 403
    token = world.alice["Authorization"].split()[1]
    assert asyncio.run(status({"Cookie": f"{SESSION_COOKIE}={token}", "Origin": "http://evil.example"})) == 403


def test_relays_are_capped_per_task(world) -> None:
    assert _register(world).status_code == 200

    async def run() -> int:
        sockets = [await connect(_ws_url(world), additional_headers=world.alice) for _ in range(3)]
        try:
            await connect(_ws_url(world), additional_headers=world.alice)
        except InvalidStatus as exc:
            assert b"max_relays_per_task" in exc.response.body
            return exc.response.status_code
        finally:
            for s in sockets:
                await s.close()
        return 101

    assert asyncio.run(run()) == 429


@pytest.mark.parametrize("proxy_overrides", [{"max_relays_per_user": 2}])
def test_relays_are_capped_per_user(world) -> None:
    assert _register(world).status_code == 200

    async def run() -> tuple[int, bytes]:
        sockets = [await connect(_ws_url(world), additional_headers=world.alice) for _ in range(2)]
        try:
            await connect(_ws_url(world), additional_headers=world.alice)
        except InvalidStatus as exc:
            return exc.response.status_code, exc.response.body
        finally:
            for s in sockets:
                await s.close()
        return 101, b""

    status, body = asyncio.run(run())
    assert status == 429 and b"max_relays_per_user" in body
    assert world.client.get(world.url, headers=world.admin).status_code == 200  # another user's count


@pytest.mark.parametrize("proxy_overrides", [{"max_header_bytes": 1024}])
def test_headers_over_the_bound_are_refused(world) -> None:
    assert _register(world).status_code == 200
    r = world.client.get(world.url, headers={**world.alice, "X-Big": "b" * 2000})
    assert r.status_code == 400 and "proxy.max_header_bytes" in r.json()["message"]


def test_the_relay_closes_when_the_task_ends(world) -> None:
    assert _register(world).status_code == 200

    async def run() -> tuple:
        async with connect(_ws_url(world), additional_headers=world.alice) as ws:
            await ws.send("up")
            assert await ws.recv() == "up"
            await asyncio.to_thread(world.agent.exit, world.task.allocation_id, 0)
            with pytest.raises(ConnectionClosed):
                while True:
                    await ws.recv()
            return ws.close_code, ws.close_reason

    code, reason = asyncio.run(run())
    assert code == 1001 and "ended" in reason
    r = world.client.get(world.url, headers=world.alice)
    assert r.status_code == 404 and "ended" in r.json()["message"]


@pytest.mark.parametrize("proxy_overrides", [{"max_request_body_bytes": 4096}])
def test_a_body_over_the_proxys_bound_is_413_naming_it(world) -> None:
    assert _register(world).status_code == 200
    r = world.client.post(world.url + "upload", content=(b"x" * 1024 for _ in range(8)), headers=world.alice)
    assert r.status_code == 413 and "proxy.max_request_body_bytes" in r.json()["message"]
    r = world.client.post(world.url + "upload", content=b"x" * 4096, headers=world.alice)
    assert r.status_code == 200 and r.json()["bytes"] == 4096  # the API's 4 MiB bound is not the proxy's


@pytest.mark.parametrize("proxy_overrides", [{"idle_timeout": 0.3}])
def test_an_idle_websocket_is_closed(world) -> None:
    assert _register(world).status_code == 200

    async def run() -> tuple:
        async with connect(_ws_url(world), additional_headers=world.alice) as ws:
            await ws.send("one")
            assert await ws.recv() == "one"
            with pytest.raises(ConnectionClosed):
                await ws.recv()  # nothing more is sent either way
            return ws.close_code, ws.close_reason

    code, reason = asyncio.run(run())
    assert code == 1001 and "proxy.idle_timeout" in reason


def test_no_env_proxy_is_used(world, monkeypatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    assert _register(world).status_code == 200
    assert world.client.get(world.url, headers=world.alice).status_code == 200


del json, websockets

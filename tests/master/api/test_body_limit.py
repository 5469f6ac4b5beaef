"""The request body bound: 413 naming the limit, at once by Content-Length, and for a body without
one (chunked) as soon as the bytes counted pass the limit, without reading the rest."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig
from pedl.config.security_config import LimitsConfig
from pedl.master.api.body_limit import BodyLimit, body_limit
from pedl.master.app import create_app
from tests.master.fakes import SINGLE_CONFIG, bearer, file_entry, login, post

MiB = 1024 * 1024
SMALL = LimitsConfig(
    max_request_body_bytes=4096, max_model_definition_bytes=8192, max_config_bytes=1024, max_anonymous_body_bytes=512
)


def assert_too_large(r, setting: str) -> None:
    assert r.status_code == 413, r.text[:300]
    body = r.json()
    assert setting in body["message"]
    assert body["pedlCode"] == "payload_too_large"
    assert body["error"]["reason"] == "Payload Too Large"


def test_login_body_over_the_anonymous_limit_is_413_by_content_length(client: TestClient) -> None:
    """Anyone may post to the login route: its body is held to a few KiB, not the 4 MiB of a logged-in
    user's, and refused by its Content-Length before a byte of it is read."""
    raw = json.dumps({"username": "admin", "password": "p" * 5000})  # default limit: 4 KiB
    r = client.post("/api/v1/auth/login", content=raw)
    assert_too_large(r, "limits.max_anonymous_body_bytes")
    r = client.post("/api/v1/auth/session", content=raw, headers={"Content-Type": "application/json"})
    assert_too_large(r, "limits.max_anonymous_body_bytes")
    assert client.post("/api/v1/auth/login", content=json.dumps({"username": "admin"})).status_code == 200


def test_chunked_body_over_the_limit_is_413(client: TestClient) -> None:
    def chunks(n: int, size: int) -> Iterator[bytes]:  # no Content-Length: sent with Transfer-Encoding: chunked
        yield b'{"username": "admin", "password": "'
        for _ in range(n):
            yield b"p" * size
        yield b'"}'

    assert_too_large(client.post("/api/v1/auth/login", content=chunks(5, 1024)), "limits.max_anonymous_body_bytes")
    assert client.post("/api/v1/auth/login", content=iter([b'{"username": "admin"}'])).status_code == 200
    headers = bearer(login(client, "admin"))
    r = client.patch("/api/v1/users/1", content=chunks(5, MiB), headers=headers)
    assert_too_large(r, "limits.max_request_body_bytes")


@pytest.fixture
def small_client(master_config: MasterConfig, clock: ManualClock) -> Iterator[TestClient]:
    with TestClient(create_app(master_config.model_copy(update={"limits": SMALL}), clock=clock)) as c:
        yield c


def test_limits_come_from_master_yaml(small_client: TestClient) -> None:
    headers = bearer(login(small_client, "admin"))
    assert_too_large(
        small_client.patch("/api/v1/users/1", json={"displayName": "p" * 5000}, headers=headers),
        "limits.max_request_body_bytes",
    )
    assert small_client.patch("/api/v1/users/1", json={"displayName": "Ada"}, headers=headers).status_code == 200
    assert_too_large(
        post(small_client, "/api/v1/auth/login", {"username": "admin", "password": "p" * 600}),
        "limits.max_anonymous_body_bytes",
    )
    assert post(small_client, "/api/v1/auth/login", {"username": "admin", "password": "p" * 300}).status_code == 401


def test_a_model_upload_has_its_own_limit(small_client: TestClient) -> None:
    headers = bearer(login(small_client, "admin"))

    def create(size: int):
        body = {"config": SINGLE_CONFIG, "activate": False, "modelDefinition": [file_entry("data.bin", b"x" * size)]}
        return post(small_client, "/api/v1/experiments", body, headers)

    r = create(6000)  # over max_request_body_bytes once in base64, within max_model_definition_bytes
    assert r.status_code == 200, r.text
    assert_too_large(create(20_000), "limits.max_model_definition_bytes")
    r = create(9000)  # within the body bound (base64 allowance), over the model's own
    assert r.status_code == 400 and "modelDefinition" in r.json()["message"]


def test_upload_allowance_is_base64_plus_config_plus_a_body() -> None:
    assert body_limit(SMALL, "POST", "/api/v1/experiments") == (
        8192 * 4 // 3 + 1024 + 4096,
        "limits.max_model_definition_bytes",
    )
    assert body_limit(SMALL, "POST", "/api/v1/experiments/1/kill") == (4096, "limits.max_request_body_bytes")
    assert body_limit(SMALL, "GET", "/api/v1/experiments")[1] == "limits.max_request_body_bytes"
    assert body_limit(SMALL, "POST", "/api/v1/auth/login/") == (512, "limits.max_anonymous_body_bytes")


class Recorder:
    """An ASGI conversation: the chunks a client would send, and what the server answers."""

    def __init__(self, chunks: list[bytes], headers: list[tuple[bytes, bytes]] | None = None) -> None:
        self.chunks = chunks
        self.received = 0  # receive() calls
        self.sent: list[dict] = []
        self.scope = {
            "type": "http",
            "method": "POST",
            "path": "/api/v1/experiments/1/kill",
            "query_string": b"",
            "headers": headers or [],
        }

    async def receive(self) -> dict:
        self.received += 1
        i = self.received - 1
        if i >= len(self.chunks):
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": self.chunks[i], "more_body": i < len(self.chunks) - 1}

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    def status(self) -> int:
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")


async def read_all_then_answer(scope: dict, receive, send) -> None:
    """An app that reads the whole body, and turns any error while reading into its own 400."""
    try:
        while (await receive()).get("more_body"):
            pass
    except Exception:  # as a framework that answers "error parsing the body" does
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b"bad body"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def run(middleware: BodyLimit, rec: Recorder) -> None:
    asyncio.run(middleware(rec.scope, rec.receive, rec.send))


def test_counting_stops_reading_at_the_limit() -> None:
    rec = Recorder([b"x" * 1024] * 100)  # 100 KiB without a Content-Length, limit 4 KiB
    run(BodyLimit(read_all_then_answer, SMALL), rec)
    assert rec.received == 5  # the fifth chunk passed 4096 bytes: nothing more was read
    assert rec.status() == 413
    assert [m["status"] for m in rec.sent if m["type"] == "http.response.start"] == [413]  # the app's 400 dropped


def test_declared_length_over_the_limit_is_refused_unread() -> None:
    rec = Recorder([b"x" * 1024] * 100, headers=[(b"content-length", str(100 * 1024).encode())])
    run(BodyLimit(read_all_then_answer, SMALL), rec)
    assert rec.received == 0
    assert rec.status() == 413


def test_a_body_within_the_limit_passes() -> None:
    rec = Recorder([b"x" * 1024] * 4, headers=[(b"content-length", b"4096")])
    run(BodyLimit(read_all_then_answer, SMALL), rec)
    assert rec.status() == 200


def test_a_bad_content_length_is_400() -> None:
    rec = Recorder([b"{}"], headers=[(b"content-length", b"lots")])
    run(BodyLimit(read_all_then_answer, SMALL), rec)
    assert rec.status() == 400


def test_every_route_knows_its_caller_before_it_reads_a_body(app) -> None:
    """A route that reads its body before its caller is known takes bodies from anyone, so it must be one
    of the anonymous routes, held to limits.max_anonymous_body_bytes; every other route resolves its
    caller first (FastAPI solves dependencies in order), so a stranger's body is never read."""
    from pedl.master.api import deps
    from pedl.master.api.body_limit import ANONYMOUS_BODY_ROUTES
    from pedl.master.api.errors import routes

    readers = {deps.json_body, deps.raw_body}
    callers = {deps.caller, deps.agent_fetch_caller}

    def order(dependant) -> list:
        out = []
        for sub in dependant.dependencies:
            out += [*order(sub), sub.call]
        return out

    reads_first = set()
    for route in routes(app):
        calls = order(route.dependant)
        first_read = next((i for i, c in enumerate(calls) if c in readers), None)
        first_caller = next((i for i, c in enumerate(calls) if c in callers), None)
        if first_read is not None and (first_caller is None or first_caller > first_read):
            reads_first |= {(m, route.path_format) for m in route.methods}
    assert reads_first == set(ANONYMOUS_BODY_ROUTES)

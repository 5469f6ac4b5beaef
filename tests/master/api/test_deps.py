"""The Body base of request models: every value one both databases store alike, refused with a 400
naming the field (and the place inside it), unknown keys still ignored for det compatibility."""

from __future__ import annotations

from typing import Any

import pytest

from pedl.errors import InvalidArgument
from pedl.master.api.deps import Body, parse


class Inner(Body):
    name: str
    tags: list[str] = []


class Outer(Body):
    inner: Inner | None = None
    items: list[Inner] = []
    ratio: float = 1.0
    count: int = 0
    meta: dict[str, Any] = {}


def fields_of(data: dict) -> list[dict]:
    with pytest.raises(InvalidArgument) as info:
        parse(Outer, data)
    assert all(f["field"] in info.value.message for f in info.value.fields)
    return info.value.fields


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"inner": {"name": "a\x00b"}}, "inner.name", "contains a NUL character"),
        ({"inner": {"name": "\ud800"}}, "inner.name", "contains a lone surrogate (not valid Unicode text)"),
        ({"inner": {"name": "ok", "tags": ["x", "y\x00"]}}, "inner.tags[1]", "contains a NUL character"),
        ({"items": [{"name": "ok"}, {"name": "\x00"}]}, "items[1].name", "contains a NUL character"),
        ({"meta": {"a": {"b": "\x00"}}}, "meta.a.b", "contains a NUL character"),
        ({"meta": {"a": [1, float("nan")]}}, "meta.a[1]", "must be a finite number"),
        ({"meta": {"big": 2**64}}, "meta.big", "is out of range (a 64-bit integer)"),
        ({"count": 2**63}, "count", "is out of range (a 64-bit integer)"),
    ],
)
def test_unstorable_values_name_their_place(data: dict, field: str, message: str) -> None:
    assert fields_of(data) == [{"field": field, "message": message}]


@pytest.mark.parametrize("ratio", [float("inf"), float("-inf"), float("nan")])
def test_float_fields_are_finite(ratio: float) -> None:
    assert [f["field"] for f in fields_of({"ratio": ratio})] == ["ratio"]


def test_good_values_and_unknown_keys_pass() -> None:
    body = parse(
        Outer,
        {
            "inner": {"name": "\U0001f600 ok", "tags": ["a"]},
            "ratio": 0.5,
            "count": -(2**63),
            "meta": {"x": [1.5, "y"]},
            "newerClientField": {"a": "\x00"},
        },
    )
    assert body.inner is not None and body.inner.name == "\U0001f600 ok"
    assert body.count == -(2**63)


def test_a_body_is_parsed_off_the_event_loop(client, admin, monkeypatch) -> None:
    """A body of megabytes takes a good part of a second to parse; on the event loop, every other
    request (an agent's heartbeat, another user's page) would wait for it."""
    import asyncio

    from pedl.master.api import deps

    on_loop: list[bool] = []
    real = deps.parse_json

    def recording(*args, **kwargs):
        try:
            asyncio.get_running_loop()
            on_loop.append(True)
        except RuntimeError:  # no loop runs in this thread: a worker thread
            on_loop.append(False)
        return real(*args, **kwargs)

    monkeypatch.setattr(deps, "parse_json", recording)
    assert client.post("/api/v1/auth/login", json={"username": "admin", "password": ""}).status_code == 200
    assert client.patch("/api/v1/users/1", json={"displayName": "Ada"}, headers=admin).status_code == 200
    assert (
        client.post("/api/v1/users/1/password", json={"password": "", "isHashed": True}, headers=admin).status_code
        == 200
    )
    assert on_loop == [False, False, False]


def test_large_bodies_are_parsed_one_at_a_time(client, admin, monkeypatch) -> None:
    """A parser holds the GIL for the whole of its C call: two at once would stall the event loop twice
    as long. Large bodies wait their turn (on the loop, holding nothing); small ones do not."""
    import threading
    import time

    from pedl.master.api import deps

    running, most = 0, 0
    lock = threading.Lock()
    real = deps.parse_json

    def counting(*args, **kwargs):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            time.sleep(0.05)  # long enough for the others to arrive
            return real(*args, **kwargs)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(deps, "parse_json", counting)
    large = '{"displayName": "Ada", "pad": "' + "x" * deps.LARGE_BODY_BYTES + '"}'
    answers: list[int] = []
    threads = [
        threading.Thread(
            target=lambda: answers.append(client.patch("/api/v1/users/1", content=large, headers=admin).status_code)
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [400] * 4  # the pad is longer than limits.max_string_length
    assert most == 1

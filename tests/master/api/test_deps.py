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


@pytest.mark.parametrize(("data", "field", "message"), [
    ({"inner": {"name": "a\x00b"}}, "inner.name", "contains a NUL character"),
    ({"inner": {"name": "\ud800"}}, "inner.name", "contains a lone surrogate (not valid Unicode text)"),
    ({"inner": {"name": "ok", "tags": ["x", "y\x00"]}}, "inner.tags[1]", "contains a NUL character"),
    ({"items": [{"name": "ok"}, {"name": "\x00"}]}, "items[1].name", "contains a NUL character"),
    ({"meta": {"a": {"b": "\x00"}}}, "meta.a.b", "contains a NUL character"),
    ({"meta": {"a": [1, float("nan")]}}, "meta.a[1]", "must be a finite number"),
    ({"meta": {"big": 2**64}}, "meta.big", "is out of range (a 64-bit integer)"),
    ({"count": 2**63}, "count", "is out of range (a 64-bit integer)"),
])
def test_unstorable_values_name_their_place(data: dict, field: str, message: str) -> None:
    assert fields_of(data) == [{"field": field, "message": message}]


@pytest.mark.parametrize("ratio", [float("inf"), float("-inf"), float("nan")])
def test_float_fields_are_finite(ratio: float) -> None:
    assert [f["field"] for f in fields_of({"ratio": ratio})] == ["ratio"]


def test_good_values_and_unknown_keys_pass() -> None:
    body = parse(Outer, {"inner": {"name": "\U0001f600 ok", "tags": ["a"]}, "ratio": 0.5, "count": -(2**63),
                         "meta": {"x": [1.5, "y"]}, "newerClientField": {"a": "\x00"}})
    assert body.inner is not None and body.inner.name == "\U0001f600 ok"
    assert body.count == -(2**63)

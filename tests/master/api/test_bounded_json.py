"""Request JSON within the limits: depth measured without recursion, values both databases store
alike, and each refusal naming where the value is."""

from __future__ import annotations

import json

import pytest

from pedl.config.security_config import LimitsConfig
from pedl.errors import InvalidArgument
from pedl.master.api.bounded_json import nesting_depth, parse_json

LIMITS = LimitsConfig()


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[", "]]"]', 1),
        (r'["\"[[[", {}]', 2),
        ("[" * 100_000 + "]" * 100_000, 100_000),
    ],
)
def test_nesting_depth_ignores_brackets_in_strings(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


def refusal(raw: str | bytes, **kw) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as info:
        parse_json(raw.encode() if isinstance(raw, str) else raw, LIMITS, **kw)
    return info.value


def test_depth_is_checked_before_parsing() -> None:
    err = refusal("[" * 100_000 + "]" * 100_000)
    assert err.fields == [
        {"field": "body", "message": "JSON nested more than 32 levels deep (limits.max_nesting_depth)"}
    ]
    assert parse_json(("[" * 32 + "]" * 32).encode(), LIMITS) == json.loads("[" * 32 + "]" * 32)
    assert refusal("[" * 33 + "]" * 33).fields[0]["field"] == "body"


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ('{"a": {"b": "x\\u0000y"}}', "a.b", "contains a NUL character"),
        ('{"a": ["ok", "\\ud800"]}', "a[1]", "contains a lone surrogate (not valid Unicode text)"),
        ('{"a": "\\udfff"}', "a", "contains a lone surrogate (not valid Unicode text)"),
        ('{"a": NaN}', "a", "must be a finite number"),
        ('{"a": -Infinity}', "a", "must be a finite number"),
        ('{"a": [1e400]}', "a[0]", "must be a finite number"),
        ('{"a": 9223372036854775808}', "a", "is out of range (a 64-bit integer)"),
        ('{"a": -9223372036854775809}', "a", "is out of range (a 64-bit integer)"),
        ('{"a": ' + "1" * 5000 + "}", "a", "is out of range (a 64-bit integer)"),
        ('{"k\\u0000": 1}', "body", "a key contains a NUL character"),
        ('"\\u0000"', "body", "contains a NUL character"),
    ],
)
def test_values_both_databases_cannot_store_alike_are_refused(raw: str, field: str, message: str) -> None:
    assert refusal(raw).fields == [{"field": field, "message": message}]


def test_what_both_databases_store_passes() -> None:
    raw = '{"emoji": "\\ud83d\\ude00", "escaped": "\\\\u0000", "n": -9223372036854775808, "x": 1.5e300}'
    assert parse_json(raw.encode(), LIMITS) == {
        "emoji": "\U0001f600",
        "escaped": "\\u0000",
        "n": -(2**63),
        "x": 1.5e300,
    }


def test_string_length_is_checked_unless_told_not_to() -> None:
    raw = json.dumps({"content": "b" * 70_000})
    assert refusal(raw).fields == [
        {"field": "content", "message": "is 70000 characters long, more than the limit of 65536"}
    ]
    assert parse_json(raw.encode(), LIMITS, check_string_length=False) == {"content": "b" * 70_000}


@pytest.mark.parametrize("raw", [b"\xff{}", b"{not json", b'{"a": 1,}', b"[1] [2]"])
def test_malformed_json_is_400(raw: bytes) -> None:
    assert refusal(raw).fields == [{"field": "body", "message": "malformed JSON"}]

"""Values both databases store alike: each problem named by its path, keys included."""

from __future__ import annotations

from pedl.config.storable_values import value_problems


def test_value_problems_name_each_path() -> None:
    data = {
        "a": ["ok", "x\x00"],
        "b": {"c": float("inf"), "d": 2**63, "e": -(2**63)},
        "s": "\ud800",
        "f\x00": 1,
        "t": "y" * 11,
        "bytes": b"a\x00",
        "fine": [1.5, True, None, "text"],
    }
    assert sorted(value_problems(data, max_string_length=10)) == sorted(
        [
            ("a[1]", "contains a NUL character"),
            ("b.c", "must be a finite number"),
            ("b.d", "is out of range (a 64-bit integer)"),
            ("s", "contains a lone surrogate (not valid Unicode text)"),
            ("<root>", "a key contains a NUL character"),
            ("t", "is 11 characters long, more than the limit of 10"),
            ("bytes", "is binary data (!!binary), not text"),
        ]
    )
    assert value_problems(data["fine"]) == []
    assert len(value_problems(["\x00"] * 100)) == 20


def test_paths_name_odd_keys_in_printable_bounded_text() -> None:
    data = {"k\x00": {"x": "\x00"}, "s\udfff": {"x": "\x00"}, "long" * 100: {"x": "\x00"}}
    paths = {path for path, _ in value_problems(data)} - {"<root>"}
    assert paths == {"'k\\x00'.x", "'s\\udfff'.x", "long" * 15 + "..." + ".x"}
    assert all(path.encode("utf-8") for path in paths)

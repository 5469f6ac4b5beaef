"""The shared YAML -> pydantic loader: field paths, problem lists, malformed YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import field_validator

from pedl.config.loading import (
    ConfigError,
    FieldProblems,
    StrictModel,
    field_path,
    load_yaml_file,
    parse_yaml_text,
    validate_data,
)
from pedl.errors import HTTP_STATUS, InvalidArgument


class Inner(StrictModel):
    n: int


class Outer(StrictModel):
    name: str
    items: list[Inner] = []
    tags: dict[str, int] = {}

    @field_validator("tags", mode="after")
    @classmethod
    def _tags(cls, v: dict[str, int]) -> dict[str, int]:
        bad = [(f"tags.{k}", "must be even") for k, n in v.items() if n % 2]
        if bad:
            raise FieldProblems(bad)
        return v


@pytest.mark.parametrize(
    ("loc", "path"),
    [((), "<root>"), (("a",), "a"), (("a", 0, "b"), "a[0].b"), (("pools", 2), "pools[2]"), ((0,), "[0]")],
)
def test_field_path(loc: tuple, path: str) -> None:
    assert field_path(loc) == path


def test_config_error_is_an_invalid_argument() -> None:
    with pytest.raises(ConfigError) as info:
        validate_data(Outer, {}, "thing")
    assert isinstance(info.value, InvalidArgument)
    assert HTTP_STATUS[info.value.code] == 400


def test_each_problem_has_field_and_message() -> None:
    with pytest.raises(ConfigError) as info:
        validate_data(Outer, {"items": [{"n": 1}, {"n": "x", "m": 2}], "extra": True}, "thing")
    fields = {p["field"]: p["message"] for p in info.value.fields}
    assert fields["name"] == "Field required"
    assert "integer" in fields["items[1].n"]
    assert fields["items[1].m"] == "unknown key"
    assert fields["extra"] == "unknown key"
    assert info.value.message.startswith("invalid thing: ")


def test_field_problems_become_separate_entries() -> None:
    with pytest.raises(ConfigError) as info:
        validate_data(Outer, {"name": "x", "tags": {"a": 1, "b": 2, "c": 3}}, "thing")
    assert info.value.fields == [
        {"field": "tags.a", "message": "must be even"},
        {"field": "tags.c", "message": "must be even"},
    ]
    assert "tags.a: must be even; tags.c: must be even" in info.value.message


def test_none_document_is_an_empty_mapping() -> None:
    with pytest.raises(ConfigError) as info:
        validate_data(Outer, None, "thing")
    assert [p["field"] for p in info.value.fields] == ["name"]


def test_parse_yaml_text_reports_line_and_column() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_text("a: 1\nb: [1, 2\nc: 3\n", "doc.yaml")
    assert "malformed YAML in doc.yaml at line" in info.value.message
    assert info.value.fields[0]["field"] == "<root>"


def test_load_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("name: hello\nitems:\n  - n: 3\n")
    assert load_yaml_file(Outer, path) == Outer(name="hello", items=[Inner(n=3)])
    path.write_text("name: hello\nitems:\n  - n: three\n")
    with pytest.raises(ConfigError) as info:
        load_yaml_file(Outer, path)
    assert str(path) in info.value.message and "items[0].n" in info.value.message


# -- limits while loading: depth, expansion of anchors and aliases, text size -------------------------


def limit_refusal(text: str, **limits: int) -> ConfigError:
    from pedl.config.security_config import LimitsConfig

    with pytest.raises(ConfigError) as info:
        parse_yaml_text(text, "doc.yaml", limits=LimitsConfig(**limits))
    assert info.value.fields[0]["field"] == "<root>"
    return info.value


def billion_laughs(levels: int) -> str:
    lines = ["a0: &a0 [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "[" * 5000 + "]" * 5000,
        "x: " + "{a: " * 5000 + "1" + "}" * 5000,
        "".join(" " * i + "a:\n" for i in range(200)) + " " * 200 + "b: 1\n",
    ],
)
def test_deep_nesting_is_refused_not_a_recursion_error(text: str) -> None:
    err = limit_refusal(text)
    assert "nested more than 32 levels deep" in err.message and "limits.max_nesting_depth" in err.message
    assert "at line" in err.message


def test_nesting_up_to_the_limit_loads() -> None:
    assert parse_yaml_text("x: " + "[" * 31 + "]" * 31, "doc.yaml") == {"x": eval("[" * 31 + "]" * 31)}
    limit_refusal("x: " + "[" * 32 + "]" * 32)


def test_billion_laughs_is_refused_before_expansion() -> None:
    text = billion_laughs(9)
    assert len(text) < 600
    err = limit_refusal(text)
    assert "once YAML aliases are expanded" in err.message and "limits.max_config_bytes" in err.message


def test_aliases_within_the_limit_load() -> None:
    data = parse_yaml_text(billion_laughs(3), "doc.yaml")  # 9**3 strings: small
    assert len(data["a2"]) == 9 and data["a2"][0] is data["a1"]


def test_aliases_nesting_past_the_depth_are_refused() -> None:
    inner = "a: &a " + "[" * 20 + "1" + "]" * 20
    outer = "b: " + "[" * 20 + "*a" + "]" * 20
    err = limit_refusal(inner + "\n" + outer + "\n")
    assert "nested 41 levels deep once YAML aliases are expanded" in err.message  # the mapping, 20, 20


def test_recursive_alias_is_refused() -> None:
    assert "recursive alias" in limit_refusal("a: &a [1, *a]\n").message
    assert "recursive alias" in limit_refusal("a: &a {b: {c: *a}}\n").message


def test_text_over_the_size_limit_is_refused_unparsed() -> None:
    err = limit_refusal("a: " + "x" * 2000 + "\n", max_config_bytes=1024)
    assert "2004 characters is more than the limit of 1024 bytes (limits.max_config_bytes)" in err.message
    err = limit_refusal("a: " + "\u00e9" * 600 + "\n", max_config_bytes=1024)  # 604 characters, 1204 bytes
    assert "1204 bytes is more than the limit of 1024 bytes" in err.message


def test_merge_keys_and_shared_anchors_still_load() -> None:
    data = parse_yaml_text("base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n", "doc.yaml")
    assert data["derived"] == {"x": 1, "y": 3}

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
    assert info.value.fields == [{"field": "tags.a", "message": "must be even"},
                                 {"field": "tags.c", "message": "must be even"}]
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

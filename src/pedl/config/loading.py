"""Loading YAML into pydantic models with errors that name the file and every field path at fault."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from pedl.errors import InvalidArgument

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    """Base of every config model: unknown keys are errors, not silent defaults."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ConfigError(InvalidArgument):
    """A config that failed to parse or validate; `fields` lists each problem."""


class FieldProblems(ValueError):
    """Raised by a validator that finds several problems, each at its own field path (a full
    path from the top of the document), so each is reported as a separate entry."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


def field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            # pydantic puts union/tag names in the location; keep only real keys
            out += ("." if out else "") + str(part)
    return out or "<root>"


# pydantic puts the tag of a discriminated union into error locations ("provider.aws.image_id");
# users wrote "provider.image_id", so the tag is dropped after these keys.
_UNION_TAGS = {"provider": {"aws", "local"}, "checkpoint_storage": {"shared_fs", "s3"}}


def _drop_union_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    out: list[Any] = []
    for part in loc:
        if out and isinstance(out[-1], str) and part in _UNION_TAGS.get(out[-1], ()):
            continue
        out.append(part)
    return tuple(out)


def describe_validation_error(exc: ValidationError, source: str) -> ConfigError:
    problems = []
    for err in exc.errors(include_url=False):
        loc = _drop_union_tags(tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))))
        path = field_path(loc)
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldProblems):
            problems.extend({"field": f, "message": m} for f, m in cause.problems)
            continue
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        problems.append({"field": path, "message": msg})
    lines = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return ConfigError(f"invalid {source}: {lines}", fields=problems)


def parse_yaml_text(text: str, source: str) -> Any:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"malformed YAML in {source}{where}: {problem}",
                          fields=[{"field": "<root>", "message": f"malformed YAML{where}"}]) from None
    return data


def validate_data(model: type[M], data: Any, source: str) -> M:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid {source}: the top level must be a mapping, got {type(data).__name__}",
                          fields=[{"field": "<root>", "message": "must be a mapping"}])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise describe_validation_error(exc, source) from None


def load_yaml_file(model: type[M], path: str | Path) -> M:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    return validate_data(model, parse_yaml_text(text, str(path)), str(path))

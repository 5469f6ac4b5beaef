"""Hyperparameters of an experiment config, with Determined's types (const, int, double, log,
categorical) and nested groups: their models, parsing a config's tree of them, and walking it."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError, model_validator

from pedl.config.loading import FieldProblems, StrictModel
from pedl.config.storable_values import INT64_MAX, FiniteFloat, Int64


class ConstHP(StrictModel):
    type: Literal["const"]
    val: Any


class IntHP(StrictModel):
    type: Literal["int"]
    minval: Int64
    maxval: Int64
    count: int | None = Field(default=None, ge=1, le=INT64_MAX, description="grid points")

    @model_validator(mode="after")
    def _range(self) -> IntHP:
        if self.minval > self.maxval:
            raise ValueError("minval must be <= maxval")
        return self


class DoubleHP(StrictModel):
    type: Literal["double"]
    minval: FiniteFloat
    maxval: FiniteFloat
    count: int | None = Field(default=None, ge=1, le=INT64_MAX)

    @model_validator(mode="after")
    def _range(self) -> DoubleHP:
        if self.minval > self.maxval:
            raise ValueError("minval must be <= maxval")
        if not math.isfinite(self.maxval - self.minval):  # samples and grid steps would be infinite
            raise ValueError("maxval - minval must be a finite number")
        return self


class LogHP(StrictModel):
    type: Literal["log"]
    minval: FiniteFloat
    maxval: FiniteFloat
    base: FiniteFloat = Field(default=10.0, gt=0)
    count: int | None = Field(default=None, ge=1, le=INT64_MAX)

    @model_validator(mode="after")
    def _range(self) -> LogHP:
        if self.minval > self.maxval:
            raise ValueError("minval must be <= maxval")
        if self.base == 1:
            raise ValueError("base must not be 1")
        # values are base**exponent: both ends must be finite floats (Python raises OverflowError)
        for end in (self.minval, self.maxval):
            try:
                finite = math.isfinite(self.base**end)
            except (OverflowError, ZeroDivisionError):
                finite = False
            if not finite:
                raise ValueError(f"base**{end:g} is not a finite number")
        return self


class CategoricalHP(StrictModel):
    type: Literal["categorical"]
    vals: list[Any] = Field(..., min_length=1)


Hyperparameter = Annotated[ConstHP | IntHP | DoubleHP | LogHP | CategoricalHP, Field(discriminator="type")]
_HP_ADAPTER: TypeAdapter[Any] = TypeAdapter(Hyperparameter)


def parse_hyperparameters(tree: dict[str, Any]) -> dict[str, Any]:
    """An experiment's `hyperparameters` as their models (nested groups as dicts, a bare value as
    ConstHP); every problem is raised at once, each with its path under `hyperparameters`."""
    problems: list[tuple[str, str]] = []
    out = {key: _parse_hparam(val, f"hyperparameters.{key}", problems) for key, val in tree.items()}
    if problems:
        raise FieldProblems(problems)
    return out


def _parse_hparam(value: Any, path: str, problems: list[tuple[str, str]]) -> Any:
    """Parse one hyperparameter (or nested group); problems are appended as (path, message)."""
    if isinstance(value, dict) and "type" in value:
        try:
            return _HP_ADAPTER.validate_python(value)
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                # drop the union tag pydantic puts first in the location
                loc = [str(p) for p in err["loc"][1:]] if len(err["loc"]) > 1 else []
                where = ".".join([path, *loc])
                msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
                problems.append((where, msg))
            return None
    if isinstance(value, dict):  # a nested group
        return {k: _parse_hparam(v, f"{path}.{k}", problems) for k, v in value.items()}
    return ConstHP(type="const", val=value)


def iter_hparams(tree: dict[str, Any], prefix: str = ""):
    """Yield (dotted path, hyperparameter) for every leaf of a (possibly nested) hparam tree."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from iter_hparams(value, path + ".")
        else:
            yield path, value

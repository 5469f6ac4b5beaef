"""JSON columns read as text (CAST(col AS TEXT)) and parsed here: orjson is several times faster
than the JSON type's stdlib decoding, which matters when a pass reads thousands of rows."""

from __future__ import annotations

import json
from typing import Any

import orjson
from sqlalchemy import Text, cast
from sqlalchemy.sql.elements import ColumnElement


def as_text(column: Any) -> ColumnElement[str]:
    """The column's JSON as stored, for `loads` (PostgreSQL's driver would otherwise parse it)."""
    return cast(column, Text)


def loads(text: str | bytes | None) -> Any:
    """orjson, or the stdlib where orjson refuses (NaN, which the JSON column's encoder writes; an
    integer beyond 64 bits)."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)

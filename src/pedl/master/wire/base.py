"""What every wire message shares: the model base, RFC 3339 times and Determined's v1Pagination."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload

from pydantic import BaseModel, ConfigDict


class WireModel(BaseModel):
    """A message: a key pedl does not declare is an error (a 500 in a test), not silently dropped."""

    model_config = ConfigDict(extra="forbid")


@overload
def ts(t: float) -> str: ...
@overload
def ts(t: None) -> None: ...
@overload
def ts(t: float | None) -> str | None: ...
def ts(t: float | None) -> str | None:
    """A POSIX time as Determined writes it: RFC 3339 in UTC with a Z."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, tz=UTC).isoformat().replace("+00:00", "Z")


class Pagination(WireModel):
    """v1Pagination: det's paginator asks again with offset=endIndex while endIndex < total."""

    offset: int
    limit: int
    startIndex: int
    endIndex: int
    total: int

    @classmethod
    def of(cls, offset: int, limit: int, total: int, count: int) -> Pagination:
        """The page of `count` items at `offset` (limit 0: no limit) of `total`."""
        return cls(
            offset=offset, limit=limit, startIndex=min(offset, total), endIndex=min(offset + count, total), total=total
        )

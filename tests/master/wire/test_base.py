"""The wire base: times as Determined writes them, v1Pagination's indexes, and keys refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.base import Pagination, ts


def test_times_are_rfc3339_in_utc_with_a_z() -> None:
    assert ts(0) == "1970-01-01T00:00:00Z"
    assert ts(1.5) == "1970-01-01T00:00:01.500000Z"
    assert ts(None) is None


@pytest.mark.parametrize(
    ("offset", "limit", "total", "count", "start", "end"),
    [
        (0, 0, 5, 5, 0, 5),  # limit 0: everything
        (2, 2, 5, 2, 2, 4),
        (4, 2, 5, 1, 4, 5),
        (9, 2, 5, 0, 5, 5),  # past the end: both indexes stop at the total
    ],
)
def test_a_page_says_where_it_starts_and_ends(
    offset: int, limit: int, total: int, count: int, start: int, end: int
) -> None:
    page = Pagination.of(offset, limit, total, count)
    assert page.model_dump() == {"offset": offset, "limit": limit, "startIndex": start, "endIndex": end, "total": total}


def test_a_key_no_message_declares_is_refused() -> None:
    with pytest.raises(ValidationError, match="totl"):
        Pagination.model_validate({"offset": 0, "limit": 0, "startIndex": 0, "endIndex": 0, "total": 0, "totl": 1})

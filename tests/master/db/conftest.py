"""A session on a real database of each kind, for the database helpers' unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session

from pedl.master.db.engine import Database


@pytest.fixture
def s(database: Database) -> Iterator[Session]:
    with database.session() as session:
        yield session

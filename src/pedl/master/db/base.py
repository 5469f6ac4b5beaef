"""The declarative base every table derives from, the column types the models share, and typed access
to a model's Table, to the row a foreign key names and to the rows a statement changed."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar, cast

from sqlalchemy import JSON, BigInteger, Integer, String, Table
from sqlalchemy.engine import CursorResult, Dialect, Result
from sqlalchemy.orm import DeclarativeBase, Session
from sqlalchemy.types import TypeDecorator

# sqlite autoincrements INTEGER only; the tables whose ids users see also have SQLite's AUTOINCREMENT
# (migration 0019), so that a deleted row's id is never handed out again
Id = BigInteger().with_variant(Integer(), "sqlite")


class StateColumn(TypeDecorator[StrEnum]):
    """A lifecycle state stored as its enum's string value (the column is a plain VARCHAR(40), so no
    migration) and loaded as the enum member; binds take a member or its string."""

    impl = String(40)
    cache_ok = True

    def __init__(self, enum: type[StrEnum]) -> None:
        super().__init__()
        self.enum = enum

    def process_bind_param(self, value: StrEnum | str | None, dialect: Dialect) -> str | None:
        return None if value is None else str(value)  # a StrEnum member's str is its value

    def process_result_value(self, value: str | None, dialect: Dialect) -> StrEnum | None:
        return None if value is None else self.enum(value)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


def table_of(model: type[Base]) -> Table:
    """The model's Table: DeclarativeBase types `__table__` as a FromClause, which could be a mapped join
    or select; each of pedl's models maps one table."""
    table = model.__table__
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} maps no single Table")
    return table


M = TypeVar("M", bound=Base)


def existing(s: Session, model: type[M], ident: object) -> M:
    """The row that a foreign key names, which the schema keeps (a LookupError, were it gone)."""
    row = s.get(model, ident)
    if row is None:
        raise LookupError(f"{model.__name__} {ident!r} does not exist")
    return row


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched: Session.execute returns a CursorResult for one, typed as a
    Result (as SQLAlchemy's documentation says, a cast it is)."""
    return cast(CursorResult[Any], result).rowcount

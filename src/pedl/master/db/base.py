"""The declarative base every table derives from, and the column types the models share."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, Integer, String
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase
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

"""A batch of rows as a table inside one statement, passed as one JSON parameter (`rows`): json_each
on SQLite, json_to_recordset on PostgreSQL. An UPDATE ... FROM or INSERT ... SELECT over a batch is
then one statement the database runs as a join, where an executemany costs SQLAlchemy and the driver
a round of parameter processing per row (and PostgreSQL a statement per row).

The statements are SQLAlchemy constructs on the real tables, built once per dialect (building one
costs about what SQLite takes to run it over a batch) and run through the session, so what a
session wrote is counted as usual (db/change_counters.py)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from sqlalchemy import JSON, Float, Integer, String, Table, any_, bindparam, column, func, insert, literal, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import QueryableAttribute, Session
from sqlalchemy.sql import ColumnElement, Executable, FromClause
from sqlalchemy.types import TypeEngine

# the columns of a batch: (name, type), the type String, Float, Integer or JSON
Columns = tuple[tuple[str, type[TypeEngine[Any]]], ...]
TEXT, FLOAT, INTEGER, JSON_VALUE = String, Float, Integer, JSON


def dialect_of(s: Session) -> str:
    return s.get_bind().dialect.name


def rows_table(
    dialect: str, columns: Columns, name: str = "v", conditions: Sequence[tuple[ColumnElement[Any], Any]] = ()
) -> FromClause:
    """The rows of the `rows` parameter (see `encode`) as a FROM clause with `columns`; a JSON
    column's value is stored as JSON (its text on SQLite). `conditions`: those of `by_key`, whose
    values it carries on PostgreSQL."""
    # materialized: joined as a subquery or a function, the database may read it once per row of the
    # other table (PostgreSQL's plan for an UPDATE of 166 allocations parsed the JSON 166 times)
    if dialect == "postgresql":
        records = (
            func.json_to_recordset(bindparam("rows", type_=String).cast(JSON))
            .table_valued(*(column(n, t()) for n, t in columns))
            .render_derived("r", with_types=True)
        )
        wanted = (literal(value, column_.type).label(f"when_{i}") for i, (column_, value) in enumerate(conditions))
        return select(*records.c, *wanted).cte(name).prefix_with("MATERIALIZED")
    each = func.json_each(bindparam("rows", type_=String)).table_valued("value")
    return (
        select(*(func.json_extract(each.c.value, f"$[{i}]").label(n) for i, (n, _) in enumerate(columns)))
        .select_from(each)
        .cte(name)
        .prefix_with("MATERIALIZED")
    )


def in_list(
    column_: ColumnElement[Any] | QueryableAttribute[Any], dialect: str, name: str = "ids"
) -> ColumnElement[bool]:
    """`column_` is one of the list passed as parameter `name` (its value made by `id_list`): one
    parameter whatever the list's length, an array on PostgreSQL (= ANY), JSON on SQLite (IN
    json_each). An IN of hundreds of parameters costs SQLAlchemy a rewrite of the statement at every
    execution, and psycopg a parse of the new text (it caches only short ones)."""
    if dialect == "postgresql":
        return column_ == any_(bindparam(name, type_=ARRAY(column_.type)))
    return column_.in_(select(func.json_each(bindparam(name, type_=String)).table_valued("value").c.value))


def id_list(dialect: str, values: Iterable[Any]) -> Any:
    """The value of an `in_list` parameter."""
    return list(values) if dialect == "postgresql" else orjson.dumps(list(values)).decode()


def by_key(
    key: ColumnElement[Any], dialect: str, *conditions: tuple[ColumnElement[Any], Any], rows: FromClause | None = None
) -> list[ColumnElement[bool]]:
    """The WHERE of an UPDATE ... FROM the rows (`rows`, made by `rows_table` with the same
    `conditions`) joined on `key` (a primary key), with `conditions` ((column, value): column =
    value) on the rows updated. On PostgreSQL the table is read by its key: `key` = ANY(the `ids`
    parameter, see `params`), and each condition compares its column with the value as a column of
    the rows, so that its index is not used; else the planner, which takes json_to_recordset for 100
    rows and may think few rows match a condition (ix_allocations_state after a burst of new ones),
    reads every row matching it and tests each against the array. (A condition on a wrapped column,
    coalesce(state, v) = v, was taken to match one row in 200: the plan then joined the rows to
    update to the batch's rows by a nested loop, 27,000 comparisons for 166 rows, 12 of 14 ms.)"""
    if dialect != "postgresql":
        return [column_ == value for column_, value in conditions]
    if not conditions:
        return [in_list(key, dialect)]
    if rows is None:
        raise ValueError("by_key with conditions on PostgreSQL needs the rows (rows_table with those conditions)")
    return [in_list(key, dialect), *(column_ == rows.c[f"when_{i}"] for i, (column_, _) in enumerate(conditions))]


def params(dialect: str, columns: Columns, rows: Sequence[Sequence[Any]], **more: Any) -> dict[str, Any]:
    """The parameters of a statement over the rows: `rows`, `ids` (the first column, for `by_key`)
    on PostgreSQL, and `more`."""
    out = {"rows": encode(dialect, columns, rows), **more}
    if dialect == "postgresql":
        out["ids"] = [row[0] for row in rows]
    return out


def encode(dialect: str, columns: Columns, rows: Sequence[Sequence[Any]]) -> str:
    """The `rows` parameter: tuples in `columns` order, as JSON (objects for json_to_recordset)."""
    if dialect == "postgresql":
        names = [n for n, _ in columns]
        return orjson.dumps([dict(zip(names, row, strict=True)) for row in rows]).decode()
    return orjson.dumps(rows).decode()


def insert_rows(s: Session, table: Table, columns: Columns, rows: Sequence[Sequence[Any]]) -> None:
    """INSERT INTO table (columns) SELECT ... FROM the rows: one statement for the whole batch."""
    if rows:
        dialect = dialect_of(s)
        s.execute(_insert(table, columns, dialect), {"rows": encode(dialect, columns, rows)})


@functools.cache
def _insert(table: Table, columns: Columns, dialect: str) -> Executable:
    src = rows_table(dialect, columns)
    return insert(table).from_select([n for n, _ in columns], select(*(src.c[n] for n, _ in columns)))

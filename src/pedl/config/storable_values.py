"""Values both databases store alike, and that a JSON document holds: what request bodies and
experiment configs are checked against before any model or database sees them."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import Field

INT64_MAX = 2**63 - 1
# config fields whose values a 64-bit column and a JSON document hold (JSON has no inf or nan)
Int64 = Annotated[int, Field(ge=-INT64_MAX - 1, le=INT64_MAX)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


_SURROGATE = re.compile("[\ud800-\udfff]")


def _join(path: str, key: Any) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    text = str(key)
    if len(text) > 64:  # a path names every key above a value: bounded, or 20 paths could be megabytes
        text = text[:60] + "..."
    if "\x00" in text or _SURROGATE.search(text):
        text = repr(text)  # escaped, so the path itself is printable text
    return f"{path}.{text}" if path else text


def _text_problem(text: str, max_length: int | None) -> str | None:
    if "\x00" in text:
        return "contains a NUL character"
    if max_length is not None and len(text) > max_length:
        return f"is {len(text)} characters long, more than the limit of {max_length}"
    if not text.isascii() and _SURROGATE.search(text):  # only escapes (JSON or YAML "\ud800") make one
        return "contains a lone surrogate (not valid Unicode text)"
    return None


def value_problems(
    data: Any, *, max_string_length: int | None = None, path: str = "", limit: int = 20
) -> list[tuple[str, str]]:
    """(field path, message) for values no database column or JSON document takes the same way on
    SQLite and PostgreSQL: strings with a NUL character or a lone surrogate (or longer than
    `max_string_length`), non-finite floats, integers beyond 64 bits, binary data. Keys are checked
    like strings. Nested pydantic models are skipped: they check their own fields. At most `limit`.

    A value's path is spelled out only for a problem: each value on the stack keeps its container's
    place and its key, so the walk over a clean body builds no path strings."""
    if data is None or isinstance(data, bool) or (type(data) is float and math.isfinite(data)):
        return []  # the common scalars, at once
    problems: list[tuple[str, str]] = []
    # (value, its place): None for the root, else (the container's place, the key)
    stack: list[tuple[Any, Any]] = [(data, None)]
    while stack and len(problems) < limit:
        value, place = stack.pop()
        if isinstance(value, str):
            problem = _text_problem(value, max_string_length)
        elif isinstance(value, float):
            problem = None if math.isfinite(value) else "must be a finite number"
        elif isinstance(value, int) and not isinstance(value, bool):
            problem = None if -INT64_MAX - 1 <= value <= INT64_MAX else "is out of range (a 64-bit integer)"
        elif isinstance(value, dict):
            problem = None
            for key, item in reversed(list(value.items())):
                key_problem = _text_problem(key, max_string_length) if isinstance(key, str) else None
                if key_problem:
                    problems.append((_spell(path, place) or "<root>", f"a key {key_problem}"))
                stack.append((item, (place, key)))
        elif isinstance(value, list | tuple | set | frozenset):
            problem = None
            stack.extend((item, (place, i)) for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, bytes):  # YAML's !!binary: no JSON document holds it as it is
            problem = "is binary data (!!binary), not text"
        else:
            problem = None
        if problem:
            problems.append((_spell(path, place) or "<root>", problem))
    return problems[:limit]


def _spell(path: str, place: Any) -> str:
    """The path of a value from its place: its containers' keys, outermost first, after `path`."""
    keys = []
    while place is not None:
        place, key = place
        keys.append(key)
    for key in reversed(keys):
        path = _join(path, key)
    return path

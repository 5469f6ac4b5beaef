"""Request bodies parsed as JSON within the master's limits: nesting depth checked before parsing,
and every value one that SQLite and PostgreSQL store alike (or a 400 naming where it is)."""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import orjson

from pedl.config.storable_values import INT64_MAX, value_problems
from pedl.errors import InvalidArgument

if TYPE_CHECKING:
    from pedl.config.security_config import LimitsConfig

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_OUT_OF_RANGE = INT64_MAX + 1  # stands for an integer too long to convert; value_problems names it
# bytes.translate tables of the passes below, each a C-speed pass over the body
_ONLY_BRACKETS_AND_QUOTES = bytes(set(range(256)) - set(b'[]{}"'))  # deleted
_QUOTED = re.compile(rb'"[^"]*"')
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NUMBERS = bytes.maketrans(b"0123456789Ee+-", b"0000000000ee++")
# after _NUMBERS: 19 digits or more (an int64 has at most 19), or an exponent of 3 digits or more (a double
# overflows past 1.8e308). Only a text with one pays for a Python call per number.
_LONG_NUMBERS = (b"0" * 19, b"e000", b"e+000")


def nesting_depth(raw: bytes | str) -> int:
    """How deeply arrays and objects nest, from the brackets outside strings: escaped backslashes and
    quotes dropped, then all but brackets and quotes, then what is quoted, in C-speed passes; then a
    count over the brackets left (a malformed text gets some number; the parser refuses it next)."""
    data = raw.encode() if isinstance(raw, str) else raw
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _ONLY_BRACKETS_AND_QUOTES)
    return max(accumulate(map(_DEPTH_STEP.__getitem__, _QUOTED.sub(b"", data))), default=0)


def longest_string(text: str) -> int:
    """The length of the longest string literal in a JSON text (escapes counted as written, so at
    least its parsed length), in one regex pass over the text."""
    return max((m.end() - m.start() - 2 for m in _STRING.finditer(text)), default=0)


def _may_hold_long_string(raw: bytes, max_string: int) -> bool:
    """Whether a string may be longer than `max_string`: a run of that many bytes without a quote (a
    string, or the numbers between two), or an escaped quote (a string split in parts)."""
    return len(raw) > max_string and (b'\\"' in raw or max(map(len, raw.split(b'"'))) > max_string)


def parse_json(raw: bytes, limits: LimitsConfig, *, check_string_length: bool = True) -> Any:
    """The JSON value of `raw`. Refused with a 400: invalid UTF-8 or JSON, nesting deeper than
    limits.max_nesting_depth, NaN or Infinity, a number beyond a 64-bit integer or a double, a NUL
    or a lone surrogate in a string, and (with `check_string_length`) a string longer than
    limits.max_string_length.

    A plain body is parsed by orjson after a few C-speed passes over its bytes; the values are walked
    in Python (value_problems) only when the body holds something that may be refused (a long number,
    an escape of a NUL or a surrogate, NaN, a long string), and parsed by the json module with a check
    per number when it holds a long number. A 4 MB array of small numbers takes about a tenth of a
    second, not the ~8 s of a walk and a Python call per number. Callers run it off the event loop
    (deps.json_body); it holds the GIL while it runs."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(
            f"body: malformed JSON ({exc})", fields=[{"field": "body", "message": "malformed JSON"}]
        ) from None
    max_depth = limits.max_nesting_depth
    if raw.count(b"[") + raw.count(b"{") > max_depth and nesting_depth(raw) > max_depth:
        raise InvalidArgument.at("body", f"JSON nested more than {max_depth} levels deep (limits.max_nesting_depth)")
    numbers = raw.translate(_NUMBERS)
    try:
        if any(long in numbers for long in _LONG_NUMBERS):
            data, suspect = _parse_checked(text)
        else:
            try:
                data, suspect = orjson.loads(raw), False
            except orjson.JSONDecodeError:  # NaN, a lone surrogate, or malformed: the json module says which
                data, suspect = _parse_plain(text)
    except RecursionError:  # a depth limit above what the interpreter's stack allows
        raise InvalidArgument.at("body", "JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError among others
        raise InvalidArgument(
            f"body: malformed JSON ({exc})", fields=[{"field": "body", "message": "malformed JSON"}]
        ) from None
    max_string = limits.max_string_length if check_string_length else None
    if (
        suspect
        or (b"\\u" in raw and _SUSPECT_ESCAPE.search(text))
        or (max_string is not None and _may_hold_long_string(raw, max_string) and longest_string(text) > max_string)
    ):
        problems = value_problems(data, max_string_length=max_string)
        if problems:
            fields = [{"field": "body" if f == "<root>" else f, "message": m} for f, m in problems]
            summary = "; ".join(f"{p['field']}: {p['message']}" for p in fields)
            raise InvalidArgument(f"invalid request: {summary}", fields=fields)
    return data


def _parse_plain(text: str) -> tuple[Any, bool]:
    """A text whose numbers are all short: the C parser alone (the hook runs for NaN and Infinity only,
    which are not JSON, and PostgreSQL's json type refuses them). Whether a value may be refused."""
    suspect = False

    def parse_constant(name: str) -> float:
        nonlocal suspect
        suspect = True
        return float(name.replace("Infinity", "inf"))

    return json.loads(text, parse_constant=parse_constant), suspect


def _parse_checked(text: str) -> tuple[Any, bool]:
    """A text with a long number somewhere (maybe inside a string): each number checked as it is
    parsed, one beyond 64 bits or a double noted, and an integer of more digits than int() takes
    kept as a stand-in that value_problems names."""
    suspect = False

    def parse_int(digits: str) -> int:
        nonlocal suspect
        if len(digits) > 20:  # int() refuses more than 4300 digits; none of these fit 64 bits anyway
            suspect = True
            return _OUT_OF_RANGE
        value = int(digits)
        suspect = suspect or not -INT64_MAX - 1 <= value <= INT64_MAX
        return value

    def parse_float(digits: str) -> float:
        nonlocal suspect
        value = float(digits)  # 1e400 is inf
        suspect = suspect or not math.isfinite(value)
        return value

    def parse_constant(name: str) -> float:
        nonlocal suspect
        suspect = True
        return float(name.replace("Infinity", "inf"))

    data = json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    return data, suspect

"""Request bodies parsed as JSON within the master's limits: nesting depth checked before parsing,
and every value one that SQLite and PostgreSQL store alike (or a 400 naming where it is)."""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from pedl.config.storable_values import INT64_MAX, value_problems
from pedl.errors import InvalidArgument

if TYPE_CHECKING:
    from pedl.config.security_config import LimitsConfig

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# the only ways a NUL or a lone surrogate gets into a string parsed from valid UTF-8
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_OUT_OF_RANGE = INT64_MAX + 1  # stands for an integer too long to convert; value_problems names it


def nesting_depth(text: str) -> int:
    """How deeply arrays and objects nest, from the brackets outside strings, in C-speed passes (a
    malformed text gets some number; json.loads refuses it next)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0)



def parse_json(raw: bytes, limits: LimitsConfig, *, check_string_length: bool = True) -> Any:
    """The JSON value of `raw`. Refused with a 400: invalid UTF-8 or JSON, nesting deeper than
    limits.max_nesting_depth, NaN or Infinity, a number beyond a 64-bit integer or a double, a NUL
    or a lone surrogate in a string, and (with `check_string_length`) a string longer than
    limits.max_string_length."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"body: malformed JSON ({exc})",
                              fields=[{"field": "body", "message": "malformed JSON"}]) from None
    max_depth = limits.max_nesting_depth
    if text.count("[") + text.count("{") > max_depth and nesting_depth(text) > max_depth:
        raise InvalidArgument.at("body", f"JSON nested more than {max_depth} levels deep (limits.max_nesting_depth)")
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
        suspect = True  # NaN, Infinity: not JSON, and PostgreSQL's json type refuses them
        return float(name.replace("Infinity", "inf"))

    try:
        data = json.loads(text, parse_int=parse_int, parse_float=parse_float, parse_constant=parse_constant)
    except RecursionError:  # a depth limit above what the interpreter's stack allows
        raise InvalidArgument.at("body", "JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError among others
        raise InvalidArgument(f"body: malformed JSON ({exc})",
                              fields=[{"field": "body", "message": "malformed JSON"}]) from None
    max_string = limits.max_string_length if check_string_length else None
    if suspect or _SUSPECT_ESCAPE.search(text) or (max_string is not None and len(text) > max_string):
        problems = value_problems(data, max_string_length=max_string)
        if problems:
            fields = [{"field": "body" if f == "<root>" else f, "message": m} for f, m in problems]
            summary = "; ".join(f"{p['field']}: {p['message']}" for p in fields)
            raise InvalidArgument(f"invalid request: {summary}", fields=fields)
    return data

"""Memory sizes as Docker (and so Determined's `resources.shm_size`) writes them: a number of bytes,
or a number with a binary unit, "24576", "512m", "1.5g", "2GiB"."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_SIZE = re.compile(r"^(\d+(?:\.\d+)?|\.\d+)\s*([kmgt]?)(?:i?b)?$", re.IGNORECASE)
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
MIN_SHM, MAX_SHM = 4096, 2**40


def parse_byte_size(value: Any) -> int:
    """Bytes, from an integer or a string with an optional unit (k, m, g, t: powers of 1024)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("a size is a number of bytes or a string like '512m' or '1.5g'")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError("a size must be a whole number of bytes")
    if isinstance(value, int | float):
        size = value
    else:
        match = _SIZE.match(value.strip())
        if match is None:
            raise ValueError(
                f"{value!r} is not a size: a number of bytes, or one with a unit k, m, g or t "
                "(powers of 1024), e.g. '512m' or '1.5g'"
            )
        size = float(match.group(1)) * _UNITS[match.group(2).lower()]
    return int(size)


def _shm_size(value: Any) -> int | None:
    if value is None:
        return None
    size = parse_byte_size(value)
    if not MIN_SHM <= size <= MAX_SHM:
        raise ValueError(f"{size} bytes: /dev/shm takes {MIN_SHM} bytes to 1 TiB")
    return size


ShmSize = Annotated[int | None, BeforeValidator(_shm_size)]

"""Turning what training code reports into JSON the master accepts.

Non-finite floats become "NaN"/"Infinity"/"-Infinity" (Determined's wire form), and numpy or torch
scalars and arrays become plain Python values.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def to_json_value(value: Any, *, where: str = "value") -> Any:
    """A JSON-safe copy of `value`; `where` names the offending key in errors."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else encode_float(value)
    if type(value) is dict or isinstance(value, Mapping):  # (a dict's check first: a report's metrics are)
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: keys must be strings, got {key!r}")
            # a report's values are mostly plain floats: those need no recursion and no path
            if type(item) is float and math.isfinite(item):
                out[key] = item
            else:
                out[key] = to_json_value(item, where=f"{where}.{key}")
        return out
    if isinstance(value, float):  # a float subclass (numpy.float64)
        return encode_float(float(value))
    if isinstance(value, list | tuple):
        return [to_json_value(item, where=f"{where}[{i}]") for i, item in enumerate(value)]
    # numpy / torch: arrays and tensors have tolist(), scalars have item().
    for method in ("tolist", "item"):
        convert = getattr(value, method, None)
        if callable(convert):
            return to_json_value(convert(), where=where)
    if hasattr(value, "__float__"):
        return encode_float(float(value))
    raise TypeError(f"{where}: {type(value).__name__} is not JSON-serializable")


def encode_float(x: float) -> float | str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


_second: tuple[int, str] = (-1, "")  # the last whole second formatted, and its text


def rfc3339_now() -> str:
    """Now, as RFC 3339 in UTC with microseconds. A trial stamps every report, so the date and time
    of day are formatted once a second and only the fraction each call."""
    global _second
    micros = time.time_ns() // 1000
    seconds, fraction = divmod(micros, 1_000_000)
    if _second[0] != seconds:
        _second = (seconds, datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{_second[1]}.{fraction:06d}Z"


def format_metrics(metrics: Mapping[str, Any]) -> str:
    """One readable line: `loss=0.1234 accuracy=0.9`."""
    parts = []
    for key, value in metrics.items():
        if isinstance(value, float):
            text = f"{value:.6g}"
        elif isinstance(value, str | int | bool) or value is None:
            text = str(value)
        else:
            try:
                converted = to_json_value(value)
            except TypeError:
                converted = value
            text = f"{converted:.6g}" if isinstance(converted, float) else str(converted)
        parts.append(f"{key}={text}")
    return " ".join(parts)

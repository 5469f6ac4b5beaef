"""A batch's reports as columns: each metric's values in one list, where every report names the same
metrics in the same order (a training loop's reports do). Built by C-level iteration (map, chain,
slices), not a Python loop per report and metric: the summaries and the digester each took ~10% of a
master storing 40,000 reports a second building these lists a value at a time."""

from __future__ import annotations

import math
from itertools import chain
from typing import Any

Columns = tuple[tuple[str, ...], list[list[Any]]]  # the names, and a list of values per name


def columns(reports: list[Any]) -> Columns | None:
    """(names, each name's values in report order) when every report is a dict of the same names in the
    same order; None for anything else (no reports, a report that is not a dict, other names)."""
    if not reports or set(map(type, reports)) != _DICT:
        return None
    names = tuple(reports[0])
    if list(map(tuple, reports)).count(names) != len(reports):
        return None
    flat = list(chain.from_iterable(map(dict.values, reports)))
    width = len(names)
    return names, [flat[i::width] for i in range(width)]


def numbers_only(values: list[Any]) -> bool:
    """Whether every value is a plain int or float (not a bool, nor a subclass)."""
    return set(map(type, values)) <= _NUMBER_TYPES


def finite_number(value: Any) -> bool:
    """Whether the value is a finite int or float (not a bool): what the digests take."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


_NUMBER_TYPES = frozenset({int, float})
_DICT = {dict}

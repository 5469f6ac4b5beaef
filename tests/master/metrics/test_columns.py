"""A batch's reports as columns (metrics/columns.py): a name's values in report order, only where
every report names the same metrics in the same order."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pedl.master.metrics.columns import columns, numbers_only

_VALUES = st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=2), st.booleans(), st.none())
_REPORTS = st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), _VALUES, max_size=3), max_size=6)


@settings(max_examples=300, deadline=None)
@given(_REPORTS)
def test_columns_are_the_values_by_name_or_none_where_the_names_differ(reports: list[dict[str, Any]]) -> None:
    got = columns(reports)
    alike = bool(reports) and all(list(r) == list(reports[0]) for r in reports)
    if not alike:
        assert got is None
        return
    assert got is not None
    names, values_of = got
    assert names == tuple(reports[0])
    assert values_of == [[r[name] for r in reports] for name in names]


def test_the_same_names_in_another_order_are_not_columns() -> None:
    # (a column per position would put b's values under a)
    assert columns([{"a": 1, "b": 2}, {"b": 3, "a": 4}]) is None
    assert columns([{"a": 1, "b": 2}, {"a": 3, "b": 4}]) == (("a", "b"), [[1, 3], [2, 4]])


def test_a_report_that_is_not_a_dict_leaves_no_columns() -> None:
    assert columns([]) is None
    assert columns([{"a": 1}, ["a"]]) is None
    assert columns([{"a": 1}, None]) is None


def test_numbers_only_takes_ints_and_floats_and_refuses_bools_and_the_rest() -> None:
    assert numbers_only([1, 2.5, -3])
    assert numbers_only([])
    assert not numbers_only([1, True])
    assert not numbers_only([1.0, "NaN"])
    assert not numbers_only([None])

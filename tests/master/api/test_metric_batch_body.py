"""The metric batch's lean body path (api/metric_batch_body.py) answers exactly as the general path
(bounded_json + the models) does: the same reports for a body both accept, the same 400 naming the
same field for one the general path refuses. Property-tested over bodies that are mostly well formed
with one thing wrong, and checked by hand for what orjson reads differently from the stdlib."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pedl.config.security_config import LimitsConfig
from pedl.errors import InvalidArgument
from pedl.master.api import metric_batch_body
from pedl.master.metrics.batches import MAX_REPORTS

LIMITS = LimitsConfig(max_string_length=256)
BIG_INT = 2**63

names = st.sampled_from(["loss", "accuracy", "lr", "", "x" * 300, "a.b", "\u00e9t\u00e9"])
scalars = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**70), 2**70),
    st.sampled_from([BIG_INT - 1, BIG_INT, -BIG_INT, -BIG_INT - 1, 2**64, 1e300, 2.0**63, -(2.0**63), 0.5]),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "", "a\x00b", "y" * 300, "ok"]),
    st.booleans(),
    st.none(),
)
values = st.one_of(scalars, st.lists(scalars, max_size=2), st.dictionaries(st.just("k"), scalars, max_size=1))
odd = st.sampled_from([None, -1, "text", 1.5, [], {}, True, 2**70])


@st.composite
def reports(draw: Any) -> Any:
    report: dict[str, Any] = {
        "group": draw(st.sampled_from(["training", "validation", "custom"])),
        "stepsCompleted": draw(st.integers(0, 50)),
        "trialRunId": draw(st.integers(0, 3)),
        "reportTime": draw(st.sampled_from([None, "2026-11-27T08:00:00Z"])),
        "metrics": {
            "avgMetrics": draw(st.dictionaries(names, scalars, max_size=3)),
            "batchMetrics": draw(st.sampled_from([None, []])),
        },
    }
    for key in draw(st.lists(st.sampled_from(["group", "stepsCompleted", "trialRunId", "reportTime"]), max_size=1)):
        report[key] = draw(odd)
    if draw(st.integers(0, 9)) == 0:
        report["metrics"]["avgMetrics"]["nested"] = draw(values)
    if draw(st.integers(0, 19)) == 0:
        report["metrics"]["batchMetrics"] = draw(st.sampled_from([[{"loss": 1}], {}, 0, "x"]))
    if draw(st.integers(0, 19)) == 0:
        del report[draw(st.sampled_from(["group", "stepsCompleted", "trialRunId", "metrics"]))]
    if draw(st.integers(0, 19)) == 0:
        report["extra"] = draw(values)
    if draw(st.integers(0, 19)) == 0:
        report["metrics"] = draw(odd)
    return report


def outcome(parse: Any, raw: bytes) -> Any:
    try:
        return ("stored", parse(raw, LIMITS))
    except InvalidArgument as exc:
        return ("refused", exc.to_dict())


def same_answer(raw: bytes) -> None:
    lean = outcome(metric_batch_body.parse, raw)
    general = outcome(metric_batch_body._general, raw)
    assert lean == general, raw[:500]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(reports(), min_size=1, max_size=4))
def test_the_lean_path_answers_as_the_general_path(batch: list[Any]) -> None:
    same_answer(json.dumps({"reports": batch}).encode())


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"   ",
        b"[]",
        b"{}",
        b'{"reports": []}',
        b'{"reports": {}}',
        b"not json",
        b'{"reports": [1]}',
        b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a": NaN}}}]}',
        b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a": 1e400}}}]}',
        # an integer past 64 bits: orjson reads a float, the models refuse it
        b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a": 100000000000000000000000}}}]}',
        b'{"reports": [{"stepsCompleted": 18446744073709551615, "metrics": {"avgMetrics": {}}}]}',
        b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a\\u0000": 1}}}]}',
        b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a": "\\ud800"}}}]}',
        b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a": "\\ud83d\\ude00"}}}]}',
        b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a": 1}}}], "other": 1}',
        b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a": 1, "a": 2}}}]}',
        b"\xff\xfe",
    ],
)
def test_bodies_orjson_reads_differently_get_the_general_answer(raw: bytes) -> None:
    same_answer(raw)


def test_the_common_batch_takes_the_lean_path_with_its_values_as_stored() -> None:
    batch = [
        {
            "group": "training",
            "stepsCompleted": i,
            "trialRunId": 1,
            "reportTime": "2026-11-27T08:00:00Z",
            "metrics": {"avgMetrics": {"loss": 1 / i, "bad": "NaN", "n": i}, "batchMetrics": []},
        }
        for i in range(1, MAX_REPORTS + 1)
    ]
    raw = json.dumps({"reports": batch}).encode()
    reports = metric_batch_body._lean(raw, LIMITS)
    assert reports is not None and len(reports) == MAX_REPORTS
    assert reports[1].values == {"loss": 0.5, "bad": "NaN", "n": 2}  # "NaN" kept as the string it is stored as
    assert reports == metric_batch_body._general(raw, LIMITS)
    # one more is past the bound: the general path's 400 names the field
    too_many = json.dumps({"reports": [*batch, batch[0]]}).encode()
    assert metric_batch_body._lean(too_many, LIMITS) is None
    with pytest.raises(InvalidArgument) as err:
        metric_batch_body.parse(too_many, LIMITS)
    assert err.value.to_dict()["fields"][0]["field"] == "reports"


def test_a_nesting_limit_below_the_bodys_own_depth_leaves_it_to_the_general_path() -> None:
    raw = b'{"reports": [{"stepsCompleted": 1, "metrics": {"avgMetrics": {"a": 1}}}]}'
    shallow = LimitsConfig(max_nesting_depth=4)
    assert metric_batch_body._lean(raw, shallow) is None
    with pytest.raises(InvalidArgument, match="nested more than 4"):
        metric_batch_body.parse(raw, shallow)

"""pedl.core.wire_format: non-finite floats, numpy/torch values, timestamps, printed lines."""

from __future__ import annotations

import json
import math
from datetime import datetime

import numpy as np
import pytest

from pedl.core.wire_format import format_metrics, rfc3339_now, to_json_value


def test_non_finite_floats_become_strings() -> None:
    value = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": {"d": float("nan")}}
    encoded = to_json_value(value)
    assert encoded == {"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "c": {"d": "NaN"}}
    json.dumps(encoded, allow_nan=False)


def test_numpy_scalars_and_arrays_become_plain_values() -> None:
    encoded = to_json_value(
        {"f32": np.float32(0.5), "i64": np.int64(3), "arr": np.array([1.0, np.nan]), "b": np.bool_(True)}
    )
    assert encoded == {"f32": 0.5, "i64": 3, "arr": [1.0, "NaN"], "b": True}
    assert type(encoded["i64"]) is int


def test_torch_tensors_become_plain_values() -> None:
    torch = pytest.importorskip("torch")
    assert to_json_value({"loss": torch.tensor(float("inf")), "v": torch.tensor([1, 2])}) == {
        "loss": "Infinity",
        "v": [1, 2],
    }


def test_unserializable_values_are_named() -> None:
    with pytest.raises(TypeError, match=r"metrics\.bad: object is not JSON-serializable"):
        to_json_value({"bad": object()}, where="metrics")
    with pytest.raises(TypeError, match="keys must be strings"):
        to_json_value({1: 2})


def test_report_time_is_rfc3339_utc() -> None:
    stamp = rfc3339_now()
    assert stamp.endswith("Z")
    assert datetime.fromisoformat(stamp.replace("Z", "+00:00")).utcoffset().total_seconds() == 0


def test_format_metrics_is_one_readable_line() -> None:
    line = format_metrics({"loss": 0.123456789, "acc": np.float32(0.5), "n": 3, "bad": math.nan})
    assert line == "loss=0.123457 acc=0.5 n=3 bad=nan"

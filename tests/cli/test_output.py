"""Printing helpers: wire enums in words, RFC 3339 times as epoch seconds."""

from __future__ import annotations

import pytest

from pedl.cli.output import epoch_seconds, fmt_enum


@pytest.mark.parametrize(
    ("wire", "shown"),
    [
        ("STATE_COMPLETED", "COMPLETED"),
        ("STATE_STOPPING_CANCELED", "STOPPING_CANCELED"),
        ("LOG_LEVEL_WARNING", "WARNING"),
        ("TYPE_CUDA", "CUDA"),
        ("SCHEDULER_TYPE_PRIORITY", "PRIORITY"),
        ("FITTING_POLICY_BEST", "BEST"),
        ("RESOURCE_POOL_TYPE_STATIC", "STATIC"),
        ("ORDER_BY_DESC", "DESC"),
        ("PRODUCT_UNSPECIFIED", ""),
        ("STATE_UNSPECIFIED", ""),
        ("PRODUCT_COMMUNITY", "COMMUNITY"),
        ("RUNNING", "RUNNING"),
        ("running", "running"),
        ("STATE_", "STATE_"),
        ("a STATE_X", "a STATE_X"),
        ("", ""),
        (None, ""),
    ],
)
def test_enums_in_words(wire: str | None, shown: str) -> None:
    assert fmt_enum(wire) == shown


def test_epoch_seconds() -> None:
    assert epoch_seconds("1970-01-01T00:01:40.123456789Z") == pytest.approx(100.123456)
    assert epoch_seconds("1970-01-01T00:01:40") == 100.0  # no zone: UTC, as the master writes
    assert epoch_seconds("yesterday") is None and epoch_seconds(None) is None

"""Duration strings ("30s", "1m30s", "1.5h") as master.yaml writes them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.config.durations import format_duration, parse_duration
from pedl.config.master_config import MasterConfig


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("1h", 3600.0),
        ("5m", 300.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("1h30m", 5400.0),
        ("2h3m4s", 2 * 3600 + 3 * 60 + 4.0),
        ("500ms", 0.5),
        ("1s500ms", 1.5),
        (".5s", 0.5),
        ("0", 0.0),
        ("0s", 0.0),
        ("  45s  ", 45.0),
    ],
)
def test_parses_duration_strings(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("number", "seconds"), [(0, 0.0), (15, 15.0), (2.5, 2.5)])
def test_numbers_are_seconds(number: float, seconds: float) -> None:
    assert parse_duration(number) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "   ", "abc", "10", "1h30", "s", "5 s", "1d", "30sec", "1m-30s", "-5s", "1.2.3s", "h1", "30s!"],
)
def test_rejects_malformed_strings(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize("number", [-1, -0.5])
def test_rejects_negative_numbers(number: float) -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_duration(number)


@pytest.mark.parametrize("value", [True, False, None, [30], {"s": 30}])
def test_rejects_other_types(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (30, "30s"), (90, "1m30s"), (3600, "1h"), (5400, "1h30m"), (0.5, "0.5s"), (3661, "1h1m1s")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seconds", [0, 1, 59, 60, 61, 3599, 3600, 86400 + 7, 0.25])
def test_format_then_parse_round_trips(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)


def test_duration_fields_in_master_config() -> None:
    cfg = MasterConfig(agent_heartbeat_interval="1m30s", session_ttl="1.5h", task_kill_grace_period=3)
    assert cfg.agent_heartbeat_interval == 90.0
    assert cfg.session_ttl == 5400.0
    assert cfg.task_kill_grace_period == 3.0
    # serialized back in the same notation users write
    dumped = cfg.model_dump(mode="json")
    assert dumped["agent_heartbeat_interval"] == "1m30s"
    assert dumped["session_ttl"] == "1h30m"


@pytest.mark.parametrize("bad", ["soon", -5, "-5s", True])
def test_bad_duration_field_names_the_field(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        MasterConfig(agent_reconnect_wait=bad)
    assert info.value.errors()[0]["loc"] == ("agent_reconnect_wait",)

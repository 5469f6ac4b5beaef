"""The master URL becomes the agent socket URL; reconnect delays double with jitter to a cap; a refusal
says where the token is."""

import pytest

from pedl.agent.connection import Backoff, ws_url


@pytest.mark.parametrize(
    ("master", "socket"),
    [
        ("http://127.0.0.1:8080", "ws://127.0.0.1:8080/agents/ws"),
        ("https://pedl.example.com/", "wss://pedl.example.com/agents/ws"),
        ("http://host/prefix", "ws://host/prefix/agents/ws"),
    ],
)
def test_ws_url(master: str, socket: str) -> None:
    assert ws_url(master) == socket


def test_ws_url_refuses_other_schemes() -> None:
    with pytest.raises(ValueError, match="http"):
        ws_url("ftp://host")


def test_backoff_doubles_to_cap_with_jitter() -> None:
    backoff = Backoff()
    delays = [backoff.next_delay() for _ in range(10)]
    nominal = [0.5, 1, 2, 4, 8, 10, 10, 10, 10, 10]
    for delay, expected in zip(delays, nominal, strict=True):
        assert expected * 0.75 <= delay <= min(expected * 1.25, 10.0)
    assert backoff.attempts == 10
    backoff.reset()
    assert backoff.next_delay() <= 0.625


def test_a_refusal_says_where_the_token_is() -> None:
    from websockets.exceptions import ConnectionClosedError
    from websockets.frames import Close

    from pedl.agent.connection import refusal
    from pedl.common.agent_protocol import CLOSE_UNAUTHORIZED

    refused = refusal(ConnectionClosedError(Close(CLOSE_UNAUTHORIZED, "missing agent token"), None))
    assert refused is not None
    text = str(refused)
    assert "missing agent token" in text and "--token" in text and "PEDL_AGENT_TOKEN" in text
    assert "<data_dir>/agent_token" in text
    assert refusal(ConnectionClosedError(Close(1011, "boom"), None)) is None  # others are retried


def test_a_version_refusal_names_both_versions_and_the_remedy() -> None:
    from websockets.exceptions import ConnectionClosedError
    from websockets.frames import Close

    from pedl.agent.connection import refusal
    from pedl.common.agent_protocol import CLOSE_VERSION_MISMATCH

    refused = refusal(ConnectionClosedError(Close(CLOSE_VERSION_MISMATCH, "agent pedl 0.0.9, master pedl 0.1.0"), None))
    assert refused is not None
    text = str(refused)
    assert "agent pedl 0.0.9, master pedl 0.1.0" in text
    assert "pip install pedl==VERSION" in text and "/api/v1/pedl/package" in text

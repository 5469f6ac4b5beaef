"""Following a trial's logs across a lost connection: no line is printed twice."""

from __future__ import annotations

import pytest

from pedl.cli.log_stream import LinePrinter, stream_trial_logs
from pedl.errors import Unavailable
from tests.cli.fake_master import log


class FlakyClient:
    """Streams `batches` one per call; raises Unavailable after every batch but the last."""

    def __init__(self, batches: list[list[dict]]) -> None:
        self.batches = batches
        self.calls = 0

    def stream_ndjson(self, path: str, params: dict):
        batch = self.batches[self.calls]
        self.calls += 1
        yield from batch
        if self.calls < len(self.batches):
            raise Unavailable("lost the connection")


def test_follow_reconnects_and_skips_lines_already_printed() -> None:
    client = FlakyClient([[log(1, "a"), log(2, "b")], [log(1, "a"), log(2, "b"), log(3, "c")]])
    seen: list[str] = []
    last = stream_trial_logs(client, 1, lambda r: seen.append(r["message"]), follow=True, sleep=lambda _s: None)
    assert seen == ["a\n", "b\n", "c\n"] and last == 3 and client.calls == 2


def test_without_follow_a_lost_connection_is_an_error() -> None:
    client = FlakyClient([[log(1, "a")], []])
    with pytest.raises(Unavailable):
        stream_trial_logs(client, 1, lambda r: None, follow=False, sleep=lambda _s: None)


def test_prefixed_multiline_messages(capsys) -> None:
    LinePrinter().log({"message": "a\nb\n"}, prefix="[trial 3] ")
    LinePrinter().log({"message": "no newline"})
    assert capsys.readouterr().out == "[trial 3] a\n[trial 3] b\nno newline\n"

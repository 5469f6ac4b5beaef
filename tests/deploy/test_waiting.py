"""Waiting says so: a line when it starts, another every report_every_s, and a clear error at the
timeout; on an injected clock, so no real time passes."""

from __future__ import annotations

import pytest

from pedl.deploy.deploy_error import DeployError
from pedl.deploy.waiting import Progress, elapsed, wait_until


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def progress(clock: FakeClock, lines: list[str]) -> Progress:
    return Progress(waiting=lines.append, clock=clock, sleep=clock.sleep, poll_s=5, report_every_s=30)


def test_it_reports_while_it_waits_and_returns_the_result() -> None:
    clock, lines = FakeClock(), []
    answers = iter([None] * 13 + ["ready"])
    assert (
        wait_until(lambda: next(answers), what="the stack", timeout_s=600, progress=progress(clock, lines)) == "ready"
    )
    assert lines == [
        "waiting for the stack",
        "still waiting for the stack (30s)",
        "still waiting for the stack (1m00s)",
    ]
    assert clock.now == 65


def test_it_gives_up_at_the_timeout_with_a_hint() -> None:
    clock, lines = FakeClock(), []
    with pytest.raises(DeployError, match=r"gave up waiting for the volume after 2m00s; delete it by hand"):
        wait_until(
            lambda: None, what="the volume", timeout_s=120, progress=progress(clock, lines), hint="delete it by hand"
        )


def test_elapsed() -> None:
    assert (elapsed(5), elapsed(60), elapsed(3725)) == ("5s", "1m00s", "62m05s")

"""How `pedl deploy aws` waits and says so: the lines it reports (steps, stack events, progress while
waiting) go to callbacks, and the clock and sleep are injected, so the deploy code prints nothing itself
and tests wait no real time."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pedl.deploy.deploy_error import DeployError

T = TypeVar("T")


def _drop(_line: str) -> None:
    pass


@dataclass
class Progress:
    step: Callable[[str], None] = _drop  # what is being done now
    event: Callable[[str], None] = _drop  # a stack event
    waiting: Callable[[str], None] = _drop  # still waiting, and for how long
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    poll_s: float = 5.0
    report_every_s: float = 30.0


def elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def wait_until(check: Callable[[], T | None], *, what: str, timeout_s: float, progress: Progress, hint: str = "") -> T:
    """Call `check` until it returns something, reporting every report_every_s; a DeployError after timeout_s."""
    start = last_report = progress.clock()
    progress.waiting(f"waiting for {what}")
    while True:
        result = check()
        if result is not None:
            return result
        now = progress.clock()
        if now - start >= timeout_s:
            more = f"; {hint}" if hint else ""
            raise DeployError(f"gave up waiting for {what} after {elapsed(now - start)}{more}")
        if now - last_report >= progress.report_every_s:
            progress.waiting(f"still waiting for {what} ({elapsed(now - start)})")
            last_report = now
        progress.sleep(progress.poll_s)

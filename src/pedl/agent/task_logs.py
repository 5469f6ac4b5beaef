"""Log shipping for one task: split a process's output into lines and send them in batches.

Batches keep the socket quiet under chatty training loops while a line still reaches the master
within `BATCH_DELAY_S`.
"""

from __future__ import annotations

import asyncio
import codecs
import re
import time
from collections.abc import Callable
from typing import Literal

from pedl.common.agent_protocol import LogLine, TaskLogs

BATCH_DELAY_S = 0.2
BATCH_MAX_LINES = 500
MAX_LINE_CHARS = 64 * 1024  # longer output without a newline is cut into pieces of this size
READ_CHUNK = 64 * 1024

StdType = Literal["stdout", "stderr", "agent"]
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # bare \r too, so progress bars become lines


class LogBatcher:
    """Collects one task's lines; sends them as `task_logs` at most BATCH_DELAY_S after the first."""

    def __init__(self, allocation_id: str, send: Callable[[TaskLogs], None]) -> None:
        self._allocation_id = allocation_id
        self._send = send
        self._lines: list[LogLine] = []
        self._timer: asyncio.TimerHandle | None = None

    def add(self, stdtype: StdType, message: str) -> None:
        self._lines.append(LogLine(timestamp=time.time(), stdtype=stdtype, message=message))
        if len(self._lines) >= BATCH_MAX_LINES:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(BATCH_DELAY_S, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._lines:
            lines, self._lines = self._lines, []
            self._send(TaskLogs(allocation_id=self._allocation_id, lines=lines))


async def pump_lines(stream: asyncio.StreamReader, on_line: Callable[[str], None]) -> None:
    """Read `stream` to EOF, calling `on_line` for each line (without its line break)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    while chunk := await stream.read(READ_CHUNK):
        pending = _emit_complete(pending + decoder.decode(chunk), on_line)
    pending += decoder.decode(b"", final=True)
    if pending.endswith("\r"):
        pending = pending[:-1]
    if pending:
        on_line(pending)


def _emit_complete(text: str, on_line: Callable[[str], None]) -> str:
    """Emit every complete line of `text`; return the unfinished rest."""
    # a trailing \r may be the first half of \r\n: keep it until the next chunk says
    held = "\r" if text.endswith("\r") else ""
    if held:
        text = text[:-1]
    *lines, rest = _LINE_BREAK.split(text)
    for line in lines:
        on_line(line)
    while len(rest) > MAX_LINE_CHARS:
        on_line(rest[:MAX_LINE_CHARS])
        rest = rest[MAX_LINE_CHARS:]
    return rest + held

"""Trial and task logs: NDJSON from GET /api/v1/trials/{id}/logs or /api/v1/tasks/{id}/logs, printed as
they come, from any thread. A followed stream reconnects after a lost connection and skips the lines
it already printed."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from pedl.cli.client import MasterClient
from pedl.errors import Unavailable

RECONNECT_FOR = 600.0  # seconds a followed stream keeps trying to reach a restarting master


class LinePrinter:
    """Writes whole lines to stdout under a lock so that concurrent trial streams do not interleave."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()

    def log(self, record: dict[str, Any], prefix: str = "") -> None:
        text = log_text(record, prefix)
        if text:
            self.line(text)


def log_text(record: dict[str, Any], prefix: str = "") -> str:
    """The record's message with `prefix` before each of its lines ("" for an empty message)."""
    message = str(record.get("message") or "")
    if message and prefix:
        message = "".join(f"{prefix}{part}\n" for part in message.rstrip("\n").split("\n"))
    return message


def log_id(record: dict[str, Any]) -> int | None:
    try:
        return int(record["id"])
    except (KeyError, TypeError, ValueError):
        return None


def logs_path(trial_id: int) -> str:
    return f"/api/v1/trials/{trial_id}/logs"


def task_logs_path(task_id: str) -> str:
    return f"/api/v1/tasks/{quote(task_id, safe='')}/logs"


def tail_trial_logs(client: MasterClient, trial_id: int, count: int) -> list[dict[str, Any]]:
    """The last `count` (at least 1) lines, oldest first (limit=N, orderBy=ORDER_BY_DESC, like det)."""
    records = list(
        client.stream_ndjson(logs_path(trial_id), {"follow": False, "limit": max(count, 1), "orderBy": "ORDER_BY_DESC"})
    )
    records.reverse()
    return records


def stream_trial_logs(
    client: MasterClient,
    trial_id: int,
    emit: Callable[[dict[str, Any]], None],
    *,
    follow: bool,
    after_id: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int | None:
    """Emit each log record of a trial; returns the id of the last one (see `stream_logs`)."""
    return stream_logs(client, logs_path(trial_id), emit, follow=follow, after_id=after_id, sleep=sleep)


def stream_logs(
    client: MasterClient,
    path: str,
    emit: Callable[[dict[str, Any]], None],
    *,
    follow: bool,
    after_id: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int | None:
    """Emit each log record of the stream at `path`; returns the id of the last one. With `follow`,
    the master ends the stream when the trial or task ends; a lost connection is retried for
    RECONNECT_FOR seconds."""
    last, delay, lost_since = after_id, 0.5, None
    while True:
        try:
            for record in client.stream_ndjson(path, {"follow": follow}):
                rid = log_id(record)
                if last is not None and rid is not None and rid <= last:
                    continue
                emit(record)
                last = rid if rid is not None else last
                lost_since, delay = None, 0.5
            return last
        except Unavailable:
            if not follow:
                raise
            lost_since = lost_since or time.monotonic()
            if time.monotonic() - lost_since > RECONNECT_FOR:
                raise
            sleep(delay)
            delay = min(delay * 2, 10.0)

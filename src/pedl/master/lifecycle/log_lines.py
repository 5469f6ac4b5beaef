"""Task logs as they are stored: lines shipped by agents, posted by tasks and written by the master
(read back by tasks/logs.py)."""

from __future__ import annotations

import re

from sqlalchemy import insert
from sqlalchemy.orm import Session

from pedl.common.agent_protocol import LogLine
from pedl.master.db import models

_LEVEL = {"stdout": "LOG_LEVEL_INFO", "stderr": "LOG_LEVEL_ERROR", "agent": "LOG_LEVEL_WARNING"}
LOG_LEVELS = (
    "LOG_LEVEL_UNSPECIFIED",
    "LOG_LEVEL_TRACE",
    "LOG_LEVEL_DEBUG",
    "LOG_LEVEL_INFO",
    "LOG_LEVEL_WARNING",
    "LOG_LEVEL_ERROR",
    "LOG_LEVEL_CRITICAL",
)


# PostgreSQL text holds no NUL: a NUL is stored as ESC + U+FDD2 and a literal ESC as ESC + U+FDD1.
# ESC is U+FDD0, a Unicode noncharacter (reserved for a program's internal use), so text stored before
# the escape (where a NUL had become U+FFFD) reads back as it was stored.
_ESC = "\ufdd0"
_UNESCAPED = {"\ufdd1": _ESC, "\ufdd2": "\x00"}
_ESCAPED = re.compile("\ufdd0([\ufdd1\ufdd2])")


def storable(text: str) -> str:
    """A task prints what it likes; PostgreSQL stores no NUL and no lone surrogate in text. NULs are
    escaped (`readable` gives them back); a lone surrogate becomes "?"."""
    if _ESC in text:
        text = text.replace(_ESC, _ESC + "\ufdd1")
    if "\x00" in text:
        text = text.replace("\x00", _ESC + "\ufdd2")
    return text.encode("utf-8", "replace").decode("utf-8")


def readable(stored: str) -> str:
    """A stored line as the task printed it."""
    return _ESCAPED.sub(lambda m: _UNESCAPED[m.group(1)], stored) if _ESC in stored else stored


def add_master_line(
    s: Session, now: float, alloc: models.Allocation, message: str, level: str = "LOG_LEVEL_INFO"
) -> None:
    s.add(
        models.TaskLog(
            task_id=alloc.task_id,
            trial_id=alloc.trial_id,
            allocation_id=alloc.id,
            timestamp=now,
            level=level,
            stdtype="master",
            source="master",
            message=message.rstrip("\n") + "\n",
        )
    )


def add_task_lines(s: Session, alloc: models.Allocation, agent_id: str, lines: list[LogLine]) -> None:
    if not lines:
        return
    s.execute(
        insert(models.TaskLog),
        [
            {
                "task_id": alloc.task_id,
                "trial_id": alloc.trial_id,
                "allocation_id": alloc.id,
                "agent_id": agent_id,
                "timestamp": ln.timestamp,
                "level": _LEVEL.get(ln.stdtype, "LOG_LEVEL_INFO"),
                "stdtype": ln.stdtype,
                "source": "agent" if ln.stdtype == "agent" else "task",
                "message": storable(ln.message if ln.message.endswith("\n") else ln.message + "\n"),
            }
            for ln in lines
        ],
    )


def add_api_lines(s: Session, task_id: str, trial_id: int | None, entries: list[tuple[float, str, str]]) -> None:
    """Lines posted by the task itself through POST /api/v1/task/logs: (time, level, text)."""
    for ts, level, text in entries:
        s.add(
            models.TaskLog(
                task_id=task_id,
                trial_id=trial_id,
                timestamp=ts,
                level=level,
                stdtype="stdout",
                source="task",
                message=text if text.endswith("\n") else text + "\n",
            )
        )

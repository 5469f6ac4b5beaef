"""Output becomes lines regardless of how it is chunked; lines go out in timely batches."""

from __future__ import annotations

import asyncio

from pedl.agent.task_logs import MAX_LINE_CHARS, LogBatcher, pump_lines
from pedl.common.agent_protocol import TaskLogs


async def _lines_of(*chunks: bytes) -> list[str]:
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    lines: list[str] = []
    await pump_lines(reader, lines.append)
    return lines


async def test_lines_split_across_chunks() -> None:
    assert await _lines_of(b"one\ntw", b"o\r", b"\nthree\rfour") == ["one", "two", "three", "four"]


async def test_utf8_split_across_chunks() -> None:
    text = "héllo wörld\n".encode()
    assert await _lines_of(text[:2], text[2:]) == ["héllo wörld"]


async def test_long_line_is_cut() -> None:
    lines = await _lines_of(b"x" * (MAX_LINE_CHARS * 2 + 5))
    assert [len(line) for line in lines] == [MAX_LINE_CHARS, MAX_LINE_CHARS, 5]


async def test_batcher_sends_after_a_short_delay() -> None:
    sent: list[TaskLogs] = []
    batcher = LogBatcher("a1", sent.append)
    batcher.add("stdout", "one")
    batcher.add("stderr", "two")
    assert sent == []
    for _ in range(200):
        if sent:
            break
        await asyncio.sleep(0.05)
    assert [[(line.stdtype, line.message) for line in b.lines] for b in sent] == [
        [("stdout", "one"), ("stderr", "two")]
    ]
    assert sent[0].allocation_id == "a1"

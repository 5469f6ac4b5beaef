"""Log streams as det reads them: newline-delimited `{"result": ...}` objects, read in pages, and
with `follow` kept open (polling) until the source says it is done or the client goes away."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

PAGE = 1000  # lines read per fetch
POLL_SECONDS = 0.25  # between fetches of a followed stream that found nothing new

# fetch(cursor, at most n) -> (results, the cursor after them, whether the source is done for good);
# the cursor is None on the first call
Fetch = Callable[[Any, int], Awaitable[tuple[list[dict[str, Any]], Any, bool]]]


async def results(
    fetch: Fetch, *, follow: bool, limit: int, disconnected: Callable[[], Awaitable[bool]], page: int = PAGE
) -> AsyncIterator[str]:
    """At most `limit` results (0: no limit), page by page; without `follow` it ends at the first
    short page, with `follow` when the source is done and has nothing more, or the client left."""
    sent, cursor = 0, None
    while True:
        n = min(limit - sent, page) if limit else page
        got, cursor, done = await fetch(cursor, n)
        for item in got:
            yield json.dumps({"result": item}) + "\n"
        sent += len(got)
        if limit and sent >= limit:
            return
        if not follow:
            if len(got) < n:
                return
            continue
        if not got:
            if done or await disconnected():
                return
            await asyncio.sleep(POLL_SECONDS)

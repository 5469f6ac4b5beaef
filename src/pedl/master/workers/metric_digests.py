"""The metric digester's loop: the start-up sweep, then a digest pass whenever reports arrived
(metrics/digests.py folds them)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from pedl.master.metrics.digest_queue import DigestQueue
from pedl.master.metrics.digests import digest_pass, sweep
from pedl.master.worker_passes import run_pass

if TYPE_CHECKING:
    from pedl.master.db.engine import Database

log = logging.getLogger(__name__)

PASS_SPACING = 1.0  # seconds between passes while reports keep coming


async def run_loop(db: Database, queue: DigestQueue, stop: asyncio.Event) -> None:
    """The digester: the start-up sweep, then a pass whenever reports arrived, at most one per
    PASS_SPACING seconds (sooner when the feed holds half of what it may: reports fed past that are
    dropped and read back from the database, which costs more), in a thread."""
    wake, filling = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    queue.set_waker(lambda: loop.call_soon_threadsafe(wake.set), filling=lambda: loop.call_soon_threadsafe(filling.set))
    try:
        await run_pass(sweep, db, queue)
    except Exception:  # reads fall back to the reports; new ones are still digested
        log.exception("metric digest sweep failed")
    try:
        while not stop.is_set():
            wake.clear()
            filling.clear()
            try:
                await run_pass(digest_pass, db, queue)
            except Exception:  # keep the digester alive; reads fall back to the reports
                log.exception("metric digest pass failed")
            with contextlib.suppress(TimeoutError):  # the spacing, cut short when the feed fills up
                await asyncio.wait_for(filling.wait(), timeout=PASS_SPACING)
            if not len(queue):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=60)
    finally:
        queue.set_waker(None)

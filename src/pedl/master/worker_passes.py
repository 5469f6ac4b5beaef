"""The master's background workers (control loop, provisioners, checkpoint GC, deletion, digests, retention,
idle services) run each pass in a thread. A thread cannot be cancelled, and a pass holds a database session:
were the app to dispose of the engine while a pass still ran, the pass's connection would go back to the
disposed pool and stay open (on PostgreSQL, one of its max_connections) until that pool is garbage-collected.

So a cancelled worker waits for the pass it is in (`run_pass`), and the app's stop cancels the workers and
waits, for at most a grace period, for them to end (`stop_workers`) before it disposes of the database."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

log = logging.getLogger("pedl.master")

T = TypeVar("T")


async def run_pass(fn: Callable[..., T], /, *args: object, on_cancel: Callable[[], None] | None = None) -> T:
    """`fn(*args)` in a thread. When the caller is cancelled, `on_cancel()` (a long pass's cue to stop early)
    and the pass is awaited to its end (its failure then logged, not raised) before the cancellation goes on."""
    future = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if on_cancel is not None:
            on_cancel()
        try:
            await future
        except Exception:  # the master is stopping; the pass's failure is only logged
            log.exception("a pass failed while its worker stopped")
        raise


async def stop_workers(tasks: Sequence[asyncio.Task], grace: float) -> list[asyncio.Task]:
    """Cancel the workers and wait up to `grace` seconds for the passes they are in; -> those still running
    then (named in a warning). A worker that had failed is logged."""
    for t in tasks:
        t.cancel()
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=grace)
    for t in done:
        if not t.cancelled() and t.exception() is not None:
            log.error("worker %s had failed", t.get_name(), exc_info=t.exception())
    still = sorted(pending, key=lambda t: t.get_name())
    if still:
        log.warning(
            "stopping with a pass still running after %.0f s in: %s", grace, ", ".join(t.get_name() for t in still)
        )
    return still

"""The relays open through the master's proxy: counted per task and per user (a 429 past the
bounds of `proxy:`), and closed when their task's allocation ends, checked every
`proxy.end_check_interval` in one query for all of them while any is open."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pedl.config.proxy_config import ProxyConfig
from pedl.errors import TooManyRequests
from pedl.master.context import MasterContext
from pedl.master.tasks import ProxyTarget, proxy_targets

log = logging.getLogger(__name__)

Closer = Callable[[], Awaitable[None]]
K = TypeVar("K")


@dataclass
class Relay:
    id: int
    target: ProxyTarget
    user_id: int
    closers: list[Closer] = field(default_factory=list)  # what ends it when its task ends
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def on_end(self, closer: Closer) -> None:
        self.closers.append(closer)


class ProxyRelays:
    def __init__(self, ctx: MasterContext, config: ProxyConfig) -> None:
        self.ctx = ctx
        self.config = config
        self._relays: dict[int, Relay] = {}
        self._per_task: Counter[str] = Counter()
        self._per_user: Counter[int] = Counter()
        self._ids = itertools.count(1)
        self._watcher: asyncio.Task | None = None

    def count(self, *, task_id: str | None = None, user_id: int | None = None) -> int:
        if task_id is not None:
            return self._per_task[task_id]
        return self._per_user[user_id] if user_id is not None else 0

    @contextlib.asynccontextmanager
    async def open(self, target: ProxyTarget, user_id: int) -> AsyncIterator[Relay]:
        """A relay slot for the length of the block, or TooManyRequests naming the bound."""
        if self._per_task[target.task_id] >= self.config.max_relays_per_task:
            raise TooManyRequests(
                f"task {target.task_id} already has {self.config.max_relays_per_task} open "
                "connections through the proxy (proxy.max_relays_per_task); close some and retry",
                retry_after=1,
            )
        if self._per_user[user_id] >= self.config.max_relays_per_user:
            raise TooManyRequests(
                f"you already have {self.config.max_relays_per_user} open connections through "
                "the proxy (proxy.max_relays_per_user); close some and retry",
                retry_after=1,
            )
        relay = Relay(next(self._ids), target, user_id)
        self._relays[relay.id] = relay
        self._per_task[target.task_id] += 1
        self._per_user[user_id] += 1
        self._ensure_watcher()
        try:
            yield relay
        finally:
            del self._relays[relay.id]
            _release(self._per_task, target.task_id)
            _release(self._per_user, user_id)

    def _ensure_watcher(self) -> None:
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while self._relays:
            await asyncio.sleep(self.config.end_check_interval)
            try:
                await self.check_ended()
            except Exception:  # a failed check is retried at the next interval
                log.exception("checking the proxy's relays against their tasks failed")

    async def check_ended(self) -> None:
        """Close every relay whose allocation is no longer live."""
        open_ids = {r.target.allocation_id for r in self._relays.values()}
        gone = await asyncio.to_thread(proxy_targets.ended, self.ctx, open_ids)
        for relay in [r for r in self._relays.values() if r.target.allocation_id in gone]:
            if relay.ended.is_set():
                continue
            relay.ended.set()
            for closer in relay.closers:
                with contextlib.suppress(Exception):
                    await closer()


GOING_AWAY = 1001


async def pump_until_done(
    relay: Relay,
    pumps: list[Callable[[], Awaitable[None]]],
    *,
    idle_timeout: float,
    last: list[float],
    outcome: dict[str, Any],
    silent: str,
) -> None:
    """Run a relay's pumps until the first of them, its idle timeout (no traffic since `last[0]` for
    `idle_timeout` s; `silent` names what stopped coming) or its task's end says why it stops, in
    `outcome`; then stop the rest."""
    loop = asyncio.get_running_loop()

    async def idle() -> None:
        while (left := last[0] + idle_timeout - loop.time()) > 0:
            await asyncio.sleep(left)
        outcome.update(side="idle", code=GOING_AWAY, reason=f"no {silent} for {idle_timeout:g} s (proxy.idle_timeout)")

    async def task_ended() -> None:
        await relay.ended.wait()
        outcome.update(side="task", code=GOING_AWAY, reason=f"task {relay.target.task_id} ended")

    tasks = [asyncio.ensure_future(c()) for c in (*pumps, idle, task_ended)]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _release(counter: Counter[K], key: K) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]

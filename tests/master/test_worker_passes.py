"""A stopping master waits for its workers' passes in progress before it disposes of the database: a pass's
connection would otherwise go back to the disposed pool and stay open (CI's PostgreSQL ran out of
max_connections that way: each test's master left one or two behind until a garbage collection)."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text

from pedl.master.worker_passes import run_pass, stop_workers
from pedl.master.workers import idle_tasks


def test_a_cancelled_worker_ends_after_its_pass_and_cues_it() -> None:
    release, cued, ended = threading.Event(), threading.Event(), []

    def long_pass() -> str:
        release.wait(10)
        ended.append("pass")
        return "done"

    async def main() -> None:
        assert await run_pass(lambda x: x * 2, 21) == 42
        worker = asyncio.create_task(run_pass(long_pass, on_cancel=cued.set))
        await asyncio.sleep(0.05)
        worker.cancel()
        await asyncio.sleep(0.05)
        assert cued.is_set() and not worker.done() and ended == []  # the pass still runs, the worker waits
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await worker
        assert ended == ["pass"]

    asyncio.run(main())


def test_a_pass_that_fails_while_its_worker_stops_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    def failing() -> None:
        release.wait(10)
        raise RuntimeError("disk gone")

    async def main() -> None:
        worker = asyncio.create_task(run_pass(failing))
        await asyncio.sleep(0.05)
        worker.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await worker

    with caplog.at_level(logging.ERROR, logger="pedl.master"):
        asyncio.run(main())
    assert any("disk gone" in (r.exc_text or str(r.exc_info)) for r in caplog.records), caplog.records


def test_stop_workers_waits_up_to_the_grace_and_names_those_still_running(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    async def main() -> None:
        async def idle() -> None:
            await asyncio.sleep(3600)

        async def busy() -> None:
            await run_pass(release.wait, 10)

        quick = asyncio.create_task(idle(), name="quick")
        slow = asyncio.create_task(busy(), name="slow")
        await asyncio.sleep(0.05)
        assert await stop_workers([quick, slow], grace=0.2) == [slow]
        assert quick.cancelled() and not slow.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert await stop_workers([], grace=1) == []

    with caplog.at_level(logging.WARNING, logger="pedl.master"):
        asyncio.run(main())
    assert "still running after 0 s in: slow" in caplog.text


def test_the_apps_stop_disposes_of_the_database_after_the_pass_in_progress(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = app.state.ctx
    order: list[str] = []
    holding = threading.Event()
    dispose = ctx.db.dispose

    def check(c) -> None:  # the idle worker's pass, holding a connection for a second
        if holding.is_set():
            return
        with ctx.db.read_session() as s:
            s.execute(text("select 1"))
            holding.set()
            threading.Event().wait(1.0)
        order.append("pass ended")

    monkeypatch.setattr(idle_tasks, "check", check)
    monkeypatch.setattr(ctx.db, "dispose", lambda: (order.append("disposed"), dispose())[1])
    with TestClient(app):
        assert holding.wait(10), "the idle worker's pass did not start"
    assert order == ["pass ended", "disposed"]
    assert ctx.db.engine.pool.checkedout() == 0

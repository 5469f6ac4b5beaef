"""The agent daemon: stays connected to the master, runs the tasks it is given, reports on them.

Tasks outlive lost connections; their messages wait in an outbox until the agent has re-registered.
Past the master's reconnect wait without word from it, though, the agent kills them (fencing.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic import BaseModel
from websockets.asyncio.client import ClientConnection
from websockets.frames import CloseCode

from pedl.agent import container_reattach, host_probes, port_checks
from pedl.agent.connection import (
    AgentRefused,
    Backoff,
    describe_failure,
    local_address,
    open_connection,
    receive_message,
    refusal,
    send_message,
    tls_refusal,
    ws_url,
)
from pedl.agent.credential_file import read_credential, write_credential
from pedl.agent.devices import detect_slots
from pedl.agent.fencing import CHECK_INTERVAL_S, MasterContact
from pedl.agent.options import AgentOptions
from pedl.agent.spot_watch import watch_spot
from pedl.agent.task_env import TaskHost
from pedl.agent.task_runtime import READER_DRAIN_S, AgentTask, TaskRuntime
from pedl.agent.work_dir_lock import lock_work_dir
from pedl.common.agent_protocol import (
    CheckPort,
    Heartbeat,
    KillTask,
    MasterMessage,
    Register,
    Registered,
    SlotInfo,
    SpotInterruption,
    StartTask,
    TaskExited,
)
from pedl.version import __version__

__all__ = ["Agent", "AgentRefused", "run_agent"]

log = logging.getLogger(__name__)

REGISTER_TIMEOUT_S = 30.0
SHUTDOWN_FLUSH_S = 3.0  # how long a stopping agent tries to deliver its tasks' last messages
MIN_HEARTBEAT_S = 0.05


class Agent:
    """One agent, runnable in-process: `await Agent(options).run(stop_event)`."""

    def __init__(
        self,
        options: AgentOptions,
        *,
        slots: list[SlotInfo] | None = None,
        shutdown_grace_period: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = options
        self.slots = detect_slots(options.slots) if slots is None else slots
        self.shutdown_grace_period = shutdown_grace_period
        self._host = TaskHost(
            master_url=options.master_url,
            agent_id=options.id,
            work_dir=options.work_path,
            slots={s.id: s for s in self.slots},
            master_cert=options.cert_path,
            ssl_context=options.ssl_context,
        )
        self.tasks: dict[str, AgentTask] = {}  # allocation id -> task not yet exited
        self._task_runs: dict[str, asyncio.Task[None]] = {}
        self._outbox: deque[BaseModel] = deque()
        self._outbox_ready = asyncio.Event()
        self._ws: ClientConnection | None = None  # set while registered
        self._was_registered = False  # in the current connection attempt, for the log line
        self._contact = MasterContact(monotonic)
        self._fence_grace = KillTask.model_fields["grace_period"].default  # the master's, once registered
        self._side_tasks: set[asyncio.Task[None]] = set()  # port checks under way

    @property
    def connected(self) -> bool:
        """Registered with the master right now."""
        return self._ws is not None

    def held_allocations(self) -> list[str]:
        """Allocations the master must not consider lost: running, or whose exit is undelivered."""
        undelivered = {m.allocation_id for m in self._outbox if isinstance(m, TaskExited)}
        return sorted(set(self.tasks) | undelivered)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve the master until `stop` is set; raises AgentRefused if the master refuses us."""
        log.info(
            "pedl agent %s starting: master %s, %d %s slot(s), work dir %s",
            self.options.id,
            self.options.master_url,
            len(self.slots),
            self.slots[0].type if self.slots else "no",
            self.options.work_path,
        )
        await self._probe_host()
        link = asyncio.create_task(self._stay_connected())
        watch = asyncio.create_task(self._watch_contact())
        stopped = asyncio.create_task(stop.wait())
        spot = None
        if self.options.spot_watch:
            spot = asyncio.create_task(
                watch_spot(
                    self.options.imds_url or "",
                    self.options.spot_poll_interval,
                    lambda n: self._enqueue(
                        SpotInterruption(action=str(n.get("action", "terminate")), time=str(n.get("time", "")))
                    ),
                )
            )
        try:
            await asyncio.wait({link, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if link.done():
                link.result()  # only AgentRefused ends the link by itself
        finally:
            stopped.cancel()
            watch.cancel()
            if spot is not None:
                spot.cancel()
            await self._shut_down(link)

    async def _probe_host(self) -> None:
        """What tasks this host can run (host_probes.py), told to the master in `register`; with Docker,
        the containers an earlier run of this agent left go on as this run's tasks or report their exit."""
        self._host = dataclasses.replace(self._host, no_task_namespace=await host_probes.task_namespace_problem())
        problem = await host_probes.container_problem(self.options.container_runtime)
        if problem is None:
            await container_reattach.take_up(self.options.id, self.options.work_path, self._enqueue, self._begin_task)
            log.info("tasks that name an image run in Docker containers")
        else:
            log.info("tasks that name an image are not for this agent (%s)", problem)
        self._host = dataclasses.replace(self._host, no_containers=problem)

    # connection

    async def _stay_connected(self) -> None:
        backoff = Backoff()
        url = ws_url(self.options.master_url)
        while True:
            self._was_registered = False
            self.check_master_contact()  # tasks the master has given away die before we reconnect
            try:
                credential = await asyncio.to_thread(read_credential, self.options.credential_path)
                ws = await open_connection(
                    self.options.master_url, self.options.token, self.options.ssl_context, credential=credential
                )
                try:
                    await self._session(ws, backoff)
                finally:
                    # also on shutdown (cancelled): the master sees "going away", not an error
                    await ws.close(CloseCode.GOING_AWAY, "agent stopping")
            except Exception as exc:
                refused = refusal(exc, self.options.id, self.options.credential_path) or tls_refusal(
                    exc, self.options.master_url, self.options.cert_path
                )
                if refused is not None:
                    log.error("%s", refused)
                    raise refused from exc
                delay = backoff.next_delay()
                what = "lost the connection to" if self._was_registered else "no connection to"
                log.warning(
                    "agent %s: %s the master at %s (attempt %d): %s; retrying in %.1f s",
                    self.options.id,
                    what,
                    url,
                    backoff.attempts,
                    describe_failure(exc),
                    delay,
                )
                await asyncio.sleep(delay)

    async def _session(self, ws: ClientConnection, backoff: Backoff) -> None:
        """Register, then serve until the connection fails (always ends with an exception)."""
        await send_message(
            ws,
            Register(
                agent_id=self.options.id,
                hostname=self.options.hostname,
                address=local_address(ws),
                resource_pool=self.options.resource_pool,
                slots=self.slots,
                version=__version__,
                running_allocations=self.held_allocations(),
                container_runtime="docker" if self._host.no_containers is None else "",
            ),
        )
        registered = await asyncio.wait_for(self._await_registered(ws), REGISTER_TIMEOUT_S)
        if registered.credential:
            # first thing: the master keeps only its digest, and this id is admitted with nothing else now
            await asyncio.to_thread(write_credential, self.options.credential_path, registered.credential)
            log.info(
                "agent %s: the master issued it a credential of its own, kept in %s",
                self.options.id,
                self.options.credential_path,
            )
        backoff.reset()
        self._contact.reconnect_wait = registered.reconnect_wait
        if registered.kill_grace_period is not None:
            self._fence_grace = registered.kill_grace_period
        log.info(
            "agent %s registered with the master (%d slot(s), %d allocation(s) held)",
            self.options.id,
            len(self.slots),
            len(self.held_allocations()),
        )
        for allocation_id in registered.kill_unknown:
            if allocation_id in self.tasks:
                self.tasks[allocation_id].kill(
                    KillTask.model_fields["grace_period"].default, "the master has ended this allocation"
                )
        interval = self.options.heartbeat_interval or registered.heartbeat_interval
        self._ws = ws
        self._was_registered = True
        self._outbox_ready.set()  # flush what piled up while disconnected
        loops = [self._receive_loop(ws), self._send_loop(ws), self._heartbeat_loop(ws, max(interval, MIN_HEARTBEAT_S))]
        if registered.reconnect_wait is not None:
            # pongs tell the agent the master still hears it, even when the master has nothing to say
            loops.append(self._ping_loop(ws, max(min(interval, registered.reconnect_wait / 4), MIN_HEARTBEAT_S)))
        try:
            await _first_failure(*loops)
        finally:
            self._ws = None

    async def _await_registered(self, ws: ClientConnection) -> Registered:
        while True:
            msg = await receive_message(ws)
            self._heard_from_master()
            if isinstance(msg, Registered):
                return msg
            if msg is not None:
                self._handle(msg)

    async def _receive_loop(self, ws: ClientConnection) -> None:
        while True:
            msg = await receive_message(ws)
            self._heard_from_master()
            if msg is not None:
                self._handle(msg)

    async def _send_loop(self, ws: ClientConnection) -> None:
        while True:
            while self._outbox:
                await send_message(ws, self._outbox[0])
                # dropped only once sent: a message cut off by a lost connection goes again
                self._outbox.popleft()
            self._outbox_ready.clear()
            await self._outbox_ready.wait()

    async def _heartbeat_loop(self, ws: ClientConnection, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await send_message(ws, Heartbeat(running_allocations=self.held_allocations()))

    async def _ping_loop(self, ws: ClientConnection, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            pong = asyncio.ensure_future(await ws.ping())  # the Future websockets gives, typed as an Awaitable
            pong.add_done_callback(self._pong)

    def _pong(self, waiter: asyncio.Future[float]) -> None:
        if not waiter.cancelled() and waiter.exception() is None:
            self._heard_from_master()

    # fencing

    def check_master_contact(self) -> bool:
        """Kill every task when the master has not been heard from for longer than its reconnect
        wait: it has declared this agent lost and restarted them elsewhere. True when it did."""
        if not self._contact.overdue():
            return False
        self._contact.fenced()
        reason = (
            f"no word from the master for {self._contact.silence():.1f} s, more than its reconnect wait "
            f"of {self._contact.reconnect_wait:g} s: the master has declared this agent lost and "
            f"restarted its tasks elsewhere"
        )
        log.warning("agent %s: %s; killing %d task(s)", self.options.id, reason, len(self.tasks))
        for task in list(self.tasks.values()):
            task.kill(self._fence_grace, reason)
        return True

    def _heard_from_master(self) -> None:
        # first the silence this ends: after SIGSTOP/SIGCONT the first thing read may be long overdue
        self.check_master_contact()
        self._contact.heard()

    async def _watch_contact(self) -> None:
        while True:
            self.check_master_contact()
            await asyncio.sleep(CHECK_INTERVAL_S)

    # tasks

    def _handle(self, msg: MasterMessage) -> None:
        if isinstance(msg, StartTask):
            self._start_task(msg)
        elif isinstance(msg, CheckPort):
            self._spawn(self._check_port(msg))
        elif isinstance(msg, KillTask):
            task = self.tasks.get(msg.allocation_id)
            if task is not None:
                task.kill(msg.grace_period, msg.reason)
            elif not self._exit_pending(msg.allocation_id):
                # the master waits for an exit that this agent can no longer produce; end it
                self._enqueue(
                    TaskExited(allocation_id=msg.allocation_id, exit_code=None, reason="not running on this agent")
                )

    def _start_task(self, spec: StartTask) -> None:
        if spec.allocation_id in self.tasks or self._exit_pending(spec.allocation_id):
            log.warning("ignoring a second start_task for allocation %s", spec.allocation_id)
            return
        self._begin_task(TaskRuntime(spec, self._host, self._enqueue))

    def _begin_task(self, runtime: AgentTask) -> None:
        """Run a task, started now or taken up from an earlier run of this agent, as one of this agent's."""
        self.tasks[runtime.allocation_id] = runtime
        self._task_runs[runtime.allocation_id] = asyncio.create_task(self._run_task(runtime))

    async def _run_task(self, runtime: AgentTask) -> None:
        try:
            await runtime.run()
        except Exception as exc:  # a bug must still end the task for the master
            log.exception("task %s crashed the agent's runtime", runtime.allocation_id)
            if not runtime.exited:
                self._enqueue(
                    TaskExited(
                        allocation_id=runtime.allocation_id, exit_code=None, reason=f"internal agent error: {exc!r}"
                    )
                )
        finally:
            self.tasks.pop(runtime.allocation_id, None)
            self._task_runs.pop(runtime.allocation_id, None)

    async def _check_port(self, msg: CheckPort) -> None:
        self._enqueue(await port_checks.answer(msg, self.tasks.get(msg.allocation_id)))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    def _exit_pending(self, allocation_id: str) -> bool:
        return any(isinstance(m, TaskExited) and m.allocation_id == allocation_id for m in self._outbox)

    def _enqueue(self, msg: BaseModel) -> None:
        self._outbox.append(msg)
        self._outbox_ready.set()

    # shutdown

    async def _shut_down(self, link: asyncio.Task[None]) -> None:
        """Kill the tasks (grace period), try to report their exits, then close the socket."""
        runs = list(self._task_runs.values())
        for task in list(self.tasks.values()):
            task.kill(self.shutdown_grace_period, "the agent is shutting down")
        if runs:
            _, stuck = await asyncio.wait(runs, timeout=self.shutdown_grace_period + READER_DRAIN_S + 5.0)
            for run in stuck:
                run.cancel()
        if not link.done():
            for _ in range(int(SHUTDOWN_FLUSH_S / 0.05)):
                if not self._outbox or not self.connected:
                    break
                await asyncio.sleep(0.05)
            link.cancel()
        await asyncio.wait({link})
        log.info("pedl agent %s stopped", self.options.id)


def run_agent(options: AgentOptions) -> None:
    """Run an agent until SIGINT/SIGTERM. Raises AgentRefused when the master refuses it, and
    WorkDirInUse, before anything else, when another agent on this host has its work dir."""
    with lock_work_dir(options.work_path, options.id, default_work_dir=options.work_dir_is_default):
        asyncio.run(_main(options))


async def _main(options: AgentOptions) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await Agent(options).run(stop)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _first_failure(*coroutines: Coroutine[Any, Any, None]) -> None:
    """Run loops that only end by failing; when one fails, stop the others and raise its error."""
    tasks = [asyncio.create_task(c) for c in coroutines]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)

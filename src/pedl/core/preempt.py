"""core.preempt: has the master asked this task to stop? (Then checkpoint and exit cleanly.)

A background thread long-polls the master's preemption signal, so `should_preempt()` only reads a
flag. The signal is acknowledged the first time the user sees it, as Determined does.
"""

from __future__ import annotations

import abc
import logging
import threading
import time

from pedl.core.distributed import DistributedContext
from pedl.core.master_session import MasterSession, RetryPolicy

logger = logging.getLogger("pedl.core")

LONG_POLL_SECONDS = 60
MIN_POLL_INTERVAL_S = 1.0


class PreemptContext(abc.ABC):
    """`MasterPreemptContext` on the cluster; `LocalPreemptContext` (never preempted) off it.

    With several workers should_preempt() is a collective call, as in Determined: the chief
    reads the master's signal and broadcasts its answer, so every rank gets the same decision at
    the same step and they all stop together. Hence every rank must call it at the same points of
    the training loop (the same number of times); a rank that skips a call leaves the others
    waiting in the broadcast until the torch.distributed timeout.
    """

    def __init__(self, distributed: DistributedContext) -> None:
        self._distributed = distributed
        self._acknowledged = False

    @abc.abstractmethod
    def start(self) -> None:
        """Begin watching for the signal (init's context manager does this)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop watching."""

    def should_preempt(self, auto_ack: bool = True) -> bool:
        """True once the master wants this task to stop; checkpoint then exit with status 0.

        With auto_ack (the default) the first True is acknowledged to the master, telling it the
        task will exit by itself rather than needing to be killed. Collective: see the class.
        """
        preempt = self._chief_should_preempt() if self._distributed.is_chief else False
        preempt = bool(self._distributed.broadcast(preempt))
        if preempt and auto_ack and self._distributed.is_chief and not self._acknowledged:
            self.acknowledge_preemption_signal()
        return preempt

    def acknowledge_preemption_signal(self) -> None:
        """Tell the master this task will stop by itself (the chief does; elsewhere a no-op)."""
        self._acknowledged = True
        if self._distributed.is_chief:
            self._send_ack()

    @abc.abstractmethod
    def _chief_should_preempt(self) -> bool: ...

    @abc.abstractmethod
    def _send_ack(self) -> None: ...


class LocalPreemptContext(PreemptContext):
    """Off-cluster twin: nobody preempts a laptop run."""

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def _chief_should_preempt(self) -> bool:
        return False

    def _send_ack(self) -> None:
        pass


class MasterPreemptContext(PreemptContext):
    def __init__(
        self, distributed: DistributedContext, session: MasterSession, watch_session: MasterSession, allocation_id: str
    ) -> None:
        super().__init__(distributed)
        self._session = session
        self._allocation_id = allocation_id
        self._watcher = PreemptionWatcher(watch_session, allocation_id) if distributed.is_chief else None

    def start(self) -> None:
        if self._watcher is not None:
            self._watcher.start_once()

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def _chief_should_preempt(self) -> bool:
        assert self._watcher is not None
        self._watcher.start_once()
        return self._watcher.should_preempt()

    def _send_ack(self) -> None:
        self._session.post(f"/api/v1/allocations/{self._allocation_id}/signals/ack_preemption", {})


class PreemptionWatcher:
    """Long-polls `GET /api/v1/allocations/{aid}/signals/preemption` until it answers true.

    The first poll does not wait (timeout_seconds=0) so the flag is right from the start; later
    polls wait up to LONG_POLL_SECONDS on the master. Errors back off (0.5 s doubling to 30 s) and
    poll again for as long as the task runs.
    """

    def __init__(
        self,
        session: MasterSession,
        allocation_id: str,
        long_poll_seconds: int = LONG_POLL_SECONDS,
        backoff: RetryPolicy | None = None,
    ) -> None:
        self._session = session
        self._path = f"/api/v1/allocations/{allocation_id}/signals/preemption"
        self._long_poll_seconds = long_poll_seconds
        self._backoff = backoff or RetryPolicy()
        self._preempt = threading.Event()
        self._first_answer = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start_once(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="pedl-preemption-watcher", daemon=True)
                self._thread.start()

    def should_preempt(self) -> bool:
        # Wait for the first, non-waiting poll (or its failure) so an already-pending preemption
        # is seen on the first call. The wait is bounded: the thread sets the flag either way.
        self._first_answer.wait(timeout=15)
        return self._preempt.is_set()

    def stop(self) -> None:
        self._stopping.set()
        self._first_answer.set()
        # The thread may sit in a long poll; it is a daemon and will not report after this.
        self._session.close()

    def _run(self) -> None:
        timeout = 0
        delay = self._backoff.initial_s
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                answer = (
                    self._session.get(
                        self._path, params={"timeout_seconds": timeout}, timeout_s=timeout + 10, retry=False
                    )
                    or {}
                )
            except Exception as exc:  # keep watching, whatever went wrong
                if self._stopping.is_set():
                    return
                self._first_answer.set()
                log = logger.warning if delay == self._backoff.initial_s else logger.debug
                log("preemption poll failed: %s; polling again in %.1f s", exc, delay)
                self._stopping.wait(delay)
                delay = min(delay * 2, self._backoff.max_s)
                continue
            delay = self._backoff.initial_s
            if isinstance(answer, dict) and answer.get("preempt"):
                self._preempt.set()
                self._first_answer.set()
                return
            self._first_answer.set()
            if timeout and time.monotonic() - started < MIN_POLL_INTERVAL_S:
                # A master that answers long polls at once would otherwise make this thread spin.
                self._stopping.wait(MIN_POLL_INTERVAL_S)
            timeout = self._long_poll_seconds

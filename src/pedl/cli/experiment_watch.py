"""Watching an experiment: `wait` polls its state; `create --follow` also streams every trial's logs
with a `[trial N]` prefix. Both ride out a master restart once the master has answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pedl.cli.client import MasterClient
from pedl.cli.log_stream import RECONNECT_FOR, LinePrinter, stream_trial_logs
from pedl.cli.output import fmt_state
from pedl.errors import PedlError, Unavailable

COMPLETED = "STATE_COMPLETED"
TERMINAL_STATES = frozenset({"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"})
LOG_DRAIN_SECONDS = 30.0  # after the experiment ends, how long its trials' streams may still flush
FOLLOW_INTERVAL = 2.0  # seconds between polls of the experiment and its trials while following


class ExperimentPoller:
    """GET /api/v1/experiments/{id}; after a first answer, connection errors are retried for a while."""

    def __init__(self, client: MasterClient, experiment_id: int) -> None:
        self.client = client
        self.experiment_id = experiment_id
        self._answered = False
        self._lost_since: float | None = None

    def poll(self) -> dict[str, Any] | None:
        """The experiment object, or None while a once-reachable master cannot be reached."""
        try:
            body = self.client.get(f"/api/v1/experiments/{self.experiment_id}")
        except Unavailable:
            if not self._answered:
                raise
            self._lost_since = self._lost_since or time.monotonic()
            if time.monotonic() - self._lost_since > RECONNECT_FOR:
                raise
            return None
        self._answered, self._lost_since = True, None
        return body.get("experiment") or {}

    def trials(self) -> list[dict[str, Any]]:
        try:
            return self.client.paginate(f"/api/v1/experiments/{self.experiment_id}/trials", "trials")
        except Unavailable:
            return []


def wait_for_experiment(client: MasterClient, experiment_id: int, interval: float,
                        on_state: Callable[[str], None], sleep: Callable[[float], None] = time.sleep) -> str:
    """Poll until a terminal state and return it; `on_state` sees every poll's state."""
    poller = ExperimentPoller(client, experiment_id)
    while True:
        exp = poller.poll()
        state = "master unreachable, retrying" if exp is None else str(exp.get("state") or "")
        on_state(state)
        if state in TERMINAL_STATES:
            return state
        sleep(interval)


class _TrialLogThread(threading.Thread):
    def __init__(self, client: MasterClient, trial_id: int, printer: LinePrinter) -> None:
        super().__init__(name=f"trial-{trial_id}-logs", daemon=True)
        self.client, self.trial_id, self.printer = client, trial_id, printer

    def run(self) -> None:
        prefix = f"[trial {self.trial_id}] "
        try:
            stream_trial_logs(self.client, self.trial_id, lambda r: self.printer.log(r, prefix),
                              follow=True)
        except PedlError as exc:
            self.printer.line(f"{prefix}(logs unavailable: {exc.message})")


def follow_experiment(client: MasterClient, experiment_id: int, *, interval: float | None = None,
                      printer: LinePrinter | None = None,
                      sleep: Callable[[float], None] = time.sleep) -> str:
    """Print state changes of the experiment and its trials, and every trial's logs, until the
    experiment reaches a terminal state; returns that state."""
    printer = printer or LinePrinter()
    interval = FOLLOW_INTERVAL if interval is None else interval
    poller = ExperimentPoller(client, experiment_id)
    threads: dict[int, _TrialLogThread] = {}
    exp_state: str | None = None
    trial_states: dict[int, str] = {}
    while True:
        exp = poller.poll()
        if exp is not None:
            state = str(exp.get("state") or "")
            if state != exp_state:
                printer.line(f"Experiment {experiment_id} is {fmt_state(state)}")
                exp_state = state
            for trial in sorted(poller.trials(), key=lambda t: int(t["id"])):
                tid = int(trial["id"])
                tstate = str(trial.get("state") or "")
                if trial_states.get(tid) != tstate:
                    printer.line(f"[trial {tid}] is {fmt_state(tstate)}")
                    trial_states[tid] = tstate
                if tid not in threads:
                    threads[tid] = _TrialLogThread(client, tid, printer)
                    threads[tid].start()
            if exp_state in TERMINAL_STATES:
                break
        sleep(interval)
    deadline = time.monotonic() + LOG_DRAIN_SECONDS
    for thread in threads.values():
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert exp_state is not None
    return exp_state

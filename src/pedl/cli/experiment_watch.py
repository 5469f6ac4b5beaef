"""Watching an experiment: `wait` polls its state; `create --follow` prints its events and every
trial's logs (with a `[trial N]` prefix) in the order they happened. Both ride out a master restart
once the master has answered."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pedl.cli.client import MasterClient
from pedl.cli.follow_merge import FollowMerge
from pedl.cli.log_stream import RECONNECT_FOR, LinePrinter, log_id, log_text, stream_trial_logs
from pedl.cli.output import epoch_seconds, fmt_enum
from pedl.errors import NotFound, PedlError, Unavailable

COMPLETED = "STATE_COMPLETED"
TERMINAL_STATES = frozenset({"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR", "STATE_DELETED"})
LOG_DRAIN_SECONDS = 30.0  # after the experiment ends, how long its trials' streams may still flush
FOLLOW_INTERVAL = 1.0  # seconds between reads of the experiment and its events while following
EVENTS_PAGE = 500  # the most events the master returns at once: a full page means more may follow


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


def wait_for_experiment(
    client: MasterClient,
    experiment_id: int,
    interval: float,
    on_state: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll until a terminal state and return it; `on_state` sees every poll's state."""
    poller = ExperimentPoller(client, experiment_id)
    while True:
        exp = poller.poll()
        state = "master unreachable, retrying" if exp is None else str(exp.get("state") or "")
        on_state(state)
        if state in TERMINAL_STATES:
            return state
        sleep(interval)


Event = tuple[float, int, str]  # (when it happened, its id, the line to print)


def event_text(event: dict[str, Any]) -> str:
    """`[trial 3] is RUNNING (allocation 1.3.1 started)`, `[trial 3] waiting: ...`, `Experiment 1 is
    COMPLETED (the searcher finished: ...)`: a change of state with its reason, or the message alone."""
    ident = event.get("entityId")
    trial = event.get("entityType") == "trial"
    subject = f"[trial {ident}]" if trial else f"Experiment {ident}"
    message = str(event.get("message") or "")
    state = fmt_enum(event.get("toState"))
    if not state:
        return f"{subject} {message}" if trial else f"{subject}: {message}"
    return f"{subject} is {state}" + (f" ({message})" if message and message.lower() != state.lower() else "")


class EventFeed:
    """What happened to an experiment and its trials since the last read: the master's events
    (GET /api/v1/experiments/{id}/events), or, from a master without that route, the changes of state
    seen by polling (trials before their experiment, timed by this machine's clock)."""

    def __init__(self, client: MasterClient, poller: ExperimentPoller) -> None:
        self.client, self.poller = client, poller
        self.trial_ids: set[int] = set()
        self._after = 0  # the last event id read
        self._events_route = True
        self._first = True
        self._shown: dict[str, str] = {}  # without the events route: the state last shown per entity
        self._seq = 0

    def read(self, exp: dict[str, Any]) -> list[Event]:
        """Raises Unavailable when the master could not be read; nothing is skipped then."""
        if self._events_route:
            try:
                events = self._new_events()
            except NotFound:
                self._events_route = False
            else:
                return self._from_events(exp, events)
        return self._from_states(exp)

    def _new_events(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            body = self.client.get(f"/api/v1/experiments/{self.poller.experiment_id}/events", after=self._after)
            batch = body.get("events") or []
            out += batch
            self._after = max([self._after, *(int(e.get("id") or 0) for e in batch)])
            if len(batch) < EVENTS_PAGE:
                return out

    def _from_events(self, exp: dict[str, Any], events: list[dict[str, Any]]) -> list[Event]:
        out: list[Event] = []
        if self._first:
            self._first = False
            mine = [e for e in events if e.get("entityType") == "experiment"]
            if not any(e.get("toState") and not e.get("fromState") for e in mine):
                # a master whose creation event names no state: the state it was created in comes first
                change = next((e for e in mine if e.get("fromState")), None)
                state = fmt_enum(change["fromState"] if change else exp.get("state"))
                out.append(
                    (
                        epoch_seconds(exp.get("startTime")) or time.time(),
                        -1,
                        f"Experiment {self.poller.experiment_id} is {state}",
                    )
                )
        for event in events:
            if event.get("entityType") == "trial":
                self.trial_ids.add(int(event["entityId"]))
            when = epoch_seconds(event.get("time"))
            out.append((time.time() if when is None else when, int(event.get("id") or 0), event_text(event)))
        return out

    def _from_states(self, exp: dict[str, Any]) -> list[Event]:
        now, out = time.time(), []
        trials = sorted(self.poller.trials(), key=lambda t: int(t["id"]))
        self.trial_ids.update(int(t["id"]) for t in trials)
        seen = [(f"[trial {t['id']}]", str(t.get("state") or "")) for t in trials]
        for subject, state in [*seen, (f"Experiment {self.poller.experiment_id}", str(exp.get("state") or ""))]:
            if self._shown.get(subject) != state:
                self._shown[subject] = state
                self._seq += 1
                out.append((now, self._seq, f"{subject} is {fmt_enum(state)}"))
        return out


class _TrialLogThread(threading.Thread):
    def __init__(self, client: MasterClient, trial_id: int, merge: FollowMerge) -> None:
        super().__init__(name=f"trial-{trial_id}-logs", daemon=True)
        self.client, self.trial_id, self.merge = client, trial_id, merge

    def run(self) -> None:
        prefix = f"[trial {self.trial_id}] "

        def add(record: dict[str, Any]) -> None:
            text = log_text(record, prefix)
            if text:
                when = epoch_seconds(record.get("timestamp"))
                self.merge.add_line(time.time() if when is None else when, log_id(record) or 0, text)

        try:
            stream_trial_logs(self.client, self.trial_id, add, follow=True)
        except PedlError as exc:
            self.merge.add_line(time.time(), 0, f"{prefix}(logs unavailable: {exc.message})")


def follow_experiment(
    client: MasterClient,
    experiment_id: int,
    *,
    interval: float | None = None,
    printer: LinePrinter | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Print the events of the experiment and its trials, and every trial's logs, in the order they
    happened, until the experiment reaches a terminal state; returns that state."""
    printer = printer or LinePrinter()
    interval = FOLLOW_INTERVAL if interval is None else interval
    merge = FollowMerge(printer.line)
    poller = ExperimentPoller(client, experiment_id)
    feed = EventFeed(client, poller)
    threads: dict[int, _TrialLogThread] = {}
    state = ""
    try:
        while True:
            exp = poller.poll()
            if exp is not None:
                began = merge.clock()
                try:
                    merge.add_events(feed.read(exp), read_began=began)
                except Unavailable:
                    exp = None  # read again: the events up to its end are still to come
                for tid in sorted(feed.trial_ids - threads.keys()):
                    threads[tid] = _TrialLogThread(client, tid, merge)
                    threads[tid].start()
            if exp is not None:
                state = str(exp.get("state") or "")
                if state in TERMINAL_STATES:
                    break
            merge.release()
            sleep(interval)
        merge.events_complete()
        deadline = time.monotonic() + LOG_DRAIN_SECONDS
        for thread in threads.values():
            while thread.is_alive() and time.monotonic() < deadline:
                thread.join(timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                merge.release()
    finally:
        merge.flush()
    return state

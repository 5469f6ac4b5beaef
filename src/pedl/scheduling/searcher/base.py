"""The searcher interface and the bookkeeping every searcher shares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrialRequest:
    request_id: str
    hparams: dict[str, Any]
    seed: int


@dataclass
class SearcherActions:
    create: list[TrialRequest] = field(default_factory=list)
    stop: list[str] = field(default_factory=list)  # request ids to stop early
    shutdown: bool = False

    def extend(self, other: SearcherActions) -> SearcherActions:
        self.create += other.create
        self.stop += other.stop
        self.shutdown = self.shutdown or other.shutdown
        return self


class Searcher:
    """Base: trials are handed out from `_next_hparams` until it returns None; the experiment is
    done when every created trial has closed. `max_concurrent` (0 = no limit) caps live trials.

    `room` (None = no cap) is how many live trials the master has room for now (the pool's capacity,
    a per-pass batch). It is not state and decides nothing: it only delays creation, so a trial not
    created now is created, with the same index and hyperparameters, when `top_up` or a close finds
    room."""

    def __init__(
        self,
        *,
        seed: int,
        max_concurrent: int = 0,
        state: dict[str, Any] | None = None,
        smaller_is_better: bool = True,
        room: int | None = None,
    ) -> None:
        self.seed = seed
        self.max_concurrent = max_concurrent
        self.room = room
        self.smaller_is_better = smaller_is_better
        state = state or {}
        self.created: int = state.get("created", 0)
        self.closed: list[str] = list(state.get("closed", []))
        self.live: list[str] = list(state.get("live", []))
        self.exhausted: bool = state.get("exhausted", False)
        self.best: dict[str, float] = dict(state.get("best", {}))

    # -- subclasses --
    def _next_hparams(self, index: int) -> dict[str, Any] | None:
        raise NotImplementedError

    def total_trials(self) -> int | None:
        return None

    def stop_reasons(self) -> dict[str, str]:
        """request id -> why this searcher stopped that trial early; empty for those that never do."""
        return {}

    # -- shared --
    def state(self) -> dict[str, Any]:
        # copies: a saved state must not change when the searcher moves on
        return {
            "created": self.created,
            "closed": list(self.closed),
            "live": list(self.live),
            "exhausted": self.exhausted,
            "best": dict(self.best),
        }

    def _has_room(self) -> bool:
        return self.room is None or len(self.live) < self.room

    def _fill(self) -> SearcherActions:
        actions = SearcherActions()
        total = self.total_trials()
        while (
            not self.exhausted
            and self._has_room()
            and (self.max_concurrent <= 0 or len(self.live) < self.max_concurrent)
        ):
            hp = self._next_hparams(self.created)
            if hp is None:
                self.exhausted = True
                break
            request_id = f"r{self.created}"
            actions.create.append(TrialRequest(request_id, hp, (self.seed + 7919 * self.created) % (2**31)))
            self.live.append(request_id)
            self.created += 1
        if total is not None and self.created >= total:
            self.exhausted = True  # known now, so the master's top-up pass can skip this experiment
        if self.exhausted and not self.live:
            actions.shutdown = True
        return actions

    def initial(self) -> SearcherActions:
        return self._fill()

    def top_up(self) -> SearcherActions:
        """Create the trials that `room` allows now (after the pool grew)."""
        return self._fill()

    def on_validation(
        self, request_id: str, metric: float, steps: int, metrics: Mapping[str, Any] | None = None
    ) -> SearcherActions:
        """`steps`: the report's steps_completed; `metrics`: the whole report (a time_metric's value)."""
        prev = self.best.get(request_id)
        better = prev is None or (metric < prev if self.smaller_is_better else metric > prev)
        if better:
            self.best[request_id] = metric
        return SearcherActions()

    def on_trial_closed(self, request_id: str) -> SearcherActions:
        if request_id in self.live:
            self.live.remove(request_id)
            self.closed.append(request_id)
        return self._fill()

    def on_trial_exited_early(self, request_id: str, reason: str) -> SearcherActions:
        return self.on_trial_closed(request_id)

    # -- progress --
    def total_length(self, done: Mapping[str, float]) -> float:
        """The length this search trains in all, in trial lengths (units of searcher.max_length,
        every trial's target): one per trial it will create. `done` is as in `progress`."""
        return float(self.total_trials() or 0)

    def progress(self, done: Mapping[str, float] | None = None) -> float:
        """How far the search is, 0..1: the length its trials completed against `total_length`.
        `done` maps a created trial's request id to the share of its target it completed (0..1;
        the master counts a trial that completed as 1). Without it, a closed trial counts as done
        and a live one as not started."""
        if done is None:
            done = dict.fromkeys(self.closed, 1.0)
        total = self.total_length(done)
        if total <= 0:
            return 0.0
        return min(1.0, sum(min(1.0, max(0.0, f)) for f in done.values()) / total)

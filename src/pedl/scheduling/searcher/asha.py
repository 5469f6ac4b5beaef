"""The adaptive_asha searcher: asynchronous successive halving (Li et al., 2018) in Determined's
stopping variant, run as several brackets of different aggressiveness, chosen by `mode`.

How it decides, following Determined's `asha_stopping.go` and `adaptive_asha.go`:

- **Rungs.** A bracket of R rungs has milestones `max(1, floor(max_length / divisor**(R-1-k)))`
  for k = 0..R-1, so its top rung is `max_length` (divisor 4, 5 rungs, 256 batches: 1, 4, 16, 64,
  256).
- **Stopping, not pausing.** Trials are never paused for promotion. When a trial's validation first
  reaches a milestone (`steps >= length`), its metric joins that rung's table, sorted best first;
  a new metric ties ahead of equal ones. With n entries, the first `max(1, floor(n / divisor))`
  continue and any other trial is stopped. This is the asynchronous rule: the decision uses only
  what has been recorded so far. With fewer than `divisor` entries only the best so far goes on, so
  the first trial to reach a rung always continues (the paper's ASHA would make it wait for
  `divisor` results; the stopping variant cannot wait, so it lets the leader through). A
  validation that passes several milestones at once is recorded at each of them in turn. A trial at
  the top rung is recorded and left to finish on its own (it has reached `max_length`).
- **Brackets.** `max_rungs` is first capped, as Determined does, at
  `floor(log_divisor(max_length)) + 1` and `floor(log_divisor(max_trials)) + 1`; call it R. Mode
  `aggressive` runs one bracket of R rungs; `standard` runs brackets of `(R-1)//2 + 1` .. R rungs;
  `conservative` runs brackets of 1 .. R rungs (a 1-rung bracket is plain random search). Brackets
  are ordered most rungs first. Bracket b of `r_b` rungs gets
  `max(1, floor(max_trials * w_b / sum(w)))` trials with `w_b = divisor**(r_b-1) / r_b` (roughly
  equal training budget per bracket); what rounding leaves goes to the first bracket.
- **Concurrency.** Each bracket has its own cap on live trials: with `max_concurrent_trials: 0`
  Determined's default, `max(trials of the last bracket, floor(divisor))` per bracket (standard
  mode, 16 trials, 256 batches: brackets of 3 and 2 rungs, 12 and 4 trials, 4 live each); otherwise
  `max(max_concurrent_trials, brackets)` split evenly, the remainder to the first brackets. Unlike
  Determined, a positive `max_concurrent_trials` is also a hard cap on live trials over all
  brackets, so it holds even when it is smaller than the number of brackets. A bracket replaces a
  trial when one of its trials closes (stopped, completed or failed), until it has created its
  share. The master's `room` (its pool's capacity, see `Searcher`) caps live trials over all
  brackets as well; it enters no bracket's size or concurrency, it only delays creation.
- **Failures.** A trial that exits early (error, kill) is entered at its next rung with no metric,
  ranked worst, so it counts toward n, as in Determined.
- **Progress** is length, not trial count (Determined counts trials, with 20% overhead): the budget
  is `max_trials` trial lengths, less the part of `max_length` each stopped trial will never train.

**Time.** With Determined 0.38's `time_metric` / `max_time` in place of `max_length`, a trial's
place on the rungs is the value of `time_metric` in its validation report, not the report's
steps_completed, and the rungs are laid out over `max_time`. A report without a finite number there
changes the trial's best metric but not its rung.

Hyperparameters are sampled as RandomSearcher does (one generator per trial index), so a searcher
restored from `state()` creates exactly the trials and takes exactly the decisions the original
would have.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pedl.scheduling.searcher import hparams
from pedl.scheduling.searcher.base import Searcher, SearcherActions, TrialRequest

Mode = Literal["aggressive", "standard", "conservative"]


@dataclass(frozen=True)
class Bracket:
    num_rungs: int
    max_trials: int
    max_concurrent: int
    rung_lengths: tuple[int, ...]


def _log_floor_plus_one(value: int, divisor: float) -> int:
    """floor(log_divisor(value)) + 1 without the float log, which says log_4(64) = 2.9999..."""
    rungs = 1
    while divisor**rungs <= value:
        rungs += 1
    return rungs


def effective_max_rungs(max_rungs: int, max_length: int, max_trials: int, divisor: float) -> int:
    return max(1, min(max_rungs, _log_floor_plus_one(max_length, divisor), _log_floor_plus_one(max_trials, divisor)))


def bracket_rungs(mode: Mode, max_rungs: int) -> list[int]:
    if mode == "aggressive":
        rungs = [max_rungs]
    elif mode == "standard":
        rungs = list(range((max_rungs - 1) // 2 + 1, max_rungs + 1))
    elif mode == "conservative":
        rungs = list(range(1, max_rungs + 1))
    else:
        raise ValueError(f"unknown adaptive_asha mode {mode!r}")
    # the most aggressive early stopping first: it gets the rounding remainder and fills first
    return sorted(rungs, reverse=True)


def bracket_max_trials(max_trials: int, divisor: float, rungs: list[int]) -> list[int]:
    weights = [divisor ** (r - 1) / r for r in rungs]
    total = sum(weights)
    shares = [max(int(w / total * max_trials), 1) for w in weights]
    shares[0] += max(max_trials - sum(shares), 0)
    return shares


def bracket_max_concurrent(max_concurrent: int, divisor: float, max_trials: list[int]) -> list[int]:
    count = len(max_trials)
    if max_concurrent == 0:
        return [max(max_trials[-1], int(divisor))] * count
    max_concurrent = max(max_concurrent, count)
    shares = [max_concurrent // count] * count
    for i in range(max_concurrent % count):
        shares[i] += 1
    return shares


def rung_lengths(num_rungs: int, divisor: float, max_length: int) -> tuple[int, ...]:
    return tuple(max(int(max_length / divisor ** (num_rungs - 1 - k)), 1) for k in range(num_rungs))


def make_brackets(
    *, max_trials: int, max_length: int, divisor: float, max_rungs: int, mode: Mode, max_concurrent: int
) -> list[Bracket]:
    rungs = bracket_rungs(mode, effective_max_rungs(max_rungs, max_length, max_trials, divisor))
    trials = bracket_max_trials(max_trials, divisor, rungs)
    concurrent = bracket_max_concurrent(max_concurrent, divisor, trials)
    return [
        Bracket(r, t, c, rung_lengths(r, divisor, max_length))
        for r, t, c in zip(rungs, trials, concurrent, strict=True)
    ]


class AdaptiveASHASearcher(Searcher):
    """See the module docstring. State (all JSON): the base fields, plus `bracket_of` and `rung_of`
    (request id -> bracket index, next rung not yet reached), `rungs` (per bracket, per rung, the
    table of [request id, metric or null] sorted best first) and `stop_reasons`."""

    def __init__(
        self,
        space: dict[str, Any],
        *,
        max_trials: int,
        max_length: int,
        divisor: float = 4,
        max_rungs: int = 5,
        mode: Mode = "standard",
        metric: str = "metric",
        unit: str = "batches",
        time_metric: str | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.time_metric = time_metric
        self.space = space
        self.max_trials = max_trials
        self.divisor = divisor
        self.metric = metric
        self.unit = unit
        self.brackets = make_brackets(
            max_trials=max_trials,
            max_length=max_length,
            divisor=divisor,
            max_rungs=max_rungs,
            mode=mode,
            max_concurrent=self.max_concurrent,
        )
        state = kw.get("state") or {}
        self.bracket_of: dict[str, int] = dict(state.get("bracket_of", {}))
        self.rung_of: dict[str, int] = dict(state.get("rung_of", {}))
        saved = state.get("rungs")
        self.rungs: list[list[list[list[Any]]]] = (
            [[[list(entry) for entry in table] for table in bracket] for bracket in saved]
            if saved
            else [[[] for _ in b.rung_lengths] for b in self.brackets]
        )
        self._stop_reasons: dict[str, str] = dict(state.get("stop_reasons", {}))

    # -- what the master reads --
    def stop_reasons(self) -> dict[str, str]:
        """request id -> why the searcher stopped that trial early."""
        return dict(self._stop_reasons)

    def total_trials(self) -> int:
        return self.max_trials

    def total_length(self, done: Mapping[str, float]) -> float:
        """max_trials trial lengths, less what early stopping saved: a trial this searcher stopped
        trains only the share of max_length it had done when it was stopped (and while it winds
        down). So progress only grows, and reaches 1 when the last trial closes."""
        stopped = self._stop_reasons.keys()
        return self.max_trials - len(stopped) + sum(min(1.0, max(0.0, done.get(r, 0.0))) for r in stopped)

    def state(self) -> dict[str, Any]:
        return {
            **super().state(),
            "bracket_of": dict(self.bracket_of),
            "rung_of": dict(self.rung_of),
            "rungs": [[[list(entry) for entry in table] for table in bracket] for bracket in self.rungs],
            "stop_reasons": dict(self._stop_reasons),
        }

    # -- creating trials --
    def _next_hparams(self, index: int) -> dict[str, Any] | None:
        if index >= self.max_trials:
            return None
        return hparams.sample(self.space, random.Random(f"{self.seed}:{index}"))

    def _fill(self) -> SearcherActions:
        actions = SearcherActions()
        created = Counter(self.bracket_of.values())
        live = Counter(self.bracket_of[r] for r in self.live)
        for b, bracket in enumerate(self.brackets):
            while (
                self.created < self.max_trials
                and created[b] < bracket.max_trials
                and live[b] < bracket.max_concurrent
                and (self.max_concurrent <= 0 or len(self.live) < self.max_concurrent)
                and self._has_room()
            ):
                index = self.created
                request_id = f"r{index}"
                hp = self._next_hparams(index)
                assert hp is not None
                actions.create.append(TrialRequest(request_id, hp, (self.seed + 7919 * index) % (2**31)))
                self.live.append(request_id)
                self.bracket_of[request_id] = b
                self.rung_of[request_id] = 0
                self.created += 1
                created[b] += 1
                live[b] += 1
        self.exhausted = self.created >= self.max_trials or all(
            created[b] >= bracket.max_trials for b, bracket in enumerate(self.brackets)
        )
        if self.exhausted and not self.live:
            actions.shutdown = True
        return actions

    # -- deciding --
    def _key(self, metric: float | None) -> float:
        if metric is None:
            return math.inf  # no metric (failed trial) ranks worst
        return metric if self.smaller_is_better else -metric

    def _insert(self, table: list[list[Any]], request_id: str, metric: float | None) -> int:
        """Insert best first; a new entry goes ahead of equal ones (as Determined's sort.Search)."""
        index = bisect.bisect_left([self._key(m) for _, m in table], self._key(metric))
        table.insert(index, [request_id, metric])
        return index

    def _time(self, steps: int, metrics: Mapping[str, Any] | None) -> float | None:
        """How far the trial has trained, in the rungs' units: the time metric's value when there is one."""
        if self.time_metric is None:
            return steps
        value = (metrics or {}).get(self.time_metric)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return None
        return value

    def on_validation(
        self, request_id: str, metric: float, steps: int, metrics: Mapping[str, Any] | None = None
    ) -> SearcherActions:
        if math.isfinite(metric):
            super().on_validation(request_id, metric, steps)
        if request_id not in self.live or request_id in self._stop_reasons or request_id not in self.bracket_of:
            return SearcherActions()
        time = self._time(steps, metrics)
        if time is None:
            return SearcherActions()
        b = self.bracket_of[request_id]
        bracket = self.brackets[b]
        rung = self.rung_of[request_id]
        value = metric if math.isfinite(metric) else None  # stored as JSON: no NaN or Infinity
        while rung < bracket.num_rungs and time >= bracket.rung_lengths[rung]:
            table = self.rungs[b][rung]
            index = self._insert(table, request_id, value)
            rung += 1
            self.rung_of[request_id] = rung
            if rung == bracket.num_rungs:
                break  # the top rung is max_length: the trial finishes by itself
            keep = max(int(len(table) / self.divisor), 1)
            if index >= keep:
                self._stop_reasons[request_id] = self._reason(b, rung - 1, metric, index, len(table), keep)
                return SearcherActions(stop=[request_id])
        return SearcherActions()

    def _reason(self, b: int, rung: int, metric: float, index: int, count: int, keep: int) -> str:
        bracket = self.brackets[b]
        where = (
            f"stopped at rung {rung + 1} of {bracket.num_rungs} "
            f"({bracket.rung_lengths[rung]} {self.unit}, bracket {b + 1} of {len(self.brackets)})"
        )
        ranked = f"{self.metric} {metric:.6g} ranked {index + 1} of {count}"
        if count < self.divisor:
            return f"{where}: {ranked}; with fewer than {self.divisor:g} results only the best continues"
        return f"{where}: {ranked}, not in the top 1/{self.divisor:g} (the best {keep} go on)"

    def on_trial_exited_early(self, request_id: str, reason: str) -> SearcherActions:
        b = self.bracket_of.get(request_id)
        if request_id in self.live and request_id not in self._stop_reasons and b is not None:
            rung = self.rung_of[request_id]
            if rung < self.brackets[b].num_rungs:
                self._insert(self.rungs[b][rung], request_id, None)
        return self.on_trial_closed(request_id)

"""Determined's metric streams (GET /api/v1/experiments/.../metrics-stream/...): their parameters, and what
each next message holds given what the previous ones sent. Pure: the reads are stream_reads.py's.

Every stream sends a first message at once, then, every period, only what it has not sent before (a metric
name, a batch, a trial's report, a trial's data point once each), and ends once its experiments have ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pedl.errors import InvalidArgument

DEFAULT_PERIOD = 30  # seconds between messages when the request names none (Determined's default)
MIN_PERIOD = 1
MAX_PERIOD = 300
MAX_IDS = 100  # experiments one metric-names stream follows
MAX_MARGIN = 100  # trials-snapshot's batches_margin (Determined refuses more)
DEFAULT_SAMPLE_TRIALS, MAX_SAMPLE_TRIALS = 25, 100  # trials-sample's max_trials
DEFAULT_DATAPOINTS, MAX_DATAPOINTS = 1000, 10_000  # trials-sample's max_datapoints, per trial and message
# how far back in time each read looks again past the last one's start: a report stored by a transaction
# that began before that read but committed after it is still found (and sent once, as the rest)
REREAD_SECONDS = 60.0

_METRIC_TYPES = {
    "METRIC_TYPE_TRAINING": "training",
    "METRIC_TYPE_VALIDATION": "validation",
    "METRIC_TYPE_PROFILING": "profiling",
    "1": "training",
    "2": "validation",
    "3": "profiling",
}
_UNSPECIFIED = ("", "METRIC_TYPE_UNSPECIFIED", "0")


def period(seconds: int | None) -> float:
    """period_seconds as the stream uses it: 0 or none is Determined's 30 s; the rest is kept within
    MIN_PERIOD..MAX_PERIOD, so no stream polls faster than once a second."""
    if seconds is None or seconds == 0:
        return float(DEFAULT_PERIOD)
    if seconds < 0:
        raise InvalidArgument.at("period_seconds", "must not be negative")
    return float(min(max(seconds, MIN_PERIOD), MAX_PERIOD))


def metric_group(metric_type: str | None, group: str | None) -> str:
    """The group a request names, by metric_type (Determined's legacy enum) or group, never both."""
    legacy = (metric_type or "").strip()
    if legacy not in _UNSPECIFIED and group:
        raise InvalidArgument.at("group", "cannot be given with metric_type")
    if group:
        if len(group) > 64:
            raise InvalidArgument.at("group", "at most 64 characters")
        return group
    if legacy in _UNSPECIFIED:
        raise InvalidArgument.at(
            "metric_type", "must name a metric group: METRIC_TYPE_TRAINING or METRIC_TYPE_VALIDATION (or give group)"
        )
    if legacy not in _METRIC_TYPES:
        raise InvalidArgument.at(
            "metric_type", f"{legacy!r} is not METRIC_TYPE_TRAINING, METRIC_TYPE_VALIDATION or METRIC_TYPE_PROFILING"
        )
    return _METRIC_TYPES[legacy]


def metric_name(name: str | None) -> str:
    if not name:
        raise InvalidArgument.at("metric_name", "must name a metric")
    if len(name) > 255:
        raise InvalidArgument.at("metric_name", "at most 255 characters")
    return name


def experiment_ids(ids: Sequence[int]) -> list[int]:
    out = sorted(set(ids))
    if not out:
        raise InvalidArgument.at("ids", "must name at least one experiment")
    if len(out) > MAX_IDS:
        raise InvalidArgument.at("ids", f"{len(out)} experiments, more than the limit of {MAX_IDS}")
    if out[0] < 1 or out[-1] > 2**63 - 1:
        raise InvalidArgument.at("ids", "experiment ids are positive 64-bit integers")
    return out


def bounded(name: str, value: int | None, default: int, most: int) -> int:
    """A count a request may leave out (0: the default), at most `most`."""
    if value is None or value == 0:
        return default
    if value < 0 or value > most:
        raise InvalidArgument.at(name, f"must be 0 (the default, {default}) to {most}")
    return value


@dataclass(frozen=True)
class Window:
    """trials-snapshot's range of batches: batches_processed, give or take batches_margin."""

    low: int
    high: int

    @classmethod
    def around(cls, batches_processed: int, margin: int) -> Window:
        if margin < 0 or margin > MAX_MARGIN:
            raise InvalidArgument.at("batches_margin", f"must be 0 to {MAX_MARGIN}")
        return cls(max(batches_processed - margin, 0), batches_processed + margin)


# ---- what is new: each tracker takes what a read found and returns the message of what it had not sent


@dataclass
class NamesSent:
    """metric-names: the searcher metrics (first message only), then each group's names once."""

    searcher: list[str]
    first: bool = True
    seen: set[tuple[str, str]] = field(default_factory=set)

    def message(self, found: Iterable[tuple[str, str]]) -> dict[str, Any]:
        new = sorted(set(found) - self.seen)
        self.seen.update(new)
        searcher = list(dict.fromkeys(self.searcher)) if self.first else []
        self.first = False
        return {
            "searcherMetrics": searcher,
            "trainingMetrics": [n for g, n in new if g == "training"],
            "validationMetrics": [n for g, n in new if g == "validation"],
            "metricNames": [{"group": g, "name": n} for g, n in new],
        }


@dataclass
class BatchesSent:
    """batches: each batch count at which the metric was reported, once."""

    seen: set[int] = field(default_factory=set)

    def message(self, found: Iterable[int]) -> dict[str, Any]:
        new = sorted(set(found) - self.seen)
        self.seen.update(new)
        return {"batches": new}


@dataclass(frozen=True)
class SnapshotRow:
    trial_id: int
    batches: int
    metric: float
    hparams: dict[str, Any]


@dataclass
class SnapshotSent:
    """trials-snapshot: each (trial, batches) report of the metric in the window, once."""

    seen: set[tuple[int, int]] = field(default_factory=set)

    def message(self, found: Iterable[SnapshotRow]) -> dict[str, Any]:
        trials = []
        for row in found:
            if (row.trial_id, row.batches) in self.seen:
                continue
            self.seen.add((row.trial_id, row.batches))
            trials.append(
                {"trialId": row.trial_id, "hparams": row.hparams, "metric": row.metric, "batchesProcessed": row.batches}
            )
        return {"trials": trials}


@dataclass(frozen=True)
class Point:
    batches: int
    value: float
    time: str  # RFC 3339


@dataclass
class SampleSent:
    """trials-sample: the top trials; a trial that joins them is promoted (its hparams and data so far
    sent with it), one that leaves is demoted (and starts over should it come back), and each message
    carries the points past the last one sent of each trial."""

    metric: str
    last: dict[int, int] = field(default_factory=dict)  # trial -> the batches of its last point sent

    def message(
        self, top: Sequence[int], hparams: dict[int, dict[str, Any]], points: Mapping[int, Sequence[Point]]
    ) -> dict[str, Any]:
        """`top`: the trials sampled now, best first; `points`: each one's points past `last[trial]`, in
        order of batches (a trial promoted now: all of its own)."""
        promoted = [t for t in top if t not in self.last]
        demoted = sorted(set(self.last) - set(top))
        for t in demoted:
            del self.last[t]
        trials = []
        for t in top:
            new = [p for p in points.get(t, ()) if p.batches > self.last.get(t, -1)]
            joined = t not in self.last
            if new:
                self.last[t] = new[-1].batches
            elif joined:
                self.last[t] = -1
            if joined or new:
                trials.append(
                    {
                        "trialId": t,
                        "hparams": hparams.get(t, {}) if joined else None,
                        "data": [{"batches": p.batches, "values": {self.metric: p.value}, "time": p.time} for p in new],
                    }
                )
        return {"trials": trials, "promotedTrials": promoted, "demotedTrials": demoted}


def thin(points: Sequence[Point], most: int) -> list[Point]:
    """At most `most` of the points, evenly spread, the last one kept (a promoted trial's history)."""
    if len(points) <= most:
        return list(points)
    step = len(points) / most
    picked = [points[int(i * step)] for i in range(most - 1)]
    return [*picked, points[-1]]


SAMPLE_BY_LENGTH = {"adaptive_asha", "async_halving", "adaptive", "adaptive_simple", "sync_halving"}


def sample_by_length(searcher: str) -> bool:
    """Whether trials-sample ranks trials by how far they have validated (Determined: the ASHA family) or,
    else, by the best value of the searcher metric."""
    return searcher in SAMPLE_BY_LENGTH

"""Metric retention: a trial's training reports older than `older_than` are thinned to one in
`keep_every`, in the background, in short transactions of their own, never under the cluster lock.

What stays depends on the steps alone (kept_steps), so a pass run again deletes nothing more. A trial's
training series is cut into windows of keep_every strides from its first step, the stride being the gap
between its first two steps, and each window keeps its first report: with a report every d steps, that
is every keep_every-th report. The first two reports (they fix the windows) and the latest are always
kept. Only the group "training" is thinned; validation and every other group are never touched.

Each transaction deletes at most DELETE_CHUNK reports and records a digest reset from its first deleted
step (metrics/digests.py): from that commit on, chart reads skip the digests that still hold deleted
points, and the digester builds them again from the reports that are left. A series is thinned once at
least MIN_DELETE of its reports can go (or all of its reports are old), so a running trial's digests
are not rebuilt every pass."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.exc import IntegrityError

from pedl.clock import Clock
from pedl.config.metrics_retention import (
    DEFAULT_INTERVAL,
    DEFAULT_OLDER_THAN,
    ExperimentMetricsRetention,
    MetricsRetentionConfig,
)
from pedl.master.db import models
from pedl.master.db.base import rowcount
from pedl.master.lifecycle.states import DELETING_EXPERIMENT, TERMINAL_EXPERIMENT, TERMINAL_TRIAL
from pedl.master.worker_passes import run_pass

if TYPE_CHECKING:
    from pedl.master.context import MasterContext
    from pedl.master.db.engine import Database
    from pedl.master.metrics.digest_queue import DigestQueue

log = logging.getLogger(__name__)

GROUP = "training"  # the only group ever thinned
DELETE_CHUNK = 500  # reports one transaction deletes
READ_PAGE = 10_000  # reports one read returns
ROWS_PER_TRIAL = 200_000  # reports a pass reads of one trial; the next pass goes on from there
MIN_DELETE = 1_000  # a series is thinned once this many of its reports can go, or all of them are old
PAGE = 500  # trials, or experiments' configs, read at a time


@dataclass(frozen=True)
class Retention:
    keep_every: int
    older_than: float  # seconds


def retention_for(master: MetricsRetentionConfig | None, config: Mapping[str, Any] | None) -> Retention | None:
    """What applies to an experiment of this stored config: its own section, else the master's. None:
    keep every report (no section, keep_every 1, or a section that does not read: never delete on doubt)."""
    own = (config or {}).get("metrics_retention")
    if own is not None:
        try:
            section = ExperimentMetricsRetention.model_validate(own)
        except ValidationError:
            return None
        older = section.older_than or (master.older_than if master is not None else DEFAULT_OLDER_THAN)
        keep = section.keep_every
    elif master is not None:
        keep, older = master.keep_every, master.older_than
    else:
        return None
    return Retention(keep, older) if keep > 1 else None


# -- which reports stay ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Windows:
    """Windows of `width` steps from the series' first step (width: keep_every times the gap between
    its first two steps)."""

    first: int
    second: int
    width: int

    @classmethod
    def of(cls, first: int, second: int, keep_every: int) -> Windows:
        return cls(first, second, keep_every * (second - first))

    def index(self, step: int) -> int:
        return (step - self.first) // self.width

    def start(self, step: int) -> int:
        return self.first + self.index(step) * self.width


class Selector:
    """Fed the steps of a series in increasing order from a window's start (a step again for each
    report of it), says whether each stays: the first step of its window, the first two steps, the
    latest."""

    def __init__(self, windows: Windows, latest: int | None) -> None:
        self._always = {windows.first, windows.second, latest}
        self._windows = windows
        self._window: int | None = None
        self._first = 0

    def keeps(self, step: int) -> bool:
        window = self._windows.index(step)
        if window != self._window:
            self._window, self._first = window, step
        return step == self._first or step in self._always


def kept_steps(steps: Iterable[int], keep_every: int) -> set[int]:
    """The steps of a series (of any order, repeats allowed) that thinning keeps: all of them for
    keep_every 1 or fewer than three steps. kept_steps(kept_steps(S, k), k) == kept_steps(S, k)."""
    ordered = sorted(set(steps))
    if keep_every <= 1 or len(ordered) < 3:
        return set(ordered)
    selector = Selector(Windows.of(ordered[0], ordered[1], keep_every), ordered[-1])
    return {step for step in ordered if selector.keeps(step)}


# -- one trial ------------------------------------------------------------------------------------


@dataclass
class Scan:
    doomed: list[tuple[int, int]]  # (report id, step) of the reports to delete, in step order
    resume: int  # the start of the window the next scan begins at
    settled: bool  # read to the last report, every one old
    full: bool  # stopped at the limit of rows


def _series(trial_id: int) -> list[Any]:
    M = models.Metric
    return [M.trial_id == trial_id, M.group == GROUP]


def windows_of(db: Database, trial_id: int, keep_every: int) -> Windows | None:
    """The trial's windows, from its first two training steps; None while it has fewer."""
    M = models.Metric
    with db.read_session() as s:
        firsts = list(
            s.scalars(
                select(M.steps_completed).where(*_series(trial_id)).distinct().order_by(M.steps_completed).limit(2)
            )
        )
    return Windows.of(firsts[0], firsts[1], keep_every) if len(firsts) == 2 else None


def scan(
    db: Database, trial_id: int, windows: Windows, resume: int, cutoff: float, limit: int = ROWS_PER_TRIAL
) -> Scan:
    """Read the trial's training reports from the window starting at `resume`, in step order, up to
    the first one reported at or after `cutoff` (that one and those after it wait for a later pass)."""
    M = models.Metric
    with db.read_session() as s:
        latest = s.scalar(select(func.max(M.steps_completed)).where(*_series(trial_id)))
    selector = Selector(windows, latest)
    doomed: list[tuple[int, int]] = []
    after: tuple[int, int] | None = None  # (step, id) of the last report read
    read, last = 0, resume
    while read < limit:
        lower = resume if after is None else after[0]  # the index range starts here, page after page
        query = select(M.id, M.steps_completed, M.report_time).where(*_series(trial_id), M.steps_completed >= lower)
        if after is not None:
            query = query.where(or_(M.steps_completed > after[0], and_(M.steps_completed == after[0], M.id > after[1])))
        page = min(READ_PAGE, limit - read)
        with db.read_session() as s:
            rows = s.execute(query.order_by(M.steps_completed, M.id).limit(page)).all()
        for report_id, step, report_time in rows:
            if report_time >= cutoff:
                return Scan(doomed, windows.start(step), settled=False, full=False)
            if not selector.keeps(step):
                doomed.append((report_id, step))
            last = step
        read += len(rows)
        if len(rows) < page:
            return Scan(doomed, windows.start(last), settled=True, full=False)
        after = (rows[-1][1], rows[-1][0])
    return Scan(doomed, windows.start(last), settled=False, full=True)


def delete_reports(
    db: Database, trial_id: int, doomed: list[tuple[int, int]], cutoff: float, queue: DigestQueue | None = None
) -> int:
    """Delete the reports, DELETE_CHUNK per transaction, each with a digest reset from its first step.
    A report replaced since it was read (a newer one of its step) is not deleted. -> reports deleted."""
    M = models.Metric
    deleted = 0
    for lo in range(0, len(doomed), DELETE_CHUNK):
        chunk = doomed[lo : lo + DELETE_CHUNK]
        with db.session() as s:
            n = (
                rowcount(
                    s.execute(
                        delete(M)
                        .where(
                            M.id.in_([report_id for report_id, _ in chunk]), *_series(trial_id), M.report_time < cutoff
                        )
                        .execution_options(synchronize_session=False)
                    )
                )
                or 0
            )
            if n:
                s.add(models.MetricDigestReset(trial_id=trial_id, group=GROUP, from_step=chunk[0][1]))
        deleted += n
        if n and queue is not None:
            queue.touch(trial_id, GROUP)
    return deleted


# -- the worker -----------------------------------------------------------------------------------


@dataclass
class Progress:
    """How far a trial is thinned, kept in memory: a master that restarts reads each series once more."""

    run_id: int
    keep_every: int
    windows: Windows
    resume: int  # the reports before this step's window are thinned
    done: bool = False  # the trial ended and every report of it is old and thinned


class MetricRetention:
    """Thins the reports of the experiments retention applies to, one pass every `interval`."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        master: MetricsRetentionConfig | None,
        queue: DigestQueue | None = None,
        *,
        min_delete: int = MIN_DELETE,
        rows_per_trial: int = ROWS_PER_TRIAL,
    ) -> None:
        self.db, self.clock, self.master, self.queue = db, clock, master, queue
        self.min_delete, self.rows_per_trial = min_delete, rows_per_trial
        self.interval = master.interval if master is not None else DEFAULT_INTERVAL
        self._settings: dict[int, Retention | None] = {}  # experiment -> what applies
        self._read_through = 0  # experiments read up to this id
        self._read_at = 0.0  # when they were
        self._progress: dict[int, Progress] = {}
        self._stopping = threading.Event()

    def run_pass(self) -> int:
        """One pass over every trial retention applies to. -> reports deleted."""
        now = self.clock.now()
        self._read_settings(now)
        if not any(self._settings.values()):
            return 0
        deleted, seen = 0, set()
        for trial_id, experiment_id, run_id, state in self._trials():
            if self._stopping.is_set():
                return deleted
            seen.add(trial_id)
            retention = self._settings.get(experiment_id)
            if retention is None:
                self._progress.pop(trial_id, None)
                continue
            try:
                deleted += self._thin(trial_id, run_id, state in TERMINAL_TRIAL, retention, now - retention.older_than)
            except IntegrityError:  # the trial was deleted meanwhile
                self._progress.pop(trial_id, None)
        for gone in self._progress.keys() - seen:
            del self._progress[gone]
        return deleted

    def _read_settings(self, now: float) -> None:
        """The settings of the experiments new since the last read, and again of those not ended or ended
        since (continuing an ended experiment may change its config); an ended one's config stays."""
        E = models.Experiment
        changed = or_(
            E.id > self._read_through, E.state.not_in(sorted(TERMINAL_EXPERIMENT)), E.end_time >= self._read_at
        )
        after = 0
        while True:
            with self.db.read_session() as s:
                rows = s.execute(select(E.id, E.config).where(E.id > after, changed).order_by(E.id).limit(PAGE)).all()
            for experiment_id, config in rows:
                self._settings[experiment_id] = retention_for(self.master, config if isinstance(config, dict) else None)
                self._read_through = max(self._read_through, experiment_id)
            if len(rows) < PAGE:
                break
            after = rows[-1][0]
        self._read_at = now

    def _trials(self) -> Iterator[tuple[int, int, int, Any]]:
        T, E = models.Trial, models.Experiment
        after = 0
        while True:
            with self.db.read_session() as s:
                rows = s.execute(
                    select(T.id, T.experiment_id, T.run_id, T.state)
                    .join(E, E.id == T.experiment_id)
                    .where(T.id > after, E.state.not_in(sorted(DELETING_EXPERIMENT)))
                    .order_by(T.id)
                    .limit(PAGE)
                ).all()
            yield from ((trial_id, experiment_id, run_id, state) for trial_id, experiment_id, run_id, state in rows)
            if len(rows) < PAGE:
                return
            after = rows[-1][0]

    def _thin(self, trial_id: int, run_id: int, ended: bool, retention: Retention, cutoff: float) -> int:
        p = self._progress.get(trial_id)
        if p is None or p.run_id != run_id or p.keep_every != retention.keep_every:  # a restart may replay steps
            windows = windows_of(self.db, trial_id, retention.keep_every)
            if windows is None:
                return 0
            p = self._progress[trial_id] = Progress(run_id, retention.keep_every, windows, windows.first)
        elif p.done and ended:
            return 0
        found = scan(self.db, trial_id, p.windows, p.resume, cutoff, self.rows_per_trial)
        deleted = 0
        if found.settled or found.full or len(found.doomed) >= self.min_delete or not found.doomed:
            deleted = delete_reports(self.db, trial_id, found.doomed, cutoff, self.queue)
            p.resume = found.resume
        # else: too few to rebuild the digests for; read again from the same window next pass
        p.done = ended and found.settled
        return deleted

    async def run(self, stop: asyncio.Event) -> None:
        """A pass every `interval`, the first one `interval` after the start, in a thread."""
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self.interval)
                if stop.is_set():
                    return
                try:
                    deleted = await run_pass(self.run_pass, on_cancel=self._stopping.set)
                except Exception:  # keep the worker alive; the next pass goes on
                    log.exception("metric retention pass failed")
                    continue
                if deleted:
                    log.info("metric retention deleted %d old training reports", deleted)
        finally:
            self._stopping.set()


async def run_loop(ctx: MasterContext, stop: asyncio.Event) -> None:
    """The master's retention worker (app.py starts it with the others)."""
    await MetricRetention(ctx.db, ctx.clock, ctx.config.metrics_retention, ctx.digest_queue).run(stop)

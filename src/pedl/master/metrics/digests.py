"""Metric digests in the database: kept up to date behind the reports, and read for charts.

Every (trial, group) has a digest per metric name (series_digest.py) and a mark: the digests hold
every report of a step up to the mark's through_step. A chart reads the digests and only the reports
after the mark (the tail), so a series of a million reports costs one small value and a few rows.

The digester folds reports in the background, a bounded number per transaction, in step order,
after the mark. It learns of new reports from the report path (DigestQueue.touch) and, when the
master starts, from the trials' summaries (each holds the latest step of each group). Nothing on the
report path waits for it, and nothing it writes is needed for a correct answer: a (trial, group)
with no mark is read from its reports, as is a name left out of its digests.

A report of a step at or before the group's latest (a restarted trial replaying steps after its
checkpoint, a retried POST) writes a reset: the digests that reach its step are stale from that
commit on, so reads skip them and the digester builds them again. Resets are rows of their own, not
deletes of the mark, so the report path and the digester never write the same row: no lock waits
between them, and no interleaving of their transactions leaves a stale mark looking valid."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
from sqlalchemy import Select, Text, and_, cast, delete, exists, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.metrics.columns import columns, finite_number, numbers_only
from pedl.master.metrics.digest_queue import Block, DigestQueue
from pedl.master.metrics.series_digest import Digest, decode, encode, fold_arrays

if TYPE_CHECKING:
    from pedl.master.db.engine import Database

log = logging.getLogger(__name__)

Marks = dict[int, tuple[int, bool, dict[str, bytes]]]  # trial -> (through_step, complete, {name: digest})
Points = list[tuple[int, Any]]  # (steps_completed, report values)
Series = dict[str, tuple[np.ndarray, np.ndarray]]  # a name's steps (int64) and finite values (float64)

ROWS_PER_TRANSACTION = 20_000  # reports one (trial, group) folds in one transaction
ROWS_PER_PASS = 100_000  # reports one pass folds, over every (trial, group) waiting
MAX_DIGESTED_NAMES = 64  # names digested per (trial, group); more are read from the reports
MAX_NAME_LENGTH = 255
SWEEP_PAGE = 500  # trials read at a time by the start-up sweep

# -- the report path ------------------------------------------------------------------------------


def reached_step(summary: Any, group: str) -> int | None:
    """The largest step the trial reported in the group, as its summary keeps it (metrics.record)."""
    latest = summary.get(f"latest_{group}") if isinstance(summary, dict) else None
    if not isinstance(latest, dict):
        return None
    steps = [
        v
        for v in (latest.get("steps_completed"), latest.get("max_steps_completed"))
        if isinstance(v, int) and not isinstance(v, bool)
    ]
    return max(steps) if steps else None


def note_report(s: Session, trial: models.Trial, group: str, steps_completed: int) -> int:
    """Called by metrics.record before it stores a report: a step at or before the largest the group
    reached makes the digests that reach it stale. -> the largest step reached with this report."""
    reached = reached_step(trial.summary_metrics, group)
    if reached is None:
        return steps_completed
    if steps_completed <= reached:
        s.add(models.MetricDigestReset(trial_id=trial.id, group=group, from_step=steps_completed))
    return max(reached, steps_completed)


def note_reports(s: Session, trial: models.Trial, group: str, steps: list[int]) -> int:
    """note_report for several reports of the group stored in one transaction: the digests can only
    have reached steps reported before them, so one reset from the earliest step at or before the
    largest already reached is all they need. -> the largest step reached with them."""
    reached = reached_step(trial.summary_metrics, group)
    if reached is not None:
        stale = [step for step in steps if step <= reached]
        if stale:
            s.add(models.MetricDigestReset(trial_id=trial.id, group=group, from_step=min(stale)))
    return max([*steps, *([reached] if reached is not None else [])])


# -- the digester ---------------------------------------------------------------------------------


def _latest_per_step(rows: Sequence[Any]) -> Points:
    """Rows (id, step, report as JSON text) in (step, id) order -> (step, report), the last row of each step."""
    out: Points = []
    for _, step, text in rows:
        report = orjson.loads(text) if text is not None else None
        if out and out[-1][0] == step:
            out[-1] = (step, report)
        else:
            out.append((step, report))
    return out


def _fed_after(fed: list[Block], after: int) -> Block | None:
    """The fed reports past step `after`, in step order, as one block; None when a step is there twice
    (which of them the database kept is for the database to say)."""
    names = tuple(dict.fromkeys(chain.from_iterable(block[1] for block in fed)))
    steps = np.concatenate([block[0] for block in fed])
    if all(block[1] == names for block in fed):
        values = np.concatenate([block[2] for block in fed], axis=1)
    else:  # blocks of other names: NaN where a block lacks a name
        values = np.full((len(names), len(steps)), np.nan)
        row_of, start = {name: i for i, name in enumerate(names)}, 0
        for block_steps, block_names, block_values in fed:
            for j, name in enumerate(block_names):
                values[row_of[name], start : start + len(block_steps)] = block_values[j]
            start += len(block_steps)
    keep = np.flatnonzero(steps > after)
    order = keep[np.argsort(steps[keep], kind="stable")]
    steps, values = steps[order], values[:, order]
    if (np.diff(steps) == 0).any():
        return None
    return steps, names, values


def _stored_exactly(s: Session, trial_id: int, group: str, steps: np.ndarray, after: int | None = None) -> bool:
    """Whether the database holds one report for each of these steps (ascending) and none between them
    (nor between step `after` and them): else a report stored by another path, or not fed yet, or deleted
    since, sends the digester to the reports."""
    M = models.Metric
    first, last = int(steps[0]), int(steps[-1])
    low = M.steps_completed >= first if after is None else M.steps_completed > after
    stored = s.scalar(
        select(func.count())
        .select_from(M)
        .where(M.trial_id == trial_id, M.group == group, low, M.steps_completed <= last)
    )
    return stored == len(steps)


def digest_one(
    s: Session, trial_id: int, group: str, limit: int = ROWS_PER_TRANSACTION, fed: list[Block] | None = None
) -> tuple[bool, int]:
    """Fold up to `limit` reports of the (trial, group) after its mark (all of them, from the first,
    when it has none or a reset made it stale), read from the database, and then the `fed` reports
    past them when the database holds just those (and no reset is pending). -> (caught up, reports
    folded)."""
    M, D, R = models.Metric, models.MetricDigest, models.MetricDigestReset
    mark = s.get(models.MetricDigestMark, (trial_id, group))
    resets = s.execute(select(R.id, R.from_step).where(R.trial_id == trial_id, R.group == group)).all()
    if mark is not None and any(from_step <= mark.through_step for _, from_step in resets):
        s.delete(mark)
        s.flush()
        mark = None
    after = mark.through_step if mark is not None else -1
    block = _fed_after(fed, after) if fed and not resets else None
    if block is not None and not len(block[0]):
        block = None  # nothing fed past the mark
    digests: dict[str, models.MetricDigest] = {}
    if mark is None:
        s.execute(delete(D).where(D.trial_id == trial_id, D.group == group))
        complete = True
    else:
        digests = {row.name: row for row in s.scalars(select(D).where(D.trial_id == trial_id, D.group == group))}
        complete = mark.complete
    if block is not None and _stored_exactly(s, trial_id, group, block[0], after):  # the common case: no read
        series, complete = _block_series(block, digests.keys(), complete)
        _fold(s, trial_id, group, digests, series)
        _mark(s, mark, trial_id, group, int(block[0][-1]), complete)
        return True, len(block[0])
    # the reports as JSON text, parsed here by orjson (the JSON type's json.loads took 3% of a master
    # storing 60,000 reports a second, whose digester read back what its feed had dropped)
    query = select(M.id, M.steps_completed, cast(M.metrics, Text)).where(
        M.trial_id == trial_id, M.group == group, M.steps_completed > after
    )
    if block is not None:  # what was stored before the fed reports (a feed that lost its oldest), then them
        query = query.where(M.steps_completed < int(block[0][0]))
    rows = s.execute(query.order_by(M.steps_completed, M.id).limit(limit + 1)).all()
    more = len(rows) > limit
    if more:  # the last step may have more rows past the limit (two reports of a step): leave it to the next
        rows = rows[:limit]
        last = rows[-1][1]
        if rows[0][1] != last:
            rows = [r for r in rows if r[1] != last]
    points = _latest_per_step(rows)
    series, complete = _points_series(points, digests, complete)
    through, folded = (points[-1][0], len(points)) if points else (None, 0)
    if block is not None:
        if not more and _stored_exactly(s, trial_id, group, block[0]):
            fed_series, complete = _block_series(block, digests.keys() | series.keys(), complete)
            series = _after(series, fed_series)
            through, folded = int(block[0][-1]), folded + len(block[0])
        else:
            more = True  # the rest is read from the database next time
    _fold(s, trial_id, group, digests, series)
    if through is not None:
        _mark(s, mark, trial_id, group, through, complete)
    if resets:
        s.execute(delete(R).where(R.id.in_([reset_id for reset_id, _ in resets])))
    return not more, folded


def _mark(
    s: Session, mark: models.MetricDigestMark | None, trial_id: int, group: str, through: int, complete: bool
) -> None:
    if mark is None:
        s.add(models.MetricDigestMark(trial_id=trial_id, group=group, through_step=through, complete=complete))
    else:
        mark.through_step, mark.complete = through, complete


def _fold(s: Session, trial_id: int, group: str, digests: dict[str, models.MetricDigest], series: Series) -> None:
    """Fold each name's series into its digest, adding a digest for a name that has none."""
    for name, (steps, values) in series.items():
        row = digests.get(name)
        digest = decode(row.data) if row is not None else Digest()
        fold_arrays(digest, steps, values)
        if row is None:
            s.add(models.MetricDigest(trial_id=trial_id, group=group, name=name, data=encode(digest)))
        else:
            row.data = encode(digest)


def _after(first: Series, then: Series) -> Series:
    """The two series of each name, one after the other (`then`'s steps all come after `first`'s)."""
    out = dict(first)
    for name, (steps, values) in then.items():
        if name in out:
            out[name] = (np.concatenate([out[name][0], steps]), np.concatenate([out[name][1], values]))
        else:
            out[name] = (steps, values)
    return out


def _takes_digest(name: str, held: int) -> bool:
    """Whether a name without a digest gets one, `held` names having theirs."""
    return bool(name) and len(name) <= MAX_NAME_LENGTH and held < MAX_DIGESTED_NAMES


def _block_series(block: Block, digested: Collection[str], complete: bool) -> tuple[Series, bool]:
    """Each name's series from a fed block, names with a digest (`digested`) or that take one, in the block's
    order; and whether every numeric name got one."""
    steps, names, values = block
    out: Series = {}
    held = len(digested)
    for name, row in zip(names, values, strict=True):
        finite = np.isfinite(row)
        if not finite.any():
            continue
        if name not in digested:
            if not _takes_digest(name, held):
                complete = False
                continue
            held += 1
        out[name] = (steps, row) if finite.all() else (steps[finite], row[finite])
    return out, complete


def _points_series(points: Points, digests: dict[str, models.MetricDigest], complete: bool) -> tuple[Series, bool]:
    """Each name's series from reports read back: a name at a time where they have the same names, else a
    value at a time; and whether every numeric name got one."""
    uniform = _uniform_series(points, digests)
    return (uniform, complete) if uniform is not None else _series_by_value(points, digests, complete)


def _series_by_value(points: Points, digests: Collection[str], complete: bool) -> tuple[Series, bool]:
    """Each name's series from any points, a value at a time, and whether every numeric name got one."""
    series_of: dict[str, list[tuple[int, float]]] = {}
    held = len(digests)
    for step, report in points:
        if not isinstance(report, dict):
            continue
        for name, value in report.items():
            kind = type(value)
            if kind is float:  # the common value, checked inline: finite (inf - inf and NaN - NaN are NaN)
                if value - value != 0.0:
                    continue
            elif kind is int or finite_number(value):  # or a subclass of int or float (not bool)
                value = float(value)
            else:
                continue
            series = series_of.get(name)
            if series is None:
                if name not in digests:
                    if not _takes_digest(name, held):
                        complete = False
                        continue
                    held += 1
                series = series_of[name] = []
            series.append((step, value))
    return {
        name: (np.array([p[0] for p in series], dtype=np.int64), np.array([p[1] for p in series], dtype=np.float64))
        for name, series in series_of.items()
    }, complete


def _uniform_series(points: Points, digests: dict[str, models.MetricDigest]) -> Series | None:
    """A name's (steps, finite values) arrays, where every report has the same names in the same order
    (each one `_fold` would digest: a name of a valid length, all of them within MAX_DIGESTED_NAMES) and
    only numbers: the reports a training loop sends, a name at a time instead of a value at a time. None
    for any other points."""
    by_name = columns(list(map(itemgetter(1), points)))
    if by_name is None:
        return None
    names, values_of = by_name
    if len(digests.keys() | set(names)) > MAX_DIGESTED_NAMES or not all(
        name and len(name) <= MAX_NAME_LENGTH for name in names
    ):
        return None
    steps = np.fromiter(map(itemgetter(0), points), dtype=np.int64, count=len(points))
    out = {}
    for name, values in zip(names, values_of, strict=True):
        if not numbers_only(values):
            return None
        array = np.array(values, dtype=np.float64)
        finite = np.isfinite(array)
        if finite.all():
            out[name] = (steps, array)
        elif finite.any():  # (a name without a finite value gets no digest)
            out[name] = (steps[finite], array[finite])
    return out


def digest_pass(db: Database, queue: DigestQueue, budget: int = ROWS_PER_PASS) -> bool:
    """Digest what the queue holds, up to `budget` reports. -> whether work is left."""
    while budget > 0:
        key = queue.take()
        if key is None:
            return False
        trial_id, group = key
        try:
            with db.session() as s:
                caught_up, read = digest_one(s, trial_id, group, min(budget, ROWS_PER_TRANSACTION), queue.claim(key))
        except IntegrityError:  # the trial was deleted meanwhile
            log.debug("digests of trial %s (%s) not stored: the trial is gone", trial_id, group)
            continue
        budget -= max(read, 1)
        if not caught_up:
            queue.touch(trial_id, group)
    return len(queue) > 0


def sweep(db: Database, queue: DigestQueue) -> int:
    """Queue every (trial, group) with a reset, or whose largest reported step is past its mark (or
    that has none): reports stored before this master started, or before digests existed. -> pairs
    queued (a pair may count twice)."""
    T, K, R = models.Trial, models.MetricDigestMark, models.MetricDigestReset
    queued = 0
    with db.read_session() as s:
        for trial_id, group in s.execute(select(R.trial_id, R.group).distinct()):
            queue.touch(trial_id, group)
            queued += 1
    after = 0
    while True:
        with db.read_session() as s:
            trials = s.execute(
                select(T.id, T.summary_metrics).where(T.id > after).order_by(T.id).limit(SWEEP_PAGE)
            ).all()
            if not trials:
                return queued
            ids = [trial_id for trial_id, _ in trials]
            marks = {
                (t, g): through
                for t, g, through in s.execute(select(K.trial_id, K.group, K.through_step).where(K.trial_id.in_(ids)))
            }
        for trial_id, summary in trials:
            for key in summary or {}:
                if not key.startswith("latest_"):
                    continue
                group = key.removeprefix("latest_")
                step = reached_step(summary, group)
                if step is not None and marks.get((trial_id, group), step - 1) < step:
                    queue.touch(trial_id, group)
                    queued += 1
        after = ids[-1]


# -- reading --------------------------------------------------------------------------------------


def load_statement(trial_ids: list[int], group: str, names: list[str]) -> Select:
    K, D, R = models.MetricDigestMark, models.MetricDigest, models.MetricDigestReset
    stale = exists().where(R.trial_id == K.trial_id, R.group == K.group, R.from_step <= K.through_step)
    return (
        select(K.trial_id, K.through_step, K.complete, D.name, D.data)
        .select_from(K)
        .outerjoin(D, and_(D.trial_id == K.trial_id, D.group == K.group, D.name.in_(names)))
        .where(K.trial_id.in_(trial_ids), K.group == group, ~stale)
    )


def load(s: Session, trial_ids: list[int], group: str, names: list[str]) -> Marks:
    """trial -> (through_step, complete, {name: digest bytes}) for the trials with a valid mark, in
    one statement (one snapshot: a digest and its mark agree)."""
    out: Marks = {}
    for trial_id, through, complete, name, data in s.execute(load_statement(trial_ids, group, names)):
        entry = out.setdefault(trial_id, (through, complete, {}))
        if name is not None:
            entry[2][name] = data
    return out

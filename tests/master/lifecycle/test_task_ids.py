"""Trial task ids have Determined's shape, `{experiment id}.{uuid}`, which det 0.38.1 accepts on the
command line (its TASK_ID_REGEX, copied below); allocation ids are `{task id}.{run}`."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session

from pedl.config.master_config import MasterConfig
from pedl.master.db.engine import Database
from pedl.master.lifecycle import allocations
from tests.master.lifecycle.recording_effects import RecordingEffects, allocations_of, experiment, trials_of

# determined/cli/ntsc.py, 0.38.1
DET_TASK_ID_REGEX = re.compile(
    r"^(?:[0-9]+\.)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE
)


@pytest.fixture
def fx(master_config: MasterConfig) -> RecordingEffects:
    return RecordingEffects(config=master_config)


@pytest.fixture
def s(database: Database) -> Iterator[Session]:
    with database.session() as session:
        yield session


def test_new_trials_get_task_ids_det_accepts(fx: RecordingEffects, s: Session) -> None:
    exp = experiment(fx, s, searcher="random", extra=", max_trials: 3")
    trials = trials_of(s, exp)
    assert trials
    for trial in trials:
        assert DET_TASK_ID_REGEX.match(trial.task_id), trial.task_id
        assert trial.task_id.startswith(f"{exp.id}.")
        (alloc,) = allocations_of(s, trial)
        assert alloc.id == f"{trial.task_id}.1" and alloc.task_id == trial.task_id
    assert len({t.task_id for t in trials}) == len(trials)


def test_a_restart_keeps_the_task_id_and_numbers_the_allocation(fx: RecordingEffects, s: Session) -> None:
    exp = experiment(fx, s)
    (trial,) = trials_of(s, exp)
    task_id = trial.task_id
    again = allocations.new(fx, s, exp, trial)
    assert (trial.task_id, again.task_id, again.id) == (task_id, task_id, f"{task_id}.2")

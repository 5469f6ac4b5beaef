"""Factories for database rows that tests build by hand, where the API cannot make them (rows as an
older master stored them); everything the API can make, tests make through the API."""

from __future__ import annotations

from fastapi import FastAPI

from pedl.master.db import models
from tests.master.fakes import StartedTask, ctx_of


def legacy_checkpoint(app: FastAPI, task: StartedTask, ckpt_uuid: str, storage: dict, steps: int = 0) -> None:
    """A completed checkpoint of `task`'s trial as registration stored it before storage roots were checked: uuid and
    storage as the request said, unchecked. Its report time is its step count, so more steps is newer."""
    with ctx_of(app).db.session() as s:
        trial = s.get(models.Trial, task.trial_id)
        s.add(
            models.Checkpoint(
                uuid=ckpt_uuid,
                trial_id=trial.id,
                experiment_id=trial.experiment_id,
                task_id=task.task_id,
                allocation_id=task.allocation_id,
                state="STATE_COMPLETED",
                report_time=float(steps),
                steps_completed=steps,
                meta={"steps_completed": steps},
                resources={},
                storage=storage,
                size_bytes=0,
            )
        )

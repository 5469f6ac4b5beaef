"""Task specs: what a trial's process is started with (entrypoint and DET_* environment), built
from rows loaded for a whole batch of placements in a few queries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.experiment_config import ExperimentConfig
from pedl.master.db import models
from pedl.master.services import task_env


@dataclass
class SpecRows:
    """The rows task specs need, loaded for a batch of trials in a few queries."""

    trials: dict[int, models.Trial]
    experiments: dict[int, models.Experiment]
    users: dict[int, models.User]
    checkpoints: dict[str, models.Checkpoint]
    env: dict[int, dict[str, str]] = field(default_factory=dict)  # experiment id -> user variables
    agent_addresses: dict[str, str] = field(default_factory=dict)  # for distributed placements
    ports_in_use: dict[str, set[int]] = field(default_factory=dict)  # chief agent -> rendezvous ports

    @classmethod
    def load(cls, s: Session, trial_ids: list[int]) -> SpecRows:
        trials = {t.id: t for t in s.scalars(select(models.Trial).where(models.Trial.id.in_(trial_ids)))} \
            if trial_ids else {}
        exp_ids = {t.experiment_id for t in trials.values()}
        exps = {e.id: e for e in s.scalars(select(models.Experiment).where(models.Experiment.id.in_(exp_ids)))} \
            if exp_ids else {}
        user_ids = {e.owner_id for e in exps.values()}
        users = {u.id: u for u in s.scalars(select(models.User).where(models.User.id.in_(user_ids)))} \
            if user_ids else {}
        uuids = [t.latest_checkpoint for t in trials.values() if t.latest_checkpoint]
        ckpts = {c.uuid: c for c in s.scalars(select(models.Checkpoint).where(models.Checkpoint.uuid.in_(uuids)))} \
            if uuids else {}
        return cls(trials, exps, users, ckpts)

    def user_env(self, exp: models.Experiment) -> dict[str, str]:
        if exp.id not in self.env:
            self.env[exp.id] = ExperimentConfig.model_validate(exp.config).environment.as_dict()
        return self.env[exp.id]


def task_spec(cluster_id: str, alloc: models.Allocation, token: str, rows: SpecRows) -> dict[str, Any]:
    trial = rows.trials[alloc.trial_id]
    exp = rows.experiments[trial.experiment_id]
    owner = rows.users.get(exp.owner_id)
    ckpt = rows.checkpoints.get(trial.latest_checkpoint) if trial.latest_checkpoint else None
    env = task_env.trial_env(cluster_id=cluster_id, exp=exp, trial=trial, alloc=alloc, session_token=token,
                             username=owner.username if owner else "", user_env=rows.user_env(exp),
                             steps_completed=ckpt.steps_completed if ckpt else 0)
    return {"entrypoint": exp.config["entrypoint"], "env": env}

"""Task specs: what a trial's process is started with (entrypoint and DET_* environment), built
from rows loaded for a whole batch of placements in a few queries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.experiment_config import ExperimentConfig
from pedl.config.task_container import TaskContainerDefaults, container_spec, task_variables
from pedl.master.db import models
from pedl.master.services import task_env


@dataclass
class SpecRows:
    """The rows task specs need, loaded for a batch of trials in a few queries."""

    trials: dict[int, models.Trial]
    experiments: dict[int, models.Experiment]
    users: dict[int, models.User]
    checkpoints: dict[str, models.Checkpoint]
    runtimes: dict[int, TaskRuntimeSpec] = field(default_factory=dict)  # experiment id -> variables, container
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

    def runtime(self, exp: models.Experiment, defaults: TaskContainerDefaults) -> TaskRuntimeSpec:
        """The experiment's variables and container, with the master's task_container_defaults."""
        if exp.id not in self.runtimes:
            cfg = ExperimentConfig.model_validate(exp.config)
            plain, by_device = task_variables(defaults, cfg.environment)
            self.runtimes[exp.id] = TaskRuntimeSpec(plain, by_device,
                                                    container_spec(defaults, cfg.environment, cfg.bind_mounts))
        return self.runtimes[exp.id]


@dataclass(frozen=True)
class TaskRuntimeSpec:
    env: dict[str, str]  # every task of the experiment
    device_env: dict[str, dict[str, str]]  # {cpu, gpu}: the agent applies the one its slots are
    container: dict[str, Any] | None  # None: a process


def task_spec(cluster_id: str, alloc: models.Allocation, token: str, rows: SpecRows,
              defaults: TaskContainerDefaults | None = None) -> dict[str, Any]:
    trial = rows.trials[alloc.trial_id]
    exp = rows.experiments[trial.experiment_id]
    owner = rows.users.get(exp.owner_id)
    ckpt = rows.checkpoints.get(trial.latest_checkpoint) if trial.latest_checkpoint else None
    runtime = rows.runtime(exp, defaults or TaskContainerDefaults())
    env = task_env.trial_env(cluster_id=cluster_id, exp=exp, trial=trial, alloc=alloc, session_token=token,
                             username=owner.username if owner else "", user_env=runtime.env,
                             steps_completed=ckpt.steps_completed if ckpt else 0)
    return {"entrypoint": exp.config["entrypoint"], "env": env, "device_env": runtime.device_env,
            "container": runtime.container}

"""Task specs: what a trial's process is started with (entrypoint and DET_* environment), built
from rows loaded for a whole batch of placements in a few column queries (no ORM objects)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from pedl.common.agent_protocol import AgentUserGroup
from pedl.config.experiment_config import ExperimentConfig
from pedl.config.task_container import TaskContainerDefaults, container_spec, process_mounts, task_variables
from pedl.config.trial_api import task_entrypoint
from pedl.master.db import models
from pedl.master.db.base import table_of
from pedl.master.db.bulk_rows import dialect_of, id_list, in_list
from pedl.master.db.json_columns import as_text, loads
from pedl.master.lifecycle import generic_task_specs, task_env
from pedl.master.lifecycle.agent_user_groups import TaskUsers
from pedl.master.lifecycle.generic_task_specs import GenericRows

TRIAL = table_of(models.Trial)
EXPERIMENT = table_of(models.Experiment)
USER = table_of(models.User)
CHECKPOINT = table_of(models.Checkpoint)


@functools.cache
def _queries(dialect: str) -> tuple[Select[*tuple[Any, ...]], ...]:
    """(trials, experiments, users with their agent user groups, checkpoint steps) by a list of ids
    (the `ids` parameter)."""
    return (
        select(
            TRIAL.c.id,
            TRIAL.c.experiment_id,
            TRIAL.c.seed,
            as_text(TRIAL.c.hparams),
            TRIAL.c.run_id,
            TRIAL.c.latest_checkpoint,
            TRIAL.c.warm_start_checkpoint,
        ).where(in_list(TRIAL.c.id, dialect)),
        select(
            EXPERIMENT.c.id,
            EXPERIMENT.c.owner_id,
            as_text(EXPERIMENT.c.config),
            EXPERIMENT.c.searcher_state["seed"].as_integer(),
        ).where(in_list(EXPERIMENT.c.id, dialect)),
        select(
            USER.c.id, USER.c.username, USER.c.agent_uid, USER.c.agent_gid, USER.c.agent_user, USER.c.agent_group
        ).where(in_list(USER.c.id, dialect)),
        select(CHECKPOINT.c.uuid, CHECKPOINT.c.steps_completed).where(in_list(CHECKPOINT.c.uuid, dialect)),
    )


class TrialRow(NamedTuple):
    id: int
    experiment_id: int
    seed: int
    hparams_json: str  # as stored: the JSON column's encoding, json.dumps (DET_HPARAMS)
    run_id: int
    latest_checkpoint: str | None
    warm_start_checkpoint: str | None  # DET_LATEST_CHECKPOINT until the trial has its own


class ExperimentRow(NamedTuple):
    id: int
    owner_id: int
    config: dict[str, Any]
    config_json: str  # DET_EXPERIMENT_CONFIG: the stored config with the seed its searcher was started with


@dataclass
class SpecCache:
    """What a pass keeps between its batches: each experiment's parsed config and runtime, reused
    while the stored config text is the same (a config edited between batches is read again)."""

    experiments: dict[int, tuple[str, ExperimentRow]] = field(default_factory=dict)
    runtimes: dict[int, tuple[str, TaskRuntimeSpec, TaskContainerDefaults]] = field(default_factory=dict)

    def experiment(self, eid: int, owner_id: int, text: str, seed: int | None = None) -> ExperimentRow:
        cached = self.experiments.get(eid)
        if cached is None or cached[0] != text or cached[1].owner_id != owner_id:
            config = loads(text)
            reproducibility = config.get("reproducibility") or {}
            if seed is not None and reproducibility.get("experiment_seed") is None:
                config = {**config, "reproducibility": {**reproducibility, "experiment_seed": seed}}
            cached = (text, ExperimentRow(eid, owner_id, config, json.dumps(config)))
            self.experiments[eid] = cached
        return cached[1]


@dataclass
class SpecRows:
    """The rows task specs need, loaded for a batch of trials in a few queries."""

    trials: dict[int, TrialRow]
    experiments: dict[int, ExperimentRow]
    usernames: dict[int, str]  # user id -> username
    agent_groups: dict[int, AgentUserGroup]  # user id -> the agent user group it is linked with
    checkpoint_steps: dict[str, int]  # checkpoint uuid -> steps_completed
    cache: SpecCache = field(default_factory=lambda: SpecCache())
    generic: GenericRows = field(default_factory=lambda: GenericRows({}, {}, {}))  # commands, notebooks, ...
    agent_addresses: dict[str, str] = field(default_factory=dict)  # for distributed placements
    ports_in_use: dict[str, set[int]] = field(default_factory=dict)  # chief agent -> rendezvous ports

    @classmethod
    def load(
        cls, s: Session, trial_ids: list[int], cache: SpecCache | None = None, generic_task_ids: list[str] | None = None
    ) -> SpecRows:
        cache = cache or SpecCache()
        generic = GenericRows.load(s, generic_task_ids or [])
        dialect = dialect_of(s)
        q_trials, q_experiments, q_users, q_steps = _queries(dialect)
        trials = (
            {r[0]: TrialRow(*r) for r in s.execute(q_trials, {"ids": id_list(dialect, trial_ids)})} if trial_ids else {}
        )
        exp_ids = {t.experiment_id for t in trials.values()}
        exps = (
            {
                eid: cache.experiment(eid, owner_id, text, seed)
                for eid, owner_id, text, seed in s.execute(q_experiments, {"ids": id_list(dialect, exp_ids)})
            }
            if exp_ids
            else {}
        )
        user_ids = {e.owner_id for e in exps.values()}
        users: dict[int, str] = {}
        groups: dict[int, AgentUserGroup] = {}
        for uid, username, *group in s.execute(q_users, {"ids": id_list(dialect, user_ids)}) if user_ids else ():
            users[uid] = username
            if None not in group:
                groups[uid] = AgentUserGroup(uid=group[0], gid=group[1], user=group[2], group=group[3])
        uuids = {t.latest_checkpoint for t in trials.values() if t.latest_checkpoint}
        steps = dict(s.execute(q_steps, {"ids": id_list(dialect, uuids)}).all()) if uuids else {}
        return cls(trials, exps, users, groups, steps, cache, generic)

    def runtime(self, exp: ExperimentRow, defaults: TaskContainerDefaults) -> TaskRuntimeSpec:
        """The experiment's variables and container, with the task_container_defaults of its pool."""
        cached = self.cache.runtimes.get(exp.id)
        if cached is None or cached[0] != exp.config_json or (cached[2] is not defaults and cached[2] != defaults):
            cfg = ExperimentConfig.model_validate(exp.config)
            plain, by_device = task_variables(defaults, cfg.environment)
            container = container_spec(defaults, cfg.environment, cfg.bind_mounts, cfg.resources.shm_size)
            cached = (
                exp.config_json,
                TaskRuntimeSpec(
                    plain, by_device, container, cfg.resources.shm_size, process_mounts(defaults, cfg.bind_mounts)
                ),
                defaults,
            )
            self.cache.runtimes[exp.id] = cached
        return cached[1]


@dataclass(frozen=True)
class TaskRuntimeSpec:
    env: dict[str, str]  # every task of the experiment
    device_env: dict[str, dict[str, str]]  # {cpu, gpu}: the agent applies the one its slots are
    container: dict[str, Any] | None  # None: a process
    shm_size: int | None = None  # resources.shm_size: a process task's own /dev/shm (a container's is in `container`)
    bind_mounts: list[dict[str, Any]] = field(default_factory=list)  # a process task's (a container's: `container`)


def task_spec(
    cluster_id: str,
    alloc: Any,
    token: str,
    rows: SpecRows,
    defaults: TaskContainerDefaults | None = None,
    *,
    task_users: TaskUsers = TaskUsers(None, None),
) -> dict[str, Any]:
    """`alloc`: an Allocation or a row with its id, task_id and trial_id. The task runs as its
    owner's agent user group, else as `task_users` says (the owner's own uid)."""
    if alloc.trial_id is None:  # a command, notebook, shell or TensorBoard
        return generic_task_specs.spec(
            cluster_id, alloc, token, rows.generic, defaults or TaskContainerDefaults(), task_users
        )
    trial = rows.trials[alloc.trial_id]
    exp = rows.experiments[trial.experiment_id]
    steps = rows.checkpoint_steps.get(trial.latest_checkpoint, 0) if trial.latest_checkpoint else 0
    runtime = rows.runtime(exp, defaults or TaskContainerDefaults())
    env = task_env.trial_env(
        cluster_id=cluster_id,
        experiment_id=exp.id,
        config_json=exp.config_json,
        trial=trial,
        hparams_json=trial.hparams_json,
        alloc=alloc,
        session_token=token,
        username=rows.usernames.get(exp.owner_id, ""),
        user_env=runtime.env,
        steps_completed=steps,
    )
    return {
        "entrypoint": task_entrypoint(exp.config["entrypoint"]),
        "env": env,
        "device_env": runtime.device_env,
        "container": runtime.container,
        "run_as": task_users.run_as(
            exp.owner_id, rows.usernames.get(exp.owner_id, ""), rows.agent_groups.get(exp.owner_id)
        ),
        "shm_size": runtime.shm_size,
        "bind_mounts": runtime.bind_mounts,
    }

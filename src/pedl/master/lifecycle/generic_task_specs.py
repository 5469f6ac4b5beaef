"""Task specs of commands, notebooks, shells and TensorBoards: what their process is started with (the
kind's entrypoint, Determined's DET_* variables for a task that is no trial, the container), built
from rows loaded for a batch of placements in one query per table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common.agent_protocol import AgentUserGroup
from pedl.config.task_config import TaskConfig
from pedl.config.task_container import TaskContainerDefaults, container_spec, process_mounts, task_variables
from pedl.master.db import models
from pedl.master.db.base import table_of
from pedl.master.db.bulk_rows import dialect_of, id_list, in_list
from pedl.master.db.json_columns import loads
from pedl.master.lifecycle import task_kinds
from pedl.master.lifecycle.agent_user_groups import TaskUsers
from pedl.master.lifecycle.task_access import task_user_token

GENERIC = table_of(models.GenericTask)
USER = table_of(models.User)
TASK_TYPES = {
    "command": "COMMAND",
    "notebook": "NOTEBOOK",
    "shell": "SHELL",
    "tensorboard": "TENSORBOARD",
    task_kinds.CHECKPOINT_GC: "CHECKPOINT_GC",
}


class GenericRow(NamedTuple):
    id: str
    kind: str
    owner_id: int
    config: dict[str, Any]
    experiment_ids: list[Any]
    trial_ids: list[Any]
    secrets: dict[str, Any]


@dataclass(frozen=True)
class GenericRows:
    tasks: dict[str, GenericRow]
    usernames: dict[int, str]
    agent_groups: dict[int, AgentUserGroup]

    @classmethod
    def load(cls, s: Session, task_ids: list[str]) -> GenericRows:
        if not task_ids:
            return cls({}, {}, {})
        dialect = dialect_of(s)
        tasks = {
            r[0]: GenericRow(r[0], r[1], r[2], _json(r[3]), _json(r[4]) or [], _json(r[5]) or [], _json(r[6]) or {})
            for r in s.execute(
                select(
                    GENERIC.c.id,
                    GENERIC.c.kind,
                    GENERIC.c.owner_id,
                    GENERIC.c.config,
                    GENERIC.c.experiment_ids,
                    GENERIC.c.trial_ids,
                    GENERIC.c.secrets,
                ).where(in_list(GENERIC.c.id, dialect)),
                {"ids": id_list(dialect, task_ids)},
            )
        }
        owners = {t.owner_id for t in tasks.values()}
        users: dict[int, str] = {}
        groups: dict[int, AgentUserGroup] = {}
        if owners:
            for uid, username, *group in s.execute(
                select(
                    USER.c.id,
                    USER.c.username,
                    USER.c.agent_uid,
                    USER.c.agent_gid,
                    USER.c.agent_user,
                    USER.c.agent_group,
                ).where(in_list(USER.c.id, dialect)),
                {"ids": id_list(dialect, owners)},
            ):
                users[uid] = username
                if None not in group:
                    groups[uid] = AgentUserGroup(uid=group[0], gid=group[1], user=group[2], group=group[3])
        return cls(tasks, users, groups)


def _json(value: Any) -> Any:
    return loads(value) if isinstance(value, str | bytes) else value


def container_of(task: GenericRow, defaults: TaskContainerDefaults) -> dict[str, Any] | None:
    if task.kind == task_kinds.CHECKPOINT_GC:  # always a process (no image): its script needs only python3
        return None
    cfg = TaskConfig.model_validate({k: v for k, v in task.config.items() if k in TaskConfig.model_fields})
    return container_spec(defaults, cfg.environment, cfg.bind_mounts, cfg.resources.shm_size)


def spec(
    cluster_id: str, alloc: Any, token: str, rows: GenericRows, defaults: TaskContainerDefaults, task_users: TaskUsers
) -> dict[str, Any]:
    """The StartTask fields of a generic task's allocation (`alloc`: a row with id and task_id)."""
    task = rows.tasks[alloc.task_id]
    cfg = TaskConfig.model_validate({k: v for k, v in task.config.items() if k in TaskConfig.model_fields})
    plain, by_device = task_variables(defaults, cfg.environment)
    env = dict(plain)
    env.update(
        {
            "DET_CLUSTER_ID": cluster_id,
            "DET_TASK_ID": task.id,
            "DET_ALLOCATION_ID": alloc.id,
            "DET_RESOURCES_ID": alloc.id,
            "DET_SESSION_TOKEN": token,
            "DET_TASK_TYPE": TASK_TYPES[task.kind],
            "DET_USER": rows.usernames.get(task.owner_id, ""),
            "DET_USER_TOKEN": task_user_token(token),
        }
    )
    env.update(task_kinds.environment(task))
    return {
        "entrypoint": task_kinds.entrypoint(task),
        "env": env,
        "device_env": by_device,
        "container": container_of(task, defaults),
        "shm_size": cfg.resources.shm_size,
        "bind_mounts": process_mounts(defaults, cfg.bind_mounts),
        "run_as": task_users.run_as(
            task.owner_id, rows.usernames.get(task.owner_id, ""), rows.agent_groups.get(task.owner_id)
        ),
    }

"""Who a user's tasks run as on the agents: their agent user group (Determined's `det user
link-with-agent-user`), else a uid of their own (security.task_uid_base). Pure; the user row keeps the link."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pedl.common.agent_protocol import AgentUserGroup
from pedl.config.security_config import TASK_UIDS, SecurityConfig
from pedl.errors import InvalidArgument
from pedl.master.db import models

ID_MAX = 2**31 - 1  # Determined's proto fields are int32; Linux ids go up to 2^32-2
# POSIX portable user and group names (letters, digits, '.', '_', '-', not starting with '-'; a
# trailing '$' as Samba's machine accounts have); all digits would read as an id
NAME = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,253}\$?")
FIELDS = ("agentUid", "agentGid", "agentUser", "agentGroup")


def parse(value: Any, field: str = "agentUserGroup") -> AgentUserGroup | None:
    """The group a request names; None when it names none of the four fields (Determined: unlink).
    Some but not all of them, an id out of range or a name that is not a POSIX name is
    InvalidArgument naming the field."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgument.at(field, "must be an object {agentUid, agentGid, agentUser, agentGroup}")
    unknown = sorted(set(value) - set(FIELDS))
    if unknown:
        raise InvalidArgument.at(f"{field}.{unknown[0]}", "unknown field")
    given = {k: v for k, v in value.items() if v is not None}
    if not given:
        return None
    missing = [k for k in FIELDS if k not in given or given[k] == ""]
    if missing:
        raise InvalidArgument.at(
            f"{field}.{missing[0]}", "agentUid, agentGid, agentUser and agentGroup must all be set (or none, to unlink)"
        )
    for key in ("agentUid", "agentGid"):
        v = given[key]
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= ID_MAX:
            raise InvalidArgument.at(f"{field}.{key}", f"must be an integer from 0 to {ID_MAX}")
    for key in ("agentUser", "agentGroup"):
        v = given[key]
        if not isinstance(v, str) or not NAME.fullmatch(v) or v.rstrip("$").isdigit():
            raise InvalidArgument.at(
                f"{field}.{key}",
                "must be a POSIX user or group name: letters, digits, "
                "'.', '_' and '-', not starting with '-', "
                "not all digits, at most 255 characters",
            )
    return AgentUserGroup(
        uid=given["agentUid"], gid=given["agentGid"], user=given["agentUser"], group=given["agentGroup"]
    )


def refuse_users_range(group: AgentUserGroup | None, uid_base: int | None, field: str) -> None:
    """A link may not name a uid or gid of security.task_uid_base's range: it is another user's own
    (base + that user's id), so the linked user's tasks would share their files and processes."""
    if group is None or uid_base is None:
        return
    for key, value in (("agentUid", group.uid), ("agentGid", group.gid)):
        if uid_base <= value < uid_base + TASK_UIDS:
            raise InvalidArgument.at(
                f"{field}.{key}",
                f"{value} is the own uid of user {value - uid_base} "
                f"(security.task_uid_base: ids {uid_base} to "
                f"{uid_base + TASK_UIDS - 1} are the users' own)",
            )


def of_user(u: models.User) -> AgentUserGroup | None:
    if u.agent_uid is None or u.agent_gid is None or not u.agent_user or not u.agent_group:
        return None
    return AgentUserGroup(uid=u.agent_uid, gid=u.agent_gid, user=u.agent_user, group=u.agent_group)


def store(u: models.User, group: AgentUserGroup | None) -> None:
    u.agent_uid, u.agent_gid = (group.uid, group.gid) if group else (None, None)
    u.agent_user, u.agent_group = (group.user, group.group) if group else (None, None)


@dataclass(frozen=True)
class TaskUsers:
    """security.task_uid_base and security.default_task: who the tasks of a user with no link run as.

    Each user has a uid of their own (base + user id, gid the same), never one per task: a trial's
    shared_fs checkpoints must be readable by the next trial of its experiment and deletable by the
    experiment's checkpoint GC task, and all of them run as the owner. Only with task_uid_base null do
    users share default_task's uid, or the agent's own."""

    uid_base: int | None
    default: AgentUserGroup | None

    @classmethod
    def of(cls, security: SecurityConfig) -> TaskUsers:
        task = security.default_task
        default = None if task is None else AgentUserGroup(uid=task.uid, gid=task.gid, user=task.user, group=task.group)
        return cls(security.task_uid_base, default)

    def run_as(self, user_id: int, username: str, link: AgentUserGroup | None) -> AgentUserGroup | None:
        """The owner's link, else their own uid, else default_task; None: the agent's own user."""
        if link is not None:
            return link
        if self.uid_base is None:
            return self.default
        if not 0 <= user_id < TASK_UIDS:
            raise ValueError(
                f"user id {user_id} has no uid of its own (security.task_uid_base covers ids below {TASK_UIDS})"
            )
        uid = self.uid_base + user_id
        name = f"pedl-user-{username}" if NAME.fullmatch(f"pedl-user-{username}") else f"pedl-user-{user_id}"
        return AgentUserGroup(uid=uid, gid=uid, user=name, group=name, derived=True)

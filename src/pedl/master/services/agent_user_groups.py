"""Agent user groups (Determined's `det user link-with-agent-user`): the uid, gid, user and group
names a user's tasks run as on the agents. Parsing and checking are pure; the user row keeps them."""

from __future__ import annotations

import re
from typing import Any

from pedl.common.agent_protocol import AgentUserGroup
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
        raise InvalidArgument.at(f"{field}.{missing[0]}", "agentUid, agentGid, agentUser and agentGroup "
                                                          "must all be set (or none, to unlink)")
    for key in ("agentUid", "agentGid"):
        v = given[key]
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= ID_MAX:
            raise InvalidArgument.at(f"{field}.{key}", f"must be an integer from 0 to {ID_MAX}")
    for key in ("agentUser", "agentGroup"):
        v = given[key]
        if not isinstance(v, str) or not NAME.fullmatch(v) or v.rstrip("$").isdigit():
            raise InvalidArgument.at(f"{field}.{key}", "must be a POSIX user or group name: letters, digits, "
                                                       "'.', '_' and '-', not starting with '-', "
                                                       "not all digits, at most 255 characters")
    return AgentUserGroup(uid=given["agentUid"], gid=given["agentGid"], user=given["agentUser"],
                          group=given["agentGroup"])


def of_user(u: models.User) -> AgentUserGroup | None:
    if u.agent_uid is None or u.agent_gid is None or not u.agent_user or not u.agent_group:
        return None
    return AgentUserGroup(uid=u.agent_uid, gid=u.agent_gid, user=u.agent_user, group=u.agent_group)


def store(u: models.User, group: AgentUserGroup | None) -> None:
    u.agent_uid, u.agent_gid = (group.uid, group.gid) if group else (None, None)
    u.agent_user, u.agent_group = (group.user, group.group) if group else (None, None)


def shape(group: AgentUserGroup | None) -> dict[str, Any] | None:
    """Determined's v1AgentUserGroup; null for a user not linked."""
    if group is None:
        return None
    return {"agentUid": group.uid, "agentGid": group.gid, "agentUser": group.user, "agentGroup": group.group}

"""Users as Determined's v1User."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.master.lifecycle import agent_user_groups
from pedl.master.wire import user as wire
from pedl.master.wire.base import ts

if TYPE_CHECKING:
    from pedl.master.db import models


def user(u: models.User) -> wire.User:
    group = agent_user_groups.of_user(u)
    linked = (
        None
        if group is None
        else wire.AgentUserGroup(agentUid=group.uid, agentGid=group.gid, agentUser=group.user, agentGroup=group.group)
    )
    return wire.User(
        id=u.id,
        username=u.username,
        admin=u.admin,
        active=u.active,
        displayName=u.display_name or "",
        remote=False,
        modifiedAt=ts(u.modified_at),
        agentUserGroup=linked,
    )

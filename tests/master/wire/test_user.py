"""v1User: what a linked and an unlinked user look like on the wire."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.user import AgentUserGroup, GetUserResponse, User


def a_user(**extra) -> User:
    return User(
        id=3,
        username="alice",
        admin=False,
        active=True,
        displayName="",
        remote=False,
        modifiedAt="2026-01-01T00:00:00Z",
        agentUserGroup=None,
        **extra,
    )


def test_an_unlinked_user_sends_a_null_agent_user_group() -> None:
    assert GetUserResponse(user=a_user()).model_dump(exclude_unset=True)["user"]["agentUserGroup"] is None


def test_a_linked_user_sends_all_four_fields() -> None:
    group = AgentUserGroup(agentUid=1000, agentGid=1000, agentUser="alice", agentGroup="staff")
    user = a_user().model_copy(update={"agentUserGroup": group})
    assert user.model_dump()["agentUserGroup"] == {
        "agentUid": 1000,
        "agentGid": 1000,
        "agentUser": "alice",
        "agentGroup": "staff",
    }


def test_every_field_is_required() -> None:
    with pytest.raises(ValidationError, match="username"):
        User.model_validate(
            {
                "id": 1,
                "admin": False,
                "active": True,
                "displayName": "",
                "remote": False,
                "modifiedAt": None,
                "agentUserGroup": None,
            }
        )

"""A user row as v1User, exactly: the keys det and the WebUI read."""

from __future__ import annotations

from pedl.master.db import models
from pedl.master.identity import to_wire


def test_an_unlinked_user() -> None:
    row = models.User(id=7, username="bob", admin=True, active=False, display_name=None, modified_at=0.0)
    assert to_wire.user(row).model_dump() == {
        "id": 7,
        "username": "bob",
        "admin": True,
        "active": False,
        "displayName": "",
        "remote": False,
        "modifiedAt": "1970-01-01T00:00:00Z",
        "agentUserGroup": None,
    }


def test_a_linked_user() -> None:
    row = models.User(
        id=8,
        username="carol",
        admin=False,
        active=True,
        display_name="Carol",
        modified_at=None,
        agent_uid=1001,
        agent_gid=1002,
        agent_user="carol",
        agent_group="lab",
    )
    shown = to_wire.user(row).model_dump()
    assert shown["displayName"] == "Carol" and shown["modifiedAt"] is None
    assert shown["agentUserGroup"] == {"agentUid": 1001, "agentGid": 1002, "agentUser": "carol", "agentGroup": "lab"}


def test_a_half_linked_user_is_unlinked() -> None:
    row = models.User(id=9, username="dan", admin=False, active=True, agent_uid=1001, agent_gid=None)
    assert to_wire.user(row).agentUserGroup is None

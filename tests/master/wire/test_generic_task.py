"""Commands, notebooks, shells and TensorBoards: each kind's message extends the shared fields, a shell's
private key is left out unless set, and each kind's five routes have their answers."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.generic_task import ANSWERS, Command, Shell, ShellUser

COMMON = {
    "id": "c-1",
    "description": "d",
    "jobId": "c-1",
    "resourcePool": "default",
    "startTime": "x",
    "state": "STATE_RUNNING",
    "username": "u",
    "userId": 2,
    "displayName": "u",
    "workspaceId": 1,
    "exitStatus": "",
    "isReady": True,
}


def test_a_shell_without_its_private_key_leaves_the_key_out() -> None:
    shell = Shell(
        **COMMON,
        publicKey="ssh-ed25519 AAA",
        addresses=[],
        agentUserGroup=ShellUser(uid=0, gid=0, user="root", group="root"),
    )
    shown = ANSWERS["shell"].one.model_validate({"shell": shell}).model_dump(exclude_unset=True)
    assert "privateKey" not in shown["shell"] and shown["shell"]["publicKey"] == "ssh-ed25519 AAA"


def test_a_command_has_no_service_address() -> None:
    with pytest.raises(ValidationError, match="serviceAddress"):
        Command.model_validate({**COMMON, "serviceAddress": "/proxy/c-1/"})


@pytest.mark.parametrize("kind", ["command", "notebook", "shell", "tensorboard"])
def test_each_kind_answers_under_its_own_name(kind: str) -> None:
    answers = ANSWERS[kind]
    assert set(answers.launch.model_fields) == {kind, "config", "warnings"}
    assert set(answers.listing.model_fields) == {f"{kind}s"}
    assert set(answers.get.model_fields) == {kind, "config"}
    assert set(answers.one.model_fields) == {kind}

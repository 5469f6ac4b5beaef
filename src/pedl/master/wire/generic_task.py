"""v1Command, v1Notebook, v1Shell and v1Tensorboard (commands, notebooks, shells and TensorBoards:
Determined's NTSC tasks), and the answers of their five routes each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pedl.master.wire.base import WireModel


class GenericTask(WireModel):
    """What the four messages share."""

    id: str
    description: str
    jobId: str
    resourcePool: str
    startTime: str
    state: str  # taskv1State
    username: str
    userId: int
    displayName: str
    workspaceId: int
    exitStatus: str
    isReady: bool


class Command(GenericTask):
    pass


class Notebook(GenericTask):
    serviceAddress: str  # where the master proxies it: /proxy/{id}/


class ShellUser(WireModel):
    """Who a shell runs as on the agent (det shell opens ssh as `user`)."""

    uid: int
    gid: int
    user: str
    group: str


class Shell(GenericTask):
    """`privateKey` goes only to its owner and admins (set only for them)."""

    publicKey: str
    addresses: list[Any]
    agentUserGroup: ShellUser
    privateKey: str | None = None


class Tensorboard(GenericTask):
    serviceAddress: str
    experimentIds: list[int]
    trialIds: list[int]


AnyTask = Command | Notebook | Shell | Tensorboard


class LaunchCommandResponse(WireModel):
    command: Command
    config: dict[str, Any]
    warnings: list[str]


class GetCommandsResponse(WireModel):
    commands: list[Command]


class GetCommandResponse(WireModel):
    command: Command
    config: dict[str, Any]


class CommandResponse(WireModel):
    """A command killed or given a new priority."""

    command: Command


class LaunchNotebookResponse(WireModel):
    notebook: Notebook
    config: dict[str, Any]
    warnings: list[str]


class GetNotebooksResponse(WireModel):
    notebooks: list[Notebook]


class GetNotebookResponse(WireModel):
    notebook: Notebook
    config: dict[str, Any]


class NotebookResponse(WireModel):
    notebook: Notebook


class LaunchShellResponse(WireModel):
    shell: Shell
    config: dict[str, Any]
    warnings: list[str]


class GetShellsResponse(WireModel):
    shells: list[Shell]


class GetShellResponse(WireModel):
    shell: Shell
    config: dict[str, Any]


class ShellResponse(WireModel):
    shell: Shell


class LaunchTensorboardResponse(WireModel):
    tensorboard: Tensorboard
    config: dict[str, Any]
    warnings: list[str]


class GetTensorboardsResponse(WireModel):
    tensorboards: list[Tensorboard]


class GetTensorboardResponse(WireModel):
    tensorboard: Tensorboard
    config: dict[str, Any]


class TensorboardResponse(WireModel):
    tensorboard: Tensorboard


@dataclass(frozen=True)
class KindAnswers:
    """The answer models of one kind's routes (api/ntsc.py declares them)."""

    launch: type[WireModel]
    listing: type[WireModel]
    get: type[WireModel]
    one: type[WireModel]


ANSWERS = {
    "command": KindAnswers(
        launch=LaunchCommandResponse, listing=GetCommandsResponse, get=GetCommandResponse, one=CommandResponse
    ),
    "notebook": KindAnswers(
        launch=LaunchNotebookResponse, listing=GetNotebooksResponse, get=GetNotebookResponse, one=NotebookResponse
    ),
    "shell": KindAnswers(
        launch=LaunchShellResponse, listing=GetShellsResponse, get=GetShellResponse, one=ShellResponse
    ),
    "tensorboard": KindAnswers(
        launch=LaunchTensorboardResponse,
        listing=GetTensorboardsResponse,
        get=GetTensorboardResponse,
        one=TensorboardResponse,
    ),
}

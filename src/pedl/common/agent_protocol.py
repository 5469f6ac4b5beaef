"""Messages between agent and master over the agent WebSocket (`/agents/ws`), as JSON objects
with a `type` field. Both sides import these models, so the protocol lives in one place.

Connection: the agent opens the socket with its credential (`X-Pedl-Agent-Credential`, once it has one)
and the enrollment secret (`X-Pedl-Agent-Token`) and sends `register` first; the master answers
`registered` (with the agent's own credential at its first registration) or closes with code 4401 (no
or wrong secret, or an id whose credential was not presented) / 4400.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Msg(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SlotInfo(_Msg):
    id: str  # "0", "1", ... stable per agent
    type: Literal["cuda", "cpu"] = "cpu"
    brand: str = ""
    uuid: str = ""
    memory_mib: int = 0


# agent -> master


class Register(_Msg):
    type: Literal["register"] = "register"
    agent_id: str
    hostname: str
    address: str
    resource_pool: str = "default"
    slots: list[SlotInfo] = Field(default_factory=list)
    version: str = ""
    running_allocations: list[str] = Field(default_factory=list)  # kept across reconnects
    container_runtime: str = ""  # "docker" when the agent runs tasks that name an image; "" when it cannot


class Heartbeat(_Msg):
    type: Literal["heartbeat"] = "heartbeat"
    running_allocations: list[str] = Field(default_factory=list)


class TaskStarted(_Msg):
    type: Literal["task_started"] = "task_started"
    allocation_id: str
    pid: int


class LogLine(_Msg):
    timestamp: float
    stdtype: Literal["stdout", "stderr", "agent"] = "stdout"
    message: str


class TaskLogs(_Msg):
    type: Literal["task_logs"] = "task_logs"
    allocation_id: str
    lines: list[LogLine]


class TaskExited(_Msg):
    type: Literal["task_exited"] = "task_exited"
    allocation_id: str
    exit_code: int | None  # None when it never started
    reason: str = ""


class SpotInterruption(_Msg):
    """The cloud announced it will reclaim this (spot) instance: the master preempts its tasks."""

    type: Literal["spot_interruption"] = "spot_interruption"
    action: str = "terminate"
    time: str = ""


class PortChecked(_Msg):
    """The answer to `check_port`: whether a socket listening on that port belongs to a process of the task."""

    type: Literal["port_checked"] = "port_checked"
    request_id: str
    allocation_id: str
    port: int
    owned: bool
    reason: str = ""  # why not, for the task's error


AgentMessage = Annotated[
    Register | Heartbeat | TaskStarted | TaskLogs | TaskExited | SpotInterruption | PortChecked,
    Field(discriminator="type"),
]
AGENT_MESSAGE = TypeAdapter(AgentMessage)


# master -> agent


class Registered(_Msg):
    type: Literal["registered"] = "registered"
    agent_id: str
    heartbeat_interval: float
    kill_unknown: list[str] = Field(default_factory=list)  # allocations the master has ended
    # fencing: an agent that has not heard from the master for this long must kill its tasks, which
    # the master has by then given to other agents; None (an older master): the agent keeps them
    reconnect_wait: float | None = None
    kill_grace_period: float | None = None  # SIGTERM to SIGKILL for those kills; None: KillTask's default
    # the agent's own credential, issued at its first registration (the master keeps only its hash): the
    # agent stores it and presents it on every later connection; None when it already has one
    credential: str | None = None


class AgentUserGroup(_Msg):
    """Who a task runs as on the agent (Determined's agent user group): its process's uid and gid, or
    the container's --user; the names are those the task sees (`id -u -n`)."""

    uid: int
    gid: int
    user: str
    group: str
    # a uid of the user's own that the master derived (security.task_uid_base: the user has no link): a
    # root agent runs the task as it, any other agent as itself
    derived: bool = False


class StartTask(_Msg):
    type: Literal["start_task"] = "start_task"
    allocation_id: str
    task_id: str
    name: str
    entrypoint: str | list[str]
    env: dict[str, str]
    slot_ids: list[str]
    session_token: str
    context_url: str  # GET it with the session token for the model definition (b64 tgz)
    # the experiment's {cpu, gpu} variables: the agent applies the one of the slots it gave the task
    device_env: dict[str, dict[str, str]] = Field(default_factory=dict)
    container: ContainerSpec | None = None  # None: a process; else the task runs in this container
    # the owner's agent user group, else the owner's own derived uid (security.task_uid_base), else the
    # master's security.default_task; None: the agent's own user
    run_as: AgentUserGroup | None = None
    # security.bind_mounts.allowed_roots: the host paths bind_mounts may lie under (the agent checks them
    # resolved); None: anywhere
    bind_mount_roots: list[str] | None = None
    # the pool's task_container_defaults.startup_hook: shell run before the context's startup-hook.sh
    startup_hook: str = ""
    # resources.shm_size: a process task gets a /dev/shm of its own this size (a container: ContainerSpec's)
    shm_size_bytes: int | None = None
    # a process task's bind mounts (host_path, container_path, read_only), made in its mount namespace (a
    # container's are in ContainerSpec)
    bind_mounts: list[dict[str, Any]] = Field(default_factory=list)


class ContainerSpec(_Msg):
    """A task's container, from its experiment and the master's task_container_defaults."""

    image_cpu: str | None = None
    image_gpu: str | None = None
    force_pull: bool = False
    registry_auth: dict[str, str] | None = None
    bind_mounts: list[dict[str, Any]] = Field(default_factory=list)  # host_path, container_path, read_only, ...
    shm_size_bytes: int = 4 * 2**30
    network_mode: str = "host"


class KillTask(_Msg):
    type: Literal["kill_task"] = "kill_task"
    allocation_id: str
    grace_period: float = 10.0
    reason: str = ""


class CheckPort(_Msg):
    """Does a process of this allocation's task listen on this port? Answered with `port_checked`."""

    type: Literal["check_port"] = "check_port"
    request_id: str
    allocation_id: str
    port: int


StartTask.model_rebuild()
MasterMessage = Annotated[Registered | StartTask | KillTask | CheckPort, Field(discriminator="type")]
MASTER_MESSAGE = TypeAdapter(MasterMessage)


def dump(msg: BaseModel) -> dict[str, Any]:
    return msg.model_dump(mode="json")


TOKEN_HEADER = "X-Pedl-Agent-Token"  # the enrollment secret (the cluster's, or an instance's single-use one)
CREDENTIAL_HEADER = "X-Pedl-Agent-Credential"  # the agent's own credential

CLOSE_UNAUTHORIZED = 4401
CLOSE_BAD_REQUEST = 4400
CLOSE_REPLACED = 4409
CLOSE_VERSION_MISMATCH = 4426  # the agent's pedl is not the master's version: install the master's

"""The config of a command, notebook, shell or TensorBoard (Determined's NTSC tasks), with Determined's
key names. Unknown keys are errors; every problem is listed with its field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from pedl.config.byte_sizes import ShmSize
from pedl.config.durations import Duration
from pedl.config.experiment_config import MAX_SLOTS_PER_TRIAL, EnvironmentConfig, Name, validate_checked
from pedl.config.loading import StrictModel
from pedl.config.task_container import BindMount

if TYPE_CHECKING:
    from pedl.config.security_config import LimitsConfig

KINDS = ("command", "notebook", "shell", "tensorboard")
MAX_DESCRIPTION = 512
MAX_IDLE_TIMEOUT = 365 * 24 * 3600.0


class TaskResources(StrictModel):
    slots: int | None = Field(
        default=None, ge=0, description="slots the task holds (0: none); left out: 1, a TensorBoard's 0"
    )
    resource_pool: Name | None = None
    priority: int | None = Field(default=None, ge=1, le=99, description="1 is most urgent")
    weight: float = Field(default=1.0, gt=0, le=1_000_000, allow_inf_nan=False)
    shm_size: ShmSize = Field(
        default=None,
        description="/dev/shm of the task: bytes, or '512m', '1.5g' (powers of 1024); "
        "left out: task_container_defaults.shm_size_bytes in a container, "
        "the host's /dev/shm for a process",
    )
    # Determined keys accepted and not used: a process or container on one agent has no other say
    max_slots: int | None = Field(default=None, ge=0, le=1_000_000, description="accepted, unused")
    devices: list[Any] | None = Field(default=None, description="accepted, unused")
    is_single_node: bool | None = Field(default=None, description="accepted, unused")

    @field_validator("slots")
    @classmethod
    def _slots(cls, v: int | None) -> int | None:
        if v is not None and v > MAX_SLOTS_PER_TRIAL:  # Determined's words for it
            raise ValueError(f"request unfulfillable: {v} slots, more than a task may hold ({MAX_SLOTS_PER_TRIAL})")
        return v


class TaskConfig(StrictModel):
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    entrypoint: str | list[str] | None = Field(default=None, description="a command's argv (or shell text)")
    resources: TaskResources = Field(default_factory=TaskResources)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    bind_mounts: list[BindMount] = Field(default_factory=list, description="host directories the task sees")
    # a task starts in its own directory, where its context is (Determined's /run/determined/workdir)
    work_dir: str | None = Field(default=None, max_length=4096, description="accepted, unused")
    idle_timeout: Duration | None = Field(
        default=None,
        ge=1,
        le=MAX_IDLE_TIMEOUT,
        description="a notebook or TensorBoard unused for this long is killed (none: never)",
    )
    notebook_idle_type: Literal["kernels_or_terminals", "kernel_connections", "activity"] = Field(
        default="kernels_or_terminals", description="what keeps a notebook busy"
    )
    tensorboard_args: list[str] = Field(default_factory=list, description="more arguments for tensorboard")
    # accepted and not used (Determined's debug logging, and the HPC launchers pedl has none of)
    debug: bool | None = Field(default=None, description="accepted, unused")
    pbs: dict[str, Any] | None = Field(default=None, description="accepted, unused")
    slurm: dict[str, Any] | None = Field(default=None, description="accepted, unused")

    @field_validator("entrypoint", mode="before")
    @classmethod
    def _entrypoint_type(cls, v: Any) -> Any:
        if v is None or isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            return v
        raise ValueError("must be a command string or a list of strings")


def parse_task_config(kind: str, data: Any, *, limits: LimitsConfig | None = None) -> TaskConfig:
    """`data` (the request's config object) validated for `kind`; every problem names its field."""
    from pedl.errors import InvalidArgument

    source = f"{kind} config"
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidArgument.at("config", "must be an object")
    # a command with no entrypoint is taken, as Determined takes it; it ends at once, its agent saying why
    return validate_checked(TaskConfig, data, source, limits)

"""Task containers, with Determined's keys: an experiment's `environment` and `bind_mounts`, and
master.yaml's `task_container_defaults`, which an experiment's own values override.

A task that names an image runs in a container on an agent with Docker; one that names none runs
as a process. `{cpu, gpu}` forms pick by the slots the task got (CUDA slots: gpu).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pedl.config.loading import StrictModel

PORT_RANGE = r"^\d{1,5}:\d{1,5}$"  # Determined writes port ranges as "low:high"
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$")


def image_name(v: str) -> str:
    if not _IMAGE.match(v) or len(v) > 512:
        raise ValueError("must be a Docker image reference (letters, digits and ._/:@+-)")
    return v


class DeviceImages(StrictModel):
    """An image per device type, as Determined allows (`cuda` is its name for `gpu`)."""

    cpu: str | None = None
    gpu: str | None = None
    cuda: str | None = None
    rocm: str | None = None

    _names = field_validator("cpu", "gpu", "cuda", "rocm")(lambda cls, v: v if v is None else image_name(v))

    def pick(self, gpu: bool) -> str | None:
        return (self.gpu or self.cuda) if gpu else self.cpu


def per_device(image: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """An image as Determined stores a task's: one name becomes {cpu, cuda, rocm}, each that name (which
    DeviceImages.pick reads as the same image on every device)."""
    if isinstance(image, str):
        return {"cpu": image, "cuda": image, "rocm": image}
    return image


class DeviceEnvironment(StrictModel):
    cpu: list[str] | dict[str, str] = Field(default_factory=list)
    gpu: list[str] | dict[str, str] = Field(default_factory=list)
    cuda: list[str] | dict[str, str] = Field(default_factory=list)
    rocm: list[str] | dict[str, str] = Field(default_factory=list)


class RegistryAuth(StrictModel):
    """Credentials for a private registry (Docker's auth config)."""

    username: str | None = None
    password: str | None = None
    auth: str | None = None
    email: str | None = None
    serveraddress: str | None = None
    identitytoken: str | None = None
    registrytoken: str | None = None


class BindMount(StrictModel):
    host_path: str = Field(..., min_length=1, description="absolute path on the agent's host")
    container_path: str = Field(
        ..., min_length=1, description="path in the task: absolute, or relative to its working directory"
    )
    read_only: bool = False
    propagation: Literal["rprivate", "private", "rshared", "shared", "rslave", "slave"] = "rprivate"

    @field_validator("host_path", "container_path")
    @classmethod
    def _plain(cls, v: str) -> str:
        if "\x00" in v or ":" in v or "," in v:
            raise ValueError("must not contain ':' or ','")
        return v

    @field_validator("host_path")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("must be an absolute path")
        return v

    @field_validator("container_path")
    @classmethod
    def _inside_when_relative(cls, v: str) -> str:
        if not v.startswith("/") and ".." in v.split("/"):
            raise ValueError("a relative path must stay in the task's working directory (no '..')")
        return v

    @field_validator("container_path")
    @classmethod
    def _not_reserved(cls, v: str) -> str:
        if v.rstrip("/") in ("", "/run/determined", "/run/determined/info", "/run/determined/workdir"):
            raise ValueError(f"{v!r} is where pedl puts the task's own files")
        return v


def env_pairs(value: list[str] | dict[str, str]) -> dict[str, str]:
    """NAME=VALUE entries as a mapping. A bare NAME, which Determined passes on to Docker (where it means
    the client's own value, and the master has none to give), sets nothing."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    return dict(item.split("=", 1) for item in value if "=" in item)


# the variables the agent acts on as root: DET_EXPERIMENT_CONFIG names the shared_fs host_path it mounts
# read-write at /determined_shared_fs and creates directories in, DET_CLUSTER_ID directories it creates
# there (pedl.agent.task_info). The master alone sets them; a task's config and task_container_defaults never do.
MASTER_ONLY_VARIABLES = frozenset({"DET_EXPERIMENT_CONFIG", "DET_CLUSTER_ID"})


def master_only_problems(value: list[str] | dict[str, str] | DeviceEnvironment) -> list[tuple[str, str]]:
    """(path under environment_variables, message) for each variable of `value` (a config's
    environment_variables, in any of its forms) that only the master sets."""
    forms = (
        [(f".{d}", getattr(value, d)) for d in DeviceEnvironment.model_fields]
        if isinstance(value, DeviceEnvironment)
        else [("", value)]
    )
    problems = []
    for prefix, form in forms:
        names = (
            [(f"[{i}]", item.split("=", 1)[0]) for i, item in enumerate(form)]
            if isinstance(form, list)
            else [(f".{name}", str(name)) for name in form]
        )
        problems += [
            (
                f"environment_variables{prefix}{at}",
                f"{name} is set by the master only (the agent "
                "trusts it to pick what it mounts and creates as root); remove it",
            )
            for at, name in names
            if name in MASTER_ONLY_VARIABLES
        ]
    return problems


def check_env_list(value: Any) -> Any:
    if isinstance(value, list):
        for item in value:
            name = item.split("=", 1)[0]
            if not name or "\x00" in item:
                raise ValueError(f"{item!r} is not NAME=VALUE (or a bare NAME)")
    return value


class TaskContainerDefaults(StrictModel):
    """master.yaml `task_container_defaults`: what every task gets unless its experiment says
    otherwise."""

    image: str | DeviceImages | None = Field(
        default=None, description="default image; tasks without one (here or in their experiment) run as processes"
    )
    force_pull_image: bool = False
    registry_auth: RegistryAuth | None = None
    bind_mounts: list[BindMount] = Field(default_factory=list, description="added before the experiment's own")
    environment_variables: list[str] | dict[str, str] | DeviceEnvironment = Field(default_factory=list)
    shm_size_bytes: int = Field(
        default=4 * 2**30, ge=0, le=2**40, description="/dev/shm of a container (Docker's --shm-size)"
    )
    network_mode: Literal["host", "bridge"] = Field(
        default="host", description="containers share the agent's network (host), or get Docker's bridge"
    )
    gloo_port_range: str | None = Field(
        default=None, pattern=PORT_RANGE, description="GLOO_PORT_RANGE in tasks, low:high"
    )
    nccl_port_range: str | None = Field(
        default=None, pattern=PORT_RANGE, description="NCCL_PORT_RANGE in tasks, low:high"
    )
    dtrain_network_interface: str | None = Field(
        default=None, max_length=64, description="interface distributed training uses (NCCL/GLOO_SOCKET_IFNAME)"
    )
    startup_hook: str | None = Field(
        default=None,
        max_length=65536,
        description="shell commands every task runs in its own shell before its context's "
        "startup-hook.sh and its entrypoint (output in the task's logs)",
    )

    _image = field_validator("image")(lambda cls, v: image_name(v) if isinstance(v, str) else v)
    _env = field_validator("environment_variables")(lambda cls, v: check_env_list(v))

    @model_validator(mode="after")
    def _ranges(self) -> TaskContainerDefaults:
        for key in ("gloo_port_range", "nccl_port_range"):
            value = getattr(self, key)
            if value is not None:
                lo, hi = (int(p) for p in value.split(":"))
                if not 1 <= lo <= hi <= 65535:
                    raise ValueError(f"{key}: must be low:high within 1-65535")
        return self


def container_spec(
    defaults: TaskContainerDefaults, environment: Any, bind_mounts: list[BindMount], shm_size: int | None = None
) -> dict[str, Any] | None:
    """What an agent needs to run a task in a container (the agent picks the cpu or gpu image by the
    slots it gives the task), or None for a process task: no image here or in the defaults.
    `shm_size`: the task's resources.shm_size, over the defaults' shm_size_bytes."""
    image = environment.image if environment.image is not None else defaults.image
    if image is None:
        return None
    images = image if isinstance(image, DeviceImages) else DeviceImages(cpu=image, gpu=image)
    auth = environment.registry_auth or defaults.registry_auth
    force = environment.force_pull_image if environment.force_pull_image is not None else defaults.force_pull_image
    return {
        "image_cpu": images.pick(False),
        "image_gpu": images.pick(True),
        "force_pull": force,
        "registry_auth": auth.model_dump(exclude_none=True) if auth else None,
        "bind_mounts": [m.model_dump() for m in [*defaults.bind_mounts, *bind_mounts]],
        "shm_size_bytes": shm_size or defaults.shm_size_bytes,
        "network_mode": defaults.network_mode,
    }


def process_mounts(defaults: TaskContainerDefaults, bind_mounts: list[BindMount]) -> list[dict[str, Any]]:
    """The bind mounts of a task that runs as a process (in a mount namespace of its own on the agent):
    the defaults' and then its own, as a container gets them."""
    return [m.model_dump() for m in [*defaults.bind_mounts, *bind_mounts]]


def task_variables(
    defaults: TaskContainerDefaults, environment: Any
) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """(variables for every task, variables by device type from {cpu, gpu} forms); the defaults'
    first, the experiment's over them; never one of MASTER_ONLY_VARIABLES."""
    plain: dict[str, str] = dict(network_variables(defaults))
    by_device: dict[str, dict[str, str]] = {"cpu": {}, "gpu": {}}
    for value in (defaults.environment_variables, environment.environment_variables):
        if isinstance(value, DeviceEnvironment):
            by_device["cpu"].update(env_pairs(value.cpu))
            by_device["gpu"].update({**env_pairs(value.cuda), **env_pairs(value.gpu)})
        else:
            plain.update(env_pairs(value))
    for env in (plain, *by_device.values()):  # a config stored before submissions were refused them
        for name in MASTER_ONLY_VARIABLES:
            env.pop(name, None)
    return plain, by_device


def network_variables(defaults: TaskContainerDefaults) -> dict[str, str]:
    """What distributed training libraries read of the master's network settings."""
    env: dict[str, str] = {}
    if defaults.dtrain_network_interface:
        iface = defaults.dtrain_network_interface
        env.update(
            {"DET_INTER_NODE_NETWORK_INTERFACE": iface, "NCCL_SOCKET_IFNAME": iface, "GLOO_SOCKET_IFNAME": iface}
        )
    if defaults.nccl_port_range:
        env["NCCL_PORT_RANGE"] = defaults.nccl_port_range
    if defaults.gloo_port_range:
        env["GLOO_PORT_RANGE"] = defaults.gloo_port_range
    return env

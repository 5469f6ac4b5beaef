"""Dynamic agents: each resource pool's `provider:` (Determined's form), a discriminated union on
`type`. Field names, meanings and defaults are the seeds' (see provisioning.md)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from pedl.config import instance_types
from pedl.config.consolidation_config import ConsolidationConfig
from pedl.config.durations import Duration
from pedl.config.loading import StrictModel

EC2_ALIASES = ("ec2.local-ipv4", "ec2.public-ipv4", "ec2.local-hostname", "ec2.public-hostname")
GCE_ALIASES = ("gce.internal-ip", "gce.external-ip")
DEFAULT_MASTER_PORT = 8080
# how long a (type, spot) pair is avoided after a capacity error or an unfulfilled spot request, by default
DEFAULT_CAPACITY_RETRY = 600.0
# The typical spot discount: spot capacity costs about this fraction of the on-demand price. It is the
# spot price assumed where none is configured, and the simulator's default (`pedl sim --spot-price`).
DEFAULT_SPOT_FRACTION = 0.35
_URL = re.compile(r"^(?:(?P<scheme>https?)://)?(?P<host>[^:/\s]+)(?::(?P<port>\d{1,5}))?/?$")


def parse_master_url(value: str) -> tuple[str, str, int, bool]:
    """(scheme, host or alias, port, is_alias); the port defaults to 8080."""
    m = _URL.match(value.strip())
    if not m:
        raise ValueError(f"{value!r} is not scheme://host:port or an alias such as ec2.local-ipv4:8080")
    port = int(m.group("port") or DEFAULT_MASTER_PORT)
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is out of range")
    host = m.group("host")
    return m.group("scheme") or "http", host, port, host in EC2_ALIASES + GCE_ALIASES


class ProviderCommon(StrictModel):
    master_url: str | None = Field(
        default=None,
        alias="master_address",
        description="how agents reach the master; an alias (ec2.local-ipv4, gce.internal-ip, ...) is "
        "resolved from the instance metadata service at start; port defaults to 8080",
    )
    startup_script: str = Field(default="", description="shell run on each new instance before the agent starts")
    agent_docker_network: str = Field(default="pedl", description="kept for compatibility with Determined")
    max_idle_agent_period: Duration = Field(default=300.0, description="idle time before an instance is terminated")
    max_agent_starting_period: Duration = Field(default=1200.0, description="time a launched instance has to register")
    max_disconnected_period: Duration = Field(
        default=600.0, description="time an instance's agent may stay disconnected before the instance is terminated"
    )
    max_instances: int = Field(default=5, ge=0)
    min_instances: int = Field(default=0, ge=0)
    launch_error_backoff: Duration = Field(default=5.0, description="first wait after a failed launch; doubles")
    launch_error_backoff_max: Duration = Field(default=300.0, description="cap of the launch backoff")
    capacity_retry_period: Duration = Field(
        default=DEFAULT_CAPACITY_RETRY,
        gt=0,
        description="how long a type (spot or on-demand) is avoided after a capacity error or an unfulfilled spot "
        "request; spot is asked for again after it",
    )
    consolidation: ConsolidationConfig = Field(
        default_factory=ConsolidationConfig,
        description="moving checkpointed trials so that half-empty or on-demand instances can go away",
    )

    @field_validator("master_url", mode="after")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None:
            parse_master_url(v)
        return v

    @model_validator(mode="after")
    def _bounds(self) -> ProviderCommon:
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) exceeds max_instances ({self.max_instances})")
        return self


class NetworkInterface(StrictModel):
    public_ip: bool = True
    security_group_id: str | None = None
    subnet_id: str | None = None


Price = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class InstancePrice(StrictModel):
    """A type's prices in USD/hour; what is left out comes from the table (spot: a fraction of on-demand)."""

    on_demand: Price | None = Field(default=None, description="USD/hour on demand; default the table's")
    spot: Price | None = Field(default=None, description="USD/hour as spot; default on-demand x DEFAULT_SPOT_FRACTION")

    @model_validator(mode="after")
    def _some(self) -> InstancePrice:
        if self.on_demand is None and self.spot is None:
            raise ValueError("give on_demand, spot or both (or a number: the on-demand price)")
        return self


def _as_price_mapping(v: Any) -> Any:
    """`type: 1.5` is `type: {on_demand: 1.5}`."""
    if isinstance(v, dict):
        return {k: p if isinstance(p, dict | bool) or p is None else {"on_demand": p} for k, p in v.items()}
    return v


class AWSProviderConfig(ProviderCommon):
    type: Literal["aws"]
    region: str | None = Field(default=None, description="defaults to the master's own region (instance metadata)")
    image_id: str = Field(..., min_length=1, description="AMI of the agent")
    root_volume_size: int = Field(default=200, ge=100, description="GB")
    tag_key: str = Field(default="determined-ai", min_length=1)
    tag_value: str = Field(default="agent", min_length=1)
    instance_name: str = "determined-ai-agent"
    ssh_key_name: str = Field(..., min_length=1)
    iam_instance_profile_arn: str | None = None
    network_interface: NetworkInterface = Field(default_factory=NetworkInterface)
    security_group: str | None = Field(
        default=None, description="seed 000's spelling of network_interface.security_group_id"
    )
    instance_type: str | list[str] = Field(default="p3.8xlarge", description="a type, or a list in order of preference")
    instance_type_prices: dict[str, InstancePrice] = Field(
        default_factory=dict,
        description="prices of the configured types, overriding the table: a number (on-demand USD/hour) or "
        "{on_demand, spot}",
    )
    instance_slots: int | None = Field(default=None, ge=0, description="slots per instance, overriding the GPU table")
    cpu_slots_allowed: bool = Field(default=False, description="allow CPU-only types (slots = vCPUs)")
    spot: bool = False
    spot_max_price: str | None = Field(default=None, description="USD/hour cap; default the on-demand price")
    spot_request_timeout: Duration = Field(default=120.0, description="cancel a spot request unfulfilled this long")
    spot_fallback_to_on_demand: bool = True
    endpoint_url: str | None = Field(default=None, description="EC2 endpoint (moto, LocalStack)")

    @field_validator("instance_type", mode="after")
    @classmethod
    def _types_nonempty(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, list) and not v:
            raise ValueError("give at least one instance type")
        return v

    _price_mapping = field_validator("instance_type_prices", mode="before")(lambda cls, v: _as_price_mapping(v))

    @field_validator("instance_type_prices", mode="after")
    @classmethod
    def _priced_types(cls, v: dict[str, InstancePrice], info: ValidationInfo) -> dict[str, InstancePrice]:
        configured = info.data.get("instance_type")
        if configured is None:  # itself invalid: reported on its own
            return v
        names = [configured] if isinstance(configured, str) else configured
        unknown = [k for k in v if k not in names]
        if unknown:
            raise ValueError(f"{', '.join(map(repr, unknown))}: not among instance_type ({', '.join(names)})")
        return v

    @field_validator("spot_max_price", mode="before")
    @classmethod
    def _price(cls, v: Any) -> Any:
        if v is None:
            return v
        try:
            if float(v) <= 0:
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"{v!r} is not a positive price in USD per hour") from None
        return str(v)

    @model_validator(mode="after")
    def _check_types(self) -> AWSProviderConfig:
        for name in self.instance_types():
            info = instance_types.lookup(name)
            if info is None and self.instance_slots is None:
                raise ValueError(f"instance_type: unknown type {name!r}; set instance_slots to use it")
            if info is not None and info.gpus == 0 and not self.cpu_slots_allowed:
                raise ValueError(f"instance_type: {name} has no GPUs; set cpu_slots_allowed: true to use it")
        if self.security_group and not self.network_interface.security_group_id:
            self.network_interface.security_group_id = self.security_group
        return self

    def instance_types(self) -> list[str]:
        return [self.instance_type] if isinstance(self.instance_type, str) else list(self.instance_type)

    def slots_of(self, name: str) -> int:
        if self.instance_slots is not None:
            return self.instance_slots
        info = instance_types.lookup(name)
        if info is None:
            return 0
        return info.gpus if info.gpus else info.vcpus

    def price_of(self, name: str) -> float:
        """On-demand USD/hour: instance_type_prices, else the table (0 for a type it lacks)."""
        given = self.instance_type_prices.get(name)
        if given is not None and given.on_demand is not None:
            return given.on_demand
        info = instance_types.lookup(name)
        return info.price if info else 0.0

    def spot_price_of(self, name: str) -> float:
        """Expected spot USD/hour: instance_type_prices' spot, else on-demand x DEFAULT_SPOT_FRACTION."""
        given = self.instance_type_prices.get(name)
        if given is not None and given.spot is not None:
            return given.spot
        return self.price_of(name) * DEFAULT_SPOT_FRACTION


class LocalProviderConfig(ProviderCommon):
    """Agents as local processes started by the master: the embedded default for one machine."""

    type: Literal["local"]
    boot_delay: Duration = Field(default=0.0, description="delay before an instance's agent starts, like a boot")
    slots_per_instance: int = Field(default=1, ge=0)
    instance_type: str = Field(default="local", description="a label; local instances have one shape")
    price_per_hour: float = Field(default=0.0, ge=0, allow_inf_nan=False, description="for cost figures")
    spot_price_per_hour: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="as spot, for cost figures and the simulator; default price_per_hour x DEFAULT_SPOT_FRACTION",
    )
    spot: bool = Field(
        default=False,
        description="launch spot instances first (the local spot market: spot-capacity in "
        "<data_dir>/local-instances says whether there is capacity)",
    )
    spot_fallback_to_on_demand: bool = Field(
        default=True, description="launch on demand while spot capacity is unavailable"
    )

    def instance_types(self) -> list[str]:
        return [self.instance_type]

    def slots_of(self, name: str) -> int:
        return self.slots_per_instance

    def price_of(self, name: str) -> float:
        return self.price_per_hour

    def spot_price_of(self, name: str) -> float:
        if self.spot_price_per_hour is not None:
            return self.spot_price_per_hour
        return self.price_per_hour * DEFAULT_SPOT_FRACTION


ProviderConfig = Annotated[AWSProviderConfig | LocalProviderConfig, Field(discriminator="type")]


def legacy_provisioner(data: dict[str, Any]) -> dict[str, Any]:
    """Seed 000/001's top-level `provisioner:` (with `provider: aws`) as a provider config."""
    out = dict(data)
    if "type" not in out and "provider" in out:
        out["type"] = out.pop("provider")
    return out

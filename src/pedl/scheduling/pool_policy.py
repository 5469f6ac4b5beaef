"""A pool's scaling policy as the scaling decider takes it, and how a pool's provider config makes one: the
master's provisioner and the simulator both build it here. Its defaults are the config's, stated once where
master.yaml's fields are declared (pedl.config.provider_config)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from pedl.config.master_config import SchedulerConfig
from pedl.config.provider_config import AWSProviderConfig, LocalProviderConfig, ProviderCommon
from pedl.scheduling.fit import Fitting

Policy = Literal["pedl", "determined"]


def _default(model: type[BaseModel], name: str) -> Any:
    """The default master.yaml gives `name` where a pool's config leaves it out."""
    return model.model_fields[name].default


@dataclass(frozen=True)
class TypeOffer:
    name: str
    slots: int
    price: float = 0.0  # on-demand USD per hour; 0: unknown
    spot_price: float | None = None  # USD per hour on the spot market; None: `price`


@dataclass(frozen=True)
class PoolPolicy:
    types: tuple[TypeOffer, ...]  # in order of preference
    max_instances: int = _default(ProviderCommon, "max_instances")
    min_instances: int = _default(ProviderCommon, "min_instances")
    max_idle: float = _default(ProviderCommon, "max_idle_agent_period")
    max_starting: float = _default(ProviderCommon, "max_agent_starting_period")
    max_disconnected: float = _default(ProviderCommon, "max_disconnected_period")
    spot: bool = _default(AWSProviderConfig, "spot")
    # the local provider has no setting of it: its pools take aws's default
    spot_request_timeout: float = _default(AWSProviderConfig, "spot_request_timeout")
    spot_fallback_to_on_demand: bool = _default(AWSProviderConfig, "spot_fallback_to_on_demand")
    policy: Policy = "pedl"
    # the pool's scheduler fitting policy, to foresee its placements
    fitting: Fitting = _default(SchedulerConfig, "fitting_policy")


def pool_policy(provider: AWSProviderConfig | LocalProviderConfig, fitting: Fitting) -> PoolPolicy:
    """pedl's policy for a pool with this provider and this scheduler fitting policy: the provider's instance
    types with their slots and prices, its bounds, its periods and its spot settings."""
    return PoolPolicy(
        types=tuple(
            TypeOffer(t, provider.slots_of(t), provider.price_of(t), spot_price=provider.spot_price_of(t))
            for t in provider.instance_types()
        ),
        fitting=fitting,
        max_instances=provider.max_instances,
        min_instances=provider.min_instances,
        max_idle=provider.max_idle_agent_period,
        max_starting=provider.max_agent_starting_period,
        max_disconnected=provider.max_disconnected_period,
        spot=provider.spot,
        spot_request_timeout=provider.spot_request_timeout
        if isinstance(provider, AWSProviderConfig)
        else PoolPolicy.spot_request_timeout,
        spot_fallback_to_on_demand=provider.spot_fallback_to_on_demand,
    )

"""The simulated pool's settings, from options or from a master.yaml, and the decider policies built
from them: pedl's (bin-packing, every type, spot fallback) and the Determined-style baseline."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pedl.config import instance_types
from pedl.config.master_config import load_master_config
from pedl.config.provider_config import AWSProviderConfig, LocalProviderConfig
from pedl.errors import InvalidArgument
from pedl.master.cluster.scheduler import Fitting
from pedl.master.provisioner.consolidation import MovePolicy, policy_from_config
from pedl.master.provisioner.scaling_decider import Policy, PoolPolicy, TypeOffer

DEFAULT_INSTANCE_TYPE = "p3.8xlarge"  # 4 GPUs; the openb jobs need up to 8, which gang over two
DEFAULT_MAX_INSTANCES = 200  # the openb trace peaks at 70 GPUs demanded at once
DETERMINED_TICK = 5.0  # Determined's provisioner loop


@dataclass(frozen=True)
class SimPool:
    offers: tuple[TypeOffer, ...]  # in order of preference
    max_instances: int = DEFAULT_MAX_INSTANCES
    min_instances: int = 0
    max_idle: float = 300.0
    max_starting: float = 1200.0
    spot: bool = False
    spot_request_timeout: float = 120.0
    spot_fallback_to_on_demand: bool = True
    fitting: Fitting = "best"
    source: str = "options"
    boot_delay: float | None = None  # a local provider's boot_delay, when the pool came from a file
    moves: MovePolicy = MovePolicy()  # consolidation and spot first (pedl's policy only)

    def policy(self, kind: Policy) -> PoolPolicy:
        if kind == "determined":
            # One type, slot-sum demand, no fallback from spot, and no timeout on an unfulfilled spot
            # request (Determined has none: the request stays open and counts as booting).
            return PoolPolicy(types=self.offers[:1], max_instances=self.max_instances, fitting=self.fitting,
                              min_instances=self.min_instances, max_idle=self.max_idle,
                              max_starting=self.max_starting, spot=self.spot, spot_request_timeout=math.inf,
                              spot_fallback_to_on_demand=False, policy="determined")
        return PoolPolicy(types=self.offers, max_instances=self.max_instances, min_instances=self.min_instances,
                          fitting=self.fitting,
                          max_idle=self.max_idle, max_starting=self.max_starting, spot=self.spot,
                          spot_request_timeout=self.spot_request_timeout,
                          spot_fallback_to_on_demand=self.spot_fallback_to_on_demand, policy="pedl")

    def to_dict(self) -> dict[str, object]:
        return {"instance_types": [{"name": o.name, "slots": o.slots, "price": o.price} for o in self.offers],
                "max_instances": self.max_instances, "min_instances": self.min_instances,
                "max_idle_s": self.max_idle, "spot": self.spot, "fitting": self.fitting, "source": self.source}


def offers_for(names: list[str]) -> tuple[TypeOffer, ...]:
    """GPU types from the instance-type table, in the given order."""
    out = []
    for name in names:
        info = instance_types.lookup(name)
        if info is None:
            gpu_types = sorted(n for n, t in instance_types.AWS_TYPES.items() if t.gpus)
            raise InvalidArgument(f"--instance-type: unknown instance type {name!r} (known GPU types: "
                                  f"{', '.join(gpu_types)})")
        if info.gpus == 0:
            raise InvalidArgument(f"--instance-type: {name} has no GPUs; the simulator replays GPU jobs")
        if any(o.name == name for o in out):
            raise InvalidArgument(f"--instance-type: {name} is given twice")
        out.append(TypeOffer(name, info.gpus, info.price))
    return tuple(out)


def default_pool() -> SimPool:
    return SimPool(offers=offers_for([DEFAULT_INSTANCE_TYPE]))


def pool_from_master_config(path: str | Path) -> SimPool:
    """The first resource pool with an aws or local provider: its types, bounds, idle period, spot."""
    try:
        config = load_master_config(path)
    except InvalidArgument as exc:
        raise InvalidArgument(f"--config: {exc.message}", fields=exc.fields) from None
    for pool in config.resource_pools:
        provider = pool.provider
        if isinstance(provider, AWSProviderConfig):
            offers = tuple(TypeOffer(n, provider.slots_of(n), provider.price_of(n))
                           for n in provider.instance_types())
            spot: dict[str, object] = {"spot": provider.spot, "spot_request_timeout": provider.spot_request_timeout,
                                       "spot_fallback_to_on_demand": provider.spot_fallback_to_on_demand}
            boot_delay = None
        elif isinstance(provider, LocalProviderConfig):
            offers = (TypeOffer(provider.instance_type, provider.slots_per_instance, provider.price_per_hour),)
            spot, boot_delay = {"spot": provider.spot, "spot_fallback_to_on_demand":
                                provider.spot_fallback_to_on_demand}, provider.boot_delay
        else:
            continue
        return SimPool(offers=offers, max_instances=provider.max_instances, min_instances=provider.min_instances,
                       moves=policy_from_config(provider.consolidation, boot_delay),
                       max_idle=provider.max_idle_agent_period, max_starting=provider.max_agent_starting_period,
                       fitting=pool.scheduler.fitting_policy, source=f"{path} (pool {pool.pool_name})",
                       boot_delay=boot_delay, **spot)  # type: ignore[arg-type]
    raise InvalidArgument(f"--config: no resource pool in {path} has an aws or local provider")


def override(pool: SimPool, *, instance_types_: list[str] | None = None, max_instances: int | None = None,
             min_instances: int | None = None, max_idle: float | None = None, spot: bool | None = None,
             consolidation: bool | None = None, checkpoint_cost: float | None = None,
             restore_cost: float | None = None) -> SimPool:
    """Options given on the command line win over the pool's (default or file) settings."""
    changes: dict[str, object] = {}
    moves = pool.moves
    if consolidation is not None:
        moves = replace(moves, enabled=consolidation)
    if checkpoint_cost is not None:
        moves = replace(moves, checkpoint_cost=checkpoint_cost)
    if restore_cost is not None:
        moves = replace(moves, restore_cost=restore_cost)
    changes["moves"] = moves
    if instance_types_:
        changes["offers"] = offers_for(instance_types_)
    if max_instances is not None:
        changes["max_instances"] = max_instances
    if min_instances is not None:
        changes["min_instances"] = min_instances
    if max_idle is not None:
        changes["max_idle"] = max_idle
    if spot is not None:
        changes["spot"] = spot
    pool = replace(pool, **changes)  # type: ignore[arg-type]
    if pool.max_instances < 1:
        raise InvalidArgument(f"--max-instances: must be at least 1, got {pool.max_instances}")
    if pool.min_instances < 0:
        raise InvalidArgument(f"--min-instances: must be >= 0, got {pool.min_instances}")
    if pool.min_instances > pool.max_instances:
        raise InvalidArgument(f"--min-instances: {pool.min_instances} exceeds --max-instances "
                              f"{pool.max_instances}")
    return pool


PolicyChoice = Literal["pedl", "determined", "both"]


def policies_for(choice: str) -> list[Policy]:
    if choice == "both":
        return ["pedl", "determined"]
    if choice in ("pedl", "determined"):
        return [choice]  # type: ignore[list-item]
    raise InvalidArgument(f"--policy: {choice!r} is not one of pedl, determined, both")

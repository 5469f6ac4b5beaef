"""The simulated pool's settings, from options or from a master.yaml, and the decider policies built
from them: pedl's (bin-packing, every type, spot fallback) and the Determined-style baseline. The pool's
policy is the master's own model (scheduling/pool_policy.py), with its defaults."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pedl.config import instance_types
from pedl.config.master_config import load_master_config
from pedl.config.provider_config import AWSProviderConfig, LocalProviderConfig
from pedl.errors import InvalidArgument
from pedl.scheduling.consolidation import MovePolicy, policy_from_config
from pedl.scheduling.pool_policy import Policy, PoolPolicy, TypeOffer, pool_policy

DEFAULT_INSTANCE_TYPE = "p3.8xlarge"  # 4 GPUs; the openb jobs need up to 8, which gang over two
DEFAULT_MAX_INSTANCES = 200  # the openb trace peaks at 70 GPUs demanded at once
DETERMINED_TICK = 5.0  # Determined's provisioner loop


@dataclass(frozen=True)
class SimPool:
    scaling: PoolPolicy  # pedl's policy for the pool: its types in order of preference, bounds, periods, spot
    source: str = "options"
    boot_delay: float | None = None  # a local provider's boot_delay, when the pool came from a file
    moves: MovePolicy = MovePolicy()  # consolidation and spot first (pedl's policy only)

    def policy(self, kind: Policy) -> PoolPolicy:
        if kind == "determined":
            # One type, slot-sum demand, no fallback from spot, and no timeout on an unfulfilled spot
            # request (Determined has none: the request stays open and counts as booting).
            return replace(
                self.scaling,
                types=self.scaling.types[:1],
                spot_request_timeout=math.inf,
                spot_fallback_to_on_demand=False,
                policy="determined",
            )
        return replace(self.scaling, policy="pedl")

    def to_dict(self) -> dict[str, object]:
        p = self.scaling
        return {
            "instance_types": [{"name": o.name, "slots": o.slots, "price": o.price} for o in p.types],
            "max_instances": p.max_instances,
            "min_instances": p.min_instances,
            "max_idle_s": p.max_idle,
            "spot": p.spot,
            "fitting": p.fitting,
            "source": self.source,
        }


def offers_for(names: list[str]) -> tuple[TypeOffer, ...]:
    """GPU types from the instance-type table, in the given order."""
    out = []
    for name in names:
        info = instance_types.lookup(name)
        if info is None:
            gpu_types = sorted(n for n, t in instance_types.AWS_TYPES.items() if t.gpus)
            raise InvalidArgument(
                f"--instance-type: unknown instance type {name!r} (known GPU types: {', '.join(gpu_types)})"
            )
        if info.gpus == 0:
            raise InvalidArgument(f"--instance-type: {name} has no GPUs; the simulator replays GPU jobs")
        if any(o.name == name for o in out):
            raise InvalidArgument(f"--instance-type: {name} is given twice")
        out.append(TypeOffer(name, info.gpus, info.price))
    return tuple(out)


def default_pool() -> SimPool:
    return SimPool(PoolPolicy(types=offers_for([DEFAULT_INSTANCE_TYPE]), max_instances=DEFAULT_MAX_INSTANCES))


def pool_from_master_config(path: str | Path) -> SimPool:
    """The first resource pool with an aws or local provider: its types, bounds, idle period, spot."""
    try:
        config = load_master_config(path)
    except InvalidArgument as exc:
        raise InvalidArgument(f"--config: {exc.message}", fields=exc.fields) from None
    for pool in config.resource_pools:
        provider = pool.provider
        if isinstance(provider, AWSProviderConfig):
            boot_delay = None
        elif isinstance(provider, LocalProviderConfig):
            boot_delay = provider.boot_delay
        else:
            continue
        scaling = pool_policy(provider, pool.scheduler.fitting_policy)
        # spot is priced by the simulated market (CloudSettings.spot_price_fraction), not by the config
        scaling = replace(scaling, types=tuple(replace(o, spot_price=None) for o in scaling.types))
        return SimPool(
            scaling,
            moves=policy_from_config(provider.consolidation, boot_delay),
            source=f"{path} (pool {pool.pool_name})",
            boot_delay=boot_delay,
        )
    raise InvalidArgument(f"--config: no resource pool in {path} has an aws or local provider")


def override(
    pool: SimPool,
    *,
    instance_types_: list[str] | None = None,
    max_instances: int | None = None,
    min_instances: int | None = None,
    max_idle: float | None = None,
    spot: bool | None = None,
    consolidation: bool | None = None,
    checkpoint_cost: float | None = None,
    restore_cost: float | None = None,
) -> SimPool:
    """Options given on the command line win over the pool's (default or file) settings."""
    changes: dict[str, object] = {}
    moves = pool.moves
    if consolidation is not None:
        moves = replace(moves, enabled=consolidation)
    if checkpoint_cost is not None:
        moves = replace(moves, checkpoint_cost=checkpoint_cost)
    if restore_cost is not None:
        moves = replace(moves, restore_cost=restore_cost)
    if instance_types_:
        changes["types"] = offers_for(instance_types_)
    if max_instances is not None:
        changes["max_instances"] = max_instances
    if min_instances is not None:
        changes["min_instances"] = min_instances
    if max_idle is not None:
        changes["max_idle"] = max_idle
    if spot is not None:
        changes["spot"] = spot
    scaling = replace(pool.scaling, **changes)
    if scaling.max_instances < 1:
        raise InvalidArgument(f"--max-instances: must be at least 1, got {scaling.max_instances}")
    if scaling.min_instances < 0:
        raise InvalidArgument(f"--min-instances: must be >= 0, got {scaling.min_instances}")
    if scaling.min_instances > scaling.max_instances:
        raise InvalidArgument(
            f"--min-instances: {scaling.min_instances} exceeds --max-instances {scaling.max_instances}"
        )
    return replace(pool, scaling=scaling, moves=moves)


PolicyChoice = Literal["pedl", "determined", "both"]


def policies_for(choice: str) -> list[Policy]:
    if choice == "both":
        return ["pedl", "determined"]
    if choice in ("pedl", "determined"):
        return [choice]
    raise InvalidArgument(f"--policy: {choice!r} is not one of pedl, determined, both")

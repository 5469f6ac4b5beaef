"""The simulated cloud: instances with a lifecycle, boot delays, prices, spot capacity failures and
spot interruptions, every random draw from its own seeded stream so a replay is reproducible."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from enum import StrEnum

from pedl.scheduling.consolidation import HostView
from pedl.scheduling.pool_policy import TypeOffer
from pedl.scheduling.scaling_decider import InstanceView, LiveState
from pedl.scheduling.snapshot import HeldTask, InstanceFacts


@dataclass(frozen=True)
class CloudSettings:
    boot_delay: float = 90.0  # median seconds from launch to the agent registering
    boot_delay_sigma: float = 0.25  # lognormal shape; 0 makes every boot take exactly boot_delay
    spot_price_fraction: float = 0.35  # spot price as a fraction of on-demand
    interruption_rate: float = 0.05  # spot interruptions per instance-hour (exponential)
    interruption_notice: float = 120.0  # the two-minute notice: the instance is gone this long after
    spot_capacity_failure: float = 0.05  # chance a spot request finds no capacity and stays open
    spot_capacity_wait: float = 1800.0  # mean wait before such an open request is fulfilled after all
    # a (type, spot) marked unavailable is avoided this long (as the provider's capacity_retry_period)
    unavailable_period: float = 600.0
    checkpoint_period: float = 1800.0  # jobs checkpoint every this much run time; 0 = never
    seed: int = 0


class InstanceState(StrEnum):
    """What happens to a simulated instance, not the master's InstanceState: a spot notice is a state
    here (the master records it as interrupted_at), and termination is instant (no TERMINATING)."""

    REQUESTED = "requested"  # an open spot request, not fulfilled yet (not billed)
    STARTING = "starting"  # launched, booting (billed)
    RUNNING = "running"  # its agent is registered and takes work
    INTERRUPTED = "interrupted"  # a spot interruption notice arrived; it goes away after the notice
    TERMINATED = "terminated"  # terminated, cancelled or reclaimed; billing stopped


TRANSITIONS: dict[InstanceState, frozenset[InstanceState]] = {
    # fulfilled, or cancelled by the decider's spot request timeout
    InstanceState.REQUESTED: frozenset({InstanceState.STARTING, InstanceState.TERMINATED}),
    # registered; or terminated (never registered, or reclaimed while booting: nothing ran on it)
    InstanceState.STARTING: frozenset({InstanceState.RUNNING, InstanceState.TERMINATED}),
    # a spot notice; or terminated (idle, above max)
    InstanceState.RUNNING: frozenset({InstanceState.INTERRUPTED, InstanceState.TERMINATED}),
    # reclaimed when the notice runs out
    InstanceState.INTERRUPTED: frozenset({InstanceState.TERMINATED}),
    InstanceState.TERMINATED: frozenset(),
}

# the master's record of each: an interrupted instance is RUNNING with interrupted_at set; a terminated
# one has left the replay's instances, so TERMINATING is only there to make the table total
_LIFECYCLE: dict[InstanceState, LiveState] = {
    InstanceState.REQUESTED: "requested",
    InstanceState.STARTING: "starting",
    InstanceState.RUNNING: "running",
    InstanceState.INTERRUPTED: "running",
    InstanceState.TERMINATED: "terminating",
}


class IllegalTransition(RuntimeError):
    pass


@dataclass(eq=False)
class SimInstance:
    id: str
    instance_type: str
    slots: int
    price: float  # USD per hour as billed (spot price for spot)
    spot: bool
    requested_at: float
    state: InstanceState = InstanceState.STARTING
    launched_at: float | None = None  # billing starts (fulfilment for spot)
    ready_at: float | None = None
    terminated_at: float | None = None
    interrupt_at: float | None = None  # when the spot notice will come, drawn at launch
    slot_ids: tuple[str, ...] = ()
    free: list[str] = field(default_factory=list)
    jobs: dict[str, HeldTask] = field(default_factory=dict)  # job id -> the allocation the master would hold
    busy_since: float | None = None
    busy_seconds: float = 0.0
    draining: bool = False  # the move planner empties it: no new work; it goes once its jobs left
    cordoned: bool = False  # spot first: on-demand while spot capacity is there takes no new work
    history: list[tuple[float, InstanceState, str]] = field(default_factory=list)
    view: InstanceView | None = None  # from the last snapshot; None after a change
    host: HostView | None = None  # as the move planner sees it; None after a change
    _facts: InstanceFacts | None = None

    def set_state(self, now: float, state: InstanceState, reason: str = "") -> None:
        if state not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"{self.id}: {self.state} -> {state} is not allowed ({reason})")
        self.state = state
        self.history.append((now, state, reason))
        self._facts = self.view = self.host = None

    def changed(self) -> None:
        """A job started or ended on it: the next snapshot looks at it again."""
        self.view = self.host = None

    def invalidate(self) -> None:
        """Its facts changed without a change of state (it started draining)."""
        self._facts = self.view = self.host = None

    def host_view(self) -> HostView:
        """The move planner's view of it, rebuilt only after a change."""
        if self.host is None:
            ready = self.state == InstanceState.RUNNING
            self.host = HostView(
                self.id,
                self.instance_type,
                self.slots,
                len(self.free) if ready else self.slots,
                self.price,
                self.spot,
                ready,
                self.draining,
                self.launched_at,
            )
        return self.host

    def facts(self) -> InstanceFacts:
        """What the provisioner's records would hold about this instance (its agent is always
        connected here), rebuilt only after a change of state; its jobs are the replay's held tasks."""
        if self._facts is None:
            self._facts = InstanceFacts(
                self.id,
                self.instance_type,
                _LIFECYCLE[self.state],
                launched_at=self.launched_at if self.launched_at is not None else self.requested_at,
                # a draining instance, like a reclaimed one, will go: its jobs need a home elsewhere
                slots=self.slots,
                spot=self.spot,
                interrupted=self.state == InstanceState.INTERRUPTED or self.draining,
                cordoned=self.cordoned,
            )
        return self._facts

    def billed_seconds(self, end: float) -> float:
        if self.launched_at is None:
            return 0.0
        return (self.terminated_at if self.terminated_at is not None else end) - self.launched_at

    def boot_seconds(self, end: float) -> float:
        if self.launched_at is None:
            return 0.0
        until = self.ready_at if self.ready_at is not None else (self.terminated_at or end)
        return until - self.launched_at


class SimulatedCloud:
    """Prices and random draws; the replay owns the instances and the clock."""

    def __init__(self, settings: CloudSettings, offers: tuple[TypeOffer, ...]) -> None:
        self.settings = settings
        self.offers = {o.name: o for o in offers}
        seed = settings.seed
        self._boot = random.Random(f"boot-{seed}")
        self._capacity = random.Random(f"capacity-{seed}")
        self._interrupt = random.Random(f"interrupt-{seed}")
        self._count = 0

    def new_instance(self, instance_type: str, spot: bool, now: float) -> SimInstance:
        offer = self.offers[instance_type]
        self._count += 1
        price = offer.price * (self.settings.spot_price_fraction if spot else 1.0)
        prefix = "sir" if spot else "i"
        slot_ids = tuple(str(k) for k in range(offer.slots))
        return SimInstance(
            f"{prefix}-{self._count:06d}",
            instance_type,
            offer.slots,
            price,
            spot,
            now,
            slot_ids=slot_ids,
            free=list(slot_ids),
        )

    def boot_delay(self) -> float:
        s = self.settings
        if s.boot_delay <= 0:
            return 0.0
        if s.boot_delay_sigma <= 0:
            return s.boot_delay
        return s.boot_delay * math.exp(self._boot.gauss(0.0, s.boot_delay_sigma))

    def spot_capacity_wait(self) -> float | None:
        """None when a spot request is fulfilled at once; else how long it stays open."""
        s = self.settings
        if s.spot_capacity_failure <= 0 or self._capacity.random() >= s.spot_capacity_failure:
            return None
        return self._capacity.expovariate(1.0 / s.spot_capacity_wait) if s.spot_capacity_wait > 0 else 0.0

    def time_to_interruption(self) -> float | None:
        rate = self.settings.interruption_rate
        if rate <= 0:
            return None
        return self._interrupt.expovariate(rate / 3600.0)


def saved_progress(ran: float, period: float) -> float:
    """Run time a job keeps after being cut off `ran` seconds into a run: up to its last checkpoint."""
    if period <= 0:
        return 0.0
    return math.floor(ran / period + 1e-9) * period

"""The simulated cloud: the instance lifecycle table, boot-delay and spot draws, checkpoint arithmetic."""

from __future__ import annotations

import statistics

import pytest

from pedl.scheduling.pool_policy import TypeOffer
from pedl.sim.cloud import (
    CloudSettings,
    IllegalTransition,
    InstanceState,
    SimulatedCloud,
    saved_progress,
)

OFFERS = (TypeOffer("g5.12xlarge", 4, 5.672),)


def test_instances_refuse_illegal_transitions() -> None:
    inst = SimulatedCloud(CloudSettings(), OFFERS).new_instance("g5.12xlarge", False, 0.0)
    inst.state = InstanceState.REQUESTED
    inst.set_state(1.0, InstanceState.STARTING, "launched")
    with pytest.raises(IllegalTransition):
        inst.set_state(2.0, InstanceState.INTERRUPTED, "a notice while booting is a termination")
    inst.set_state(2.0, InstanceState.RUNNING, "registered")
    inst.set_state(3.0, InstanceState.TERMINATED, "idle")
    with pytest.raises(IllegalTransition):
        inst.set_state(4.0, InstanceState.RUNNING, "back from the dead")
    assert [s for _, s, _ in inst.history] == ["starting", "running", "terminated"]


def test_spot_is_priced_as_a_fraction() -> None:
    cloud = SimulatedCloud(CloudSettings(spot_price_fraction=0.5), OFFERS)
    assert cloud.new_instance("g5.12xlarge", True, 0.0).price == pytest.approx(2.836)
    assert cloud.new_instance("g5.12xlarge", False, 0.0).price == pytest.approx(5.672)


def test_boot_delays_are_lognormal_around_the_median_and_seeded() -> None:
    draws = [SimulatedCloud(CloudSettings(seed=1), OFFERS).boot_delay() for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]  # a fresh cloud with the same seed draws the same
    cloud = SimulatedCloud(CloudSettings(boot_delay=90.0, boot_delay_sigma=0.25, seed=2), OFFERS)
    many = [cloud.boot_delay() for _ in range(4000)]
    assert 85 < statistics.median(many) < 95 and min(many) > 0
    assert SimulatedCloud(CloudSettings(boot_delay_sigma=0.0), OFFERS).boot_delay() == 90.0
    assert SimulatedCloud(CloudSettings(boot_delay=0.0), OFFERS).boot_delay() == 0.0


def test_spot_draws_follow_their_rates() -> None:
    cloud = SimulatedCloud(CloudSettings(interruption_rate=0.5, spot_capacity_failure=0.2, seed=4), OFFERS)
    gaps = [cloud.time_to_interruption() for _ in range(4000)]
    assert 6000 < statistics.mean(gaps) < 8400  # mean 1 / 0.5 per hour = 7200 s
    failures = sum(cloud.spot_capacity_wait() is not None for _ in range(4000))
    assert 700 < failures < 900
    quiet = SimulatedCloud(CloudSettings(interruption_rate=0.0, spot_capacity_failure=0.0), OFFERS)
    assert quiet.time_to_interruption() is None and quiet.spot_capacity_wait() is None


def test_saved_progress_is_the_last_checkpoint() -> None:
    assert saved_progress(100.0, 1800.0) == 0.0
    assert saved_progress(1800.0, 1800.0) == 1800.0
    assert saved_progress(4000.0, 1800.0) == 3600.0
    assert saved_progress(4000.0, 0.0) == 0.0  # no checkpoints: start over

"""The replay, on traces small enough to check by hand: instance-hours, idle time, queueing, gangs,
jobs that never fit, the 5 s tick of the Determined-style policy, and spot capacity and interruptions;
and its cached snapshot checked against the provisioner's full one at every decision."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from pedl.scheduling.consolidation import MovePolicy
from pedl.scheduling.pool_policy import PoolPolicy
from pedl.scheduling.snapshot import InstanceFacts, snapshot
from pedl.sim import CloudSettings, SimPool
from pedl.sim.cloud import SimInstance
from pedl.sim.pool import offers_for
from pedl.sim.replay import Replay
from tests.sim.scenarios import HOUR, fixed, job, replay


def test_one_job_one_instance_no_boot_no_idle() -> None:
    r = replay([job("a", 0, 1.0)])
    assert r.instance_hours == pytest.approx(1.0)
    assert r.lower_bound_instance_hours == 1.0 and r.cost_ratio == pytest.approx(1.0)
    assert r.cost == pytest.approx(1.006)  # g5.xlarge on demand
    assert r.idle_instance_hours == pytest.approx(0.0)
    assert (r.launches, r.jobs, r.jobs_finished, r.queue_max_s) == (1, 1, 1, 0.0)


def test_the_idle_period_is_paid_once_the_job_ends() -> None:
    r = replay([job("a", 0, 1.0)], idle=300.0)
    assert r.instance_hours == pytest.approx(1.0 + 300 / HOUR)
    assert r.idle_instance_hours == pytest.approx(300 / HOUR)
    assert r.lower_bound_instance_hours == 1.0


def test_boot_time_is_billed_idle_time_and_queueing() -> None:
    r = replay([job("a", 0, 1.0)], settings=fixed(boot_delay=90.0))
    assert r.instance_hours == pytest.approx(1.0 + 90 / HOUR)
    assert r.idle_instance_hours == pytest.approx(90 / HOUR) == pytest.approx(r.boot_instance_hours)
    assert r.queue_p50_s == r.queue_max_s == pytest.approx(90.0)


def test_two_overlapping_jobs_on_one_gpu_instances() -> None:
    # a: [0, 2h), b: [1h, 2h) -> two instances, 2 h + 1 h
    r = replay([job("a", 0, 2.0), job("b", HOUR, 1.0)])
    assert r.instance_hours == pytest.approx(3.0)
    assert r.lower_bound_instance_hours == pytest.approx(3.0)
    assert r.launches == 2 and r.peak_instances == 2


def test_two_overlapping_jobs_share_a_four_gpu_instance() -> None:
    r = replay([job("a", 0, 2.0), job("b", HOUR, 1.0)], types=("g5.12xlarge",))
    assert r.launches == 1 and r.instance_hours == pytest.approx(2.0)
    assert r.lower_bound_instance_hours == pytest.approx(2.0)
    assert r.gpu_utilization == pytest.approx(3 / 8)  # 3 GPU-hours used of 8 billed


def test_a_gang_job_takes_whole_instances() -> None:
    r = replay([job("big", 0, 1.0, gpus=8)], types=("g5.12xlarge",), max_instances=2)
    assert (r.launches, r.jobs_finished, r.jobs_never_fit) == (2, 1, 0)
    assert r.instance_hours == pytest.approx(2.0) == pytest.approx(r.lower_bound_instance_hours)


@pytest.mark.parametrize("policy", ["pedl", "determined"])
def test_jobs_that_fit_no_type_are_dropped_and_counted(policy) -> None:
    # 6 GPUs is neither <= 4 nor a multiple of 4; 12 GPUs would need 3 instances, max is 2
    jobs = [job("six", 0, 1.0, gpus=6), job("ok", 0, 1.0, gpus=4)]
    if policy == "pedl":
        jobs.append(job("twelve", 0, 1.0, gpus=12))
    r = replay(jobs, types=("g5.12xlarge",), max_instances=2, policy=policy)
    assert r.jobs_never_fit == len(jobs) - 1
    assert r.jobs_finished == 1 and r.jobs_unfinished == 0
    assert r.lower_bound_instance_hours == pytest.approx(1.0)  # only the job that fits counts


def test_pedl_reacts_at_once_determined_on_its_5s_tick() -> None:
    jobs = [job("a", 1.0, 1.0)]
    assert replay(jobs).queue_max_s == 0.0
    assert replay(jobs, policy="determined").queue_max_s == pytest.approx(4.0)  # decided at t=5


def test_slot_sum_under_provisions_a_fragmented_queue() -> None:
    # four 3-GPU jobs on 4-GPU instances: the slot sum asks ceil(12/4) = 3 instances, the fourth job
    # waits for the next tick after those boot and then for another boot; bin-packing asks 4 at once.
    jobs = [job(f"j{k}", 0, 1.0, gpus=3) for k in range(4)]
    settings = fixed(boot_delay=90.0)
    pedl = replay(jobs, types=("g5.12xlarge",), settings=settings)
    det = replay(jobs, types=("g5.12xlarge",), settings=settings, policy="determined")
    assert pedl.launches == det.launches == 4
    assert pedl.queue_max_s == pytest.approx(90.0)
    assert det.queue_max_s == pytest.approx(180.0)
    assert det.queue_max_s > pedl.queue_max_s and det.queue_p95_s > pedl.queue_p95_s


def test_the_determined_style_policy_uses_only_the_first_type() -> None:
    jobs = [job("a", 0, 1.0), job("big", 0, 1.0, gpus=8)]
    pedl = replay(jobs, types=("g5.xlarge", "p3.16xlarge"))
    det = replay(jobs, types=("g5.xlarge", "p3.16xlarge"), policy="determined")
    assert det.instance_types == ["g5.xlarge"] and det.launches == 9  # 1 + a gang of 8 one-GPU instances
    assert pedl.instance_types == ["g5.xlarge", "p3.16xlarge"] and pedl.jobs_finished == 2


def test_an_idle_instance_is_reused_within_the_idle_period() -> None:
    r = replay([job("a", 0, 1.0), job("b", HOUR + 60, 1.0)], idle=300.0)
    assert r.launches == 1
    assert r.instance_hours == pytest.approx(2.0 + (60 + 300) / HOUR)
    r = replay([job("a", 0, 1.0), job("b", HOUR + 600, 1.0)], idle=300.0)
    assert r.launches == 2


def test_min_instances_stay_up_between_jobs() -> None:
    jobs = [job("a", 0, 1.0), job("b", 10 * HOUR, 1.0)]
    kept = replay(jobs, min_instances=1, idle=60.0)
    assert kept.launches == 1 and kept.queue_max_s == 0.0
    assert kept.instance_hours == pytest.approx(11.0)  # billed until the last job ends
    assert kept.idle_instance_hours == pytest.approx(9.0)
    scaled = replay(jobs, idle=60.0)
    assert scaled.launches == 2 and scaled.instance_hours == pytest.approx(2.0 + 120 / HOUR)


def test_a_kept_spot_instance_does_not_keep_the_replay_going() -> None:
    settings = fixed(interruption_rate=5.0, spot_capacity_failure=0.0)
    r = replay([job("a", 0, 1.0)], spot=True, min_instances=1, settings=settings)
    assert r.jobs_finished == 1 and r.interruptions > 0
    # the replay ends with the job; one instance (or a replacement) was up all along
    assert r.instance_hours >= r.virtual_end_s / HOUR > 1.0


def test_cpu_jobs_need_an_instance_but_no_slot() -> None:
    r = replay([job("cpu", 0, 1.0, gpus=0), job("gpu", 0, 1.0)])
    assert r.jobs_finished == 2 and r.launches == 1 and r.instance_hours == pytest.approx(1.0)


def test_spot_is_priced_as_a_fraction_of_on_demand() -> None:
    settings = fixed(interruption_rate=0.0, spot_capacity_failure=0.0, spot_price_fraction=0.3)
    r = replay([job("a", 0, 1.0)], spot=True, settings=settings)
    assert r.spot_launches == 1 and r.cost == pytest.approx(0.3 * 1.006)


def test_interrupted_jobs_resume_from_their_last_checkpoint() -> None:
    # the Determined-style policy does nothing at the notice: its jobs go on from their periodic checkpoint
    settings = fixed(interruption_rate=2.0, spot_capacity_failure=0.0, checkpoint_period=1800.0, seed=3)
    r = replay([job("long", 0, 10.0)], spot=True, settings=settings, policy="determined")
    assert r.interruptions > 0 and r.jobs_requeued == r.interruptions
    assert r.jobs_finished == 1
    assert 0 < r.lost_work_hours <= r.interruptions * 0.5  # at most one checkpoint period each
    assert r.gpu_hours_used == pytest.approx(10.0 + r.lost_work_hours)
    assert r.launches == r.interruptions + 1  # each interruption gets a replacement


def test_without_checkpoints_an_interrupted_job_starts_over() -> None:
    settings = fixed(interruption_rate=1.0, spot_capacity_failure=0.0, checkpoint_period=0.0, seed=1)
    r = replay([job("a", 0, 2.0)], spot=True, settings=settings, policy="determined")
    assert r.interruptions > 0 and r.lost_work_hours > 0
    assert r.gpu_hours_used == pytest.approx(2.0 + r.lost_work_hours)


def test_pedl_checkpoints_at_the_spot_notice_and_loses_nothing() -> None:
    """pedl's agents see the two-minute notice and their trials checkpoint and leave: no work is lost,
    each resumption pays the restore; a checkpoint that would outlast the notice saves nothing."""
    settings = fixed(interruption_rate=2.0, spot_capacity_failure=0.0, checkpoint_period=1800.0, seed=3)
    moves = MovePolicy(checkpoint_cost=2.0, restore_cost=3.0)
    r = replay([job("long", 0, 10.0)], spot=True, settings=settings, moves=moves)
    assert r.interruptions > 0 and r.jobs_requeued == r.interruptions and r.jobs_finished == 1
    assert r.lost_work_hours == 0.0
    # the job ran its 10 hours once, plus a restore after each notice
    assert r.gpu_hours_used == pytest.approx(10.0 + r.interruptions * 3.0 / HOUR)
    slow = replay(
        [job("long", 0, 10.0)],
        spot=True,
        settings=settings,
        moves=MovePolicy(checkpoint_cost=150.0, restore_cost=3.0, min_runtime_between_moves=1800.0),
    )
    assert slow.interruptions > 0 and slow.lost_work_hours > 0


def test_pedl_falls_back_to_on_demand_when_spot_has_no_capacity() -> None:
    settings = fixed(spot_capacity_failure=1.0, interruption_rate=0.0)
    pedl = replay([job("a", 0, 1.0)], spot=True, settings=settings)
    # one on-demand fallback; after each unavailable period pedl asks for spot again (spot first), and each
    # request, never fulfilled here, is cancelled at its timeout and costs nothing
    assert pedl.launches - pedl.spot_launches == 1 and pedl.spot_requests_cancelled == pedl.spot_launches >= 1
    assert pedl.queue_max_s == pytest.approx(120.0)  # the spot request timeout, then an on-demand boot of 0 s
    assert pedl.cost == pytest.approx(1.006)  # the cancelled request cost nothing
    det = replay([job("a", 0, 1.0)], spot=True, settings=settings, policy="determined")
    assert (det.launches, det.spot_requests_cancelled) == (1, 0)  # waits for its request, however long
    assert det.jobs_finished == 1


def test_the_same_seed_gives_the_same_replay() -> None:
    jobs = [job(f"j{k}", k * 100.0, 0.5 + k % 3) for k in range(20)]
    settings = CloudSettings(seed=7, interruption_rate=0.5)
    a = replay(jobs, spot=True, settings=settings).to_dict()
    b = replay(jobs, spot=True, settings=settings).to_dict()
    a.pop("wall_seconds"), b.pop("wall_seconds")
    assert a == b
    c = replay(jobs, spot=True, settings=CloudSettings(seed=8, interruption_rate=0.5)).to_dict()
    assert c["instance_hours"] != a["instance_hours"]


def fresh_facts(inst: SimInstance) -> InstanceFacts:
    """The instance's facts built now, past its cache (left as it was), so a stale cache shows."""
    cached, inst._facts = inst._facts, None
    try:
        return inst.facts()
    finally:
        inst._facts = cached


class CheckedReplay(Replay):
    """Takes the provisioner's full snapshot of every instance beside the replay's cached one, and
    fails on any difference: views, waiting tasks or the idle_since it keeps."""

    snapshots = 0

    def _snapshot(self, now: float):
        idle_since = dict(self.idle_since)
        held = {job_id: task for inst in self.instances.values() for job_id, task in inst.jobs.items()}
        full = snapshot(
            now,
            [fresh_facts(i) for i in self.instances.values()],
            list(held.values()),
            [job.task for job in self.pending.values()],
            idle_since,
        )
        cached = super()._snapshot(now)
        assert cached == full and self.idle_since == idle_since
        self.snapshots += 1
        return cached


@pytest.mark.parametrize("policy", ["pedl", "determined"])
def test_the_cached_snapshot_is_the_provisioners_full_snapshot(policy) -> None:
    rng = random.Random(5)
    jobs = [
        job(f"j{k}", k * rng.uniform(0, 900), rng.uniform(0.05, 2.0), gpus=rng.choice([0, 1, 1, 2, 4, 8]))
        for k in range(150)
    ]
    pool = SimPool(PoolPolicy(types=offers_for(["g5.12xlarge"]), max_instances=8, max_idle=300.0, spot=True))
    settings = CloudSettings(seed=2, interruption_rate=0.5, spot_capacity_failure=0.2, spot_capacity_wait=300.0)
    r = CheckedReplay(jobs, pool, settings, policy, 1.0)
    result = r.run()
    assert result.jobs_finished == 150 and result.interruptions > 0 and result.jobs_requeued > 0
    assert r.snapshots == result.decisions


def test_a_long_trial_yields_its_gpu_to_new_work_and_waits_for_the_boot_itself() -> None:
    """A new job arrives while the only GPU runs a long checkpointed trial: the trial checkpoints (2 s)
    and the new job starts on its GPU; the trial resumes on the instance booting for the new job."""
    jobs = [job("long", 0, 10.0), job("new", 2 * HOUR, 1.0)]
    moves = MovePolicy(checkpoint_cost=2.0, restore_cost=3.0)
    r = replay(jobs, settings=fixed(boot_delay=90.0), moves=moves)
    assert (r.yields, r.moves, r.jobs_finished) == (1, 1, 2)
    assert r.queue_p50_s == pytest.approx(2.0) and r.queue_max_s == pytest.approx(90.0)  # the long job's own boot
    assert r.yield_wait_gpu_hours == pytest.approx(88.0 / HOUR)  # from its checkpoint to the boot's end
    # both ran their whole length once, plus the move's checkpoint and restore
    assert r.gpu_hours_used == pytest.approx(11.0 + 5.0 / HOUR)
    off = replay(jobs, settings=fixed(boot_delay=90.0), moves=replace(moves, yield_to_new_work=False))
    assert (off.yields, off.moves) == (0, 0) and off.queue_p50_s == pytest.approx(90.0)
    # a trial expected to end soon does not yield: the new job waits for the boot
    short = replay([job("long", 0, 2.5), job("new", 2 * HOUR, 1.0)], settings=fixed(boot_delay=90.0), moves=moves)
    assert short.yields == 0 and short.queue_p50_s == pytest.approx(90.0)

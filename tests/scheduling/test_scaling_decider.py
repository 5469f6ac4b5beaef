"""The scaling decider: pure, so every rule is checked with hand-built snapshots."""

from __future__ import annotations

from pedl.scheduling.pool_policy import PoolPolicy, TypeOffer
from pedl.scheduling.scaling_decider import InstanceView, PendingTask, decide

G4 = TypeOffer("g4dn.12xlarge", 4, 3.9)
G1 = TypeOffer("g5.xlarge", 1, 1.0)
G8 = TypeOffer("p3.16xlarge", 8, 24.5)
NOW = 10_000.0


def policy(*types: TypeOffer, **kw) -> PoolPolicy:
    return PoolPolicy(types=tuple(types) or (G4,), **kw)


def running(id_: str, slots: int = 4, free: int | None = None, idle_since: float | None = None, **kw) -> InstanceView:
    free = slots if free is None else free
    busy = free < slots
    return InstanceView(
        id_,
        kw.pop("instance_type", "g4dn.12xlarge"),
        "running",
        launched_at=0.0,
        slots=slots,
        free_slots=free,
        busy=busy,
        idle_since=None if busy else (NOW if idle_since is None else idle_since),
        **kw,
    )


def starting(id_: str, slots: int = 4, launched_at: float = NOW - 10, **kw) -> InstanceView:
    return InstanceView(
        id_, kw.pop("instance_type", "g4dn.12xlarge"), "starting", launched_at=launched_at, slots=slots, **kw
    )


def tasks(*slots: int) -> list[PendingTask]:
    return [PendingTask(f"a{i}", s, float(i)) for i, s in enumerate(slots)]


def launched(d) -> dict[tuple[str, bool], int]:
    return {(launch.instance_type, launch.spot): launch.count for launch in d.launch}


def test_nothing_to_do_on_an_empty_quiet_pool() -> None:
    d = decide(NOW, policy(), [], [])
    assert d.launch == [] and d.terminate == [] and d.never_fit == []


def test_bin_packs_tasks_onto_new_instances_keeping_each_whole() -> None:
    # 3+3+2+2 slots on 4-slot instances: FFD gives [3],[3],[2,2] -> 3 instances (slot sum says 3 too)
    d = decide(NOW, policy(G4), [], tasks(3, 3, 2, 2))
    assert launched(d) == {("g4dn.12xlarge", False): 3}
    # 3+3+3 slots: slot sum says ceil(9/4)=3 but also fragmentation: 3 instances, never 2 + partial
    d = decide(NOW, policy(G4), [], tasks(3, 3, 3))
    assert launched(d) == {("g4dn.12xlarge", False): 3}
    # 1+1+1+1+1 -> 2 instances
    d = decide(NOW, policy(G4), [], tasks(1, 1, 1, 1, 1))
    assert launched(d) == {("g4dn.12xlarge", False): 2}


def test_slot_sum_underestimates_where_packing_does_not() -> None:
    # 3,3 on 4-slot agents: slot sum 6 -> ceil(6/4)=2; packing also 2. 3,3,3,3 -> sum 12 -> 3, packing 4.
    pedl = decide(NOW, policy(G4), [], tasks(3, 3, 3, 3))
    det = decide(NOW, policy(G4, policy="determined"), [], tasks(3, 3, 3, 3))
    assert launched(pedl)[("g4dn.12xlarge", False)] == 4
    assert launched(det)[("g4dn.12xlarge", False)] == 3


def test_instances_already_booting_count_as_capacity() -> None:
    d = decide(NOW, policy(G4), [starting("i-1")], tasks(2, 2))
    assert d.launch == []
    d = decide(NOW, policy(G4), [starting("i-1")], tasks(2, 2, 1))
    assert launched(d) == {("g4dn.12xlarge", False): 1}


def test_free_slots_on_running_agents_count_as_capacity() -> None:
    d = decide(NOW, policy(G4), [running("i-1", free=2)], tasks(2))
    assert d.launch == []
    d = decide(NOW, policy(G4), [running("i-1", free=2)], tasks(3))
    assert launched(d) == {("g4dn.12xlarge", False): 1}


def test_launches_are_capped_by_max_instances() -> None:
    d = decide(NOW, policy(G4, max_instances=3), [running("i-1", free=0)], tasks(4, 4, 4, 4))
    assert launched(d) == {("g4dn.12xlarge", False): 2}


def test_min_instances_are_kept_and_filled() -> None:
    d = decide(NOW, policy(G4, min_instances=2), [], [])
    assert launched(d) == {("g4dn.12xlarge", False): 2}
    idle = [running("i-1", idle_since=0.0), running("i-2", idle_since=0.0)]
    d = decide(NOW, policy(G4, min_instances=2, max_idle=60), idle, [])
    assert d.terminate == [] and d.launch == []


def test_idle_instances_are_terminated_after_the_period_only() -> None:
    insts = [running("old", idle_since=NOW - 301), running("fresh", idle_since=NOW - 10), running("busy", free=1)]
    d = decide(NOW, policy(G4, max_idle=300), insts, [])
    assert d.terminate == [("old", "idle for more than 300s")]
    assert d.next_check_at == NOW - 10 + 300  # wakes exactly when "fresh" expires


def test_an_idle_instance_a_waiting_task_will_use_is_kept() -> None:
    insts = [running("i-1", idle_since=NOW - 1000)]
    d = decide(NOW, policy(G4, max_idle=300), insts, tasks(2))
    assert d.terminate == [] and d.launch == []


def test_instances_that_never_register_are_terminated() -> None:
    insts = [starting("late", launched_at=NOW - 1300), starting("ok", launched_at=NOW - 100)]
    d = decide(NOW, policy(G4, max_starting=1200), insts, [])
    assert d.terminate == [("late", "did not register an agent within 1200s")]
    assert d.next_check_at == NOW - 100 + 1200


def test_disconnected_agents_are_terminated_after_the_period() -> None:
    insts = [running("gone", free=0, disconnected_since=NOW - 700), running("blip", free=0, disconnected_since=NOW - 5)]
    d = decide(NOW, policy(G4, max_disconnected=600), insts, [])
    assert [t[0] for t in d.terminate] == ["gone"]


def test_a_task_that_fits_no_type_fails_at_once() -> None:
    d = decide(NOW, policy(G4, max_instances=2), [], tasks(3, 12, 8))
    assert [a for a, _ in d.never_fit] == ["a1"]  # 12 slots = 3 whole instances > max 2; 8 = 2 whole ones
    assert "no allowed instance type fits" in d.never_fit[0][1]
    assert launched(d) == {("g4dn.12xlarge", False): 2}  # [3] + a gang of 2 for 8 = 3, capped at 2
    d = decide(NOW, policy(G4), [], tasks(6))  # 6 is neither <= 4 nor a multiple of 4
    assert [a for a, _ in d.never_fit] == ["a0"] and d.launch == []


def test_a_gang_task_is_not_relaunched_while_its_instances_boot() -> None:
    booting = [starting("i-1"), starting("i-2")]
    d = decide(NOW, policy(G4), booting, tasks(8))
    assert d.launch == []


def test_several_types_in_order_of_preference() -> None:
    d = decide(NOW, policy(G1, G8), [], tasks(1, 8))
    assert launched(d) == {("g5.xlarge", False): 1, ("p3.16xlarge", False): 1}


def test_spot_first_then_on_demand_when_spot_is_unavailable() -> None:
    p = policy(G4, spot=True)
    assert launched(decide(NOW, p, [], tasks(4))) == {("g4dn.12xlarge", True): 1}
    d = decide(NOW, p, [], tasks(4), unavailable={("g4dn.12xlarge", True)})
    assert launched(d) == {("g4dn.12xlarge", False): 1}
    no_fallback = policy(G4, G8, spot=True, spot_fallback_to_on_demand=False)
    d = decide(NOW, no_fallback, [], tasks(4), unavailable={("g4dn.12xlarge", True)})
    assert launched(d) == {("p3.16xlarge", True): 1}


def test_an_unfulfilled_spot_request_is_cancelled_and_replaced_at_once() -> None:
    req = InstanceView("sir-1", "g4dn.12xlarge", "requested", launched_at=NOW - 121, slots=4, spot=True)
    d = decide(NOW, policy(G4, spot=True, spot_request_timeout=120), [req], tasks(4))
    assert d.terminate == [("sir-1", "spot request unfulfilled after 120s")]
    assert d.unavailable == [("g4dn.12xlarge", True)]
    assert launched(d) == {("g4dn.12xlarge", False): 1}


def test_launch_backoff_holds_launches_but_not_terminations() -> None:
    insts = [running("idle", idle_since=0.0)]
    d = decide(NOW, policy(G4, max_idle=60), insts, tasks(4, 4), launch_blocked_until=NOW + 30)
    assert d.launch == []
    assert d.next_check_at == NOW + 30
    d = decide(NOW + 31, policy(G4, max_idle=60), [], tasks(4), launch_blocked_until=NOW + 30)
    assert launched(d) == {("g4dn.12xlarge", False): 1}


def test_above_max_instances_the_least_useful_go_first() -> None:
    insts = [running("busy", free=0), starting("boot"), running("idle")]
    d = decide(NOW, policy(G4, max_instances=2), insts, [])
    assert d.terminate == [("boot", "above max_instances (2)")]


def test_an_interrupted_spot_instance_is_replaced() -> None:
    insts = [running("i-1", free=0, spot=True, interrupted=True)]
    d = decide(NOW, policy(G4, spot=True), insts, tasks(4))
    assert launched(d) == {("g4dn.12xlarge", True): 1}


def test_zero_slot_tasks_need_one_instance() -> None:
    d = decide(NOW, policy(TypeOffer("m5.large", 0)), [], tasks(0, 0))
    assert launched(d) == {("m5.large", False): 1}


def test_determined_policy_ignores_tasks_that_do_not_fit() -> None:
    d = decide(NOW, policy(G4, policy="determined"), [], tasks(6, 2))
    assert [a for a, _ in d.never_fit] == ["a0"]
    assert launched(d) == {("g4dn.12xlarge", False): 1}

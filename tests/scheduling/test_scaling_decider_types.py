"""Which instance type new capacity gets: the (type, market) whose packing of the waiting tasks costs
least per hour, spot first when configured, list order for ties; and the demand the scheduler can
already place (its fit model, gangs over mixed sizes included) opens nothing."""

from __future__ import annotations

from pedl.scheduling.pool_policy import PoolPolicy, TypeOffer
from pedl.scheduling.scaling_decider import InstanceView, PendingTask, decide

NOW = 10_000.0
G5X = TypeOffer("g5.xlarge", 1, 1.006)
P38 = TypeOffer("p3.8xlarge", 4, 12.24)


def tasks(*slots: int) -> list[PendingTask]:
    return [PendingTask(f"a{i}", s, float(i)) for i, s in enumerate(slots)]


def launched(d) -> dict[tuple[str, bool], int]:
    return {(launch.instance_type, launch.spot): launch.count for launch in d.launch}


def running(id_: str, slots: int, free: int | None = None, idle_since: float = NOW, **kw) -> InstanceView:
    free = slots if free is None else free
    return InstanceView(
        id_,
        "any",
        "running",
        launched_at=0.0,
        slots=slots,
        free_slots=free,
        busy=free < slots,
        idle_since=None if free < slots else idle_since,
        **kw,
    )


def starting(id_: str, slots: int, **kw) -> InstanceView:
    return InstanceView(id_, "any", "starting", launched_at=NOW - 10, slots=slots, **kw)


# -- the cheapest type ------------------------------------------------------------------------------


def test_a_one_gpu_job_opens_the_cheap_one_gpu_type_whatever_the_list_order() -> None:
    for types in ((P38, G5X), (G5X, P38)):
        d = decide(NOW, PoolPolicy(types=types), [], tasks(1))
        assert launched(d) == {("g5.xlarge", False): 1}


def test_four_one_gpu_jobs_share_a_four_gpu_instance_when_that_is_cheaper() -> None:
    g1 = TypeOffer("g1", 1, 1.5)
    g4 = TypeOffer("g4", 4, 4.0)
    assert launched(decide(NOW, PoolPolicy(types=(g1, g4)), [], tasks(1, 1, 1, 1))) == {("g4", False): 1}
    assert launched(decide(NOW, PoolPolicy(types=(g1, g4)), [], tasks(1, 1))) == {("g1", False): 2}


def test_a_gang_of_eight_goes_on_one_eight_gpu_instance_when_cheaper() -> None:
    g4 = TypeOffer("g4", 4, 4.0)
    d = decide(NOW, PoolPolicy(types=(g4, TypeOffer("g8", 8, 7.0))), [], tasks(8))
    assert launched(d) == {("g8", False): 1}


def test_a_gang_of_eight_goes_on_two_four_gpu_instances_when_cheaper() -> None:
    g4 = TypeOffer("g4", 4, 4.0)
    d = decide(NOW, PoolPolicy(types=(TypeOffer("g8", 8, 9.0), g4)), [], tasks(8))
    assert launched(d) == {("g4", False): 2}


def test_list_order_breaks_ties() -> None:
    g4, g8 = TypeOffer("g4", 4, 4.0), TypeOffer("g8", 8, 8.0)
    assert launched(decide(NOW, PoolPolicy(types=(g4, g8)), [], tasks(8))) == {("g4", False): 2}
    assert launched(decide(NOW, PoolPolicy(types=(g8, g4)), [], tasks(8))) == {("g8", False): 1}
    a, b = TypeOffer("a", 2, 3.0), TypeOffer("b", 2, 3.0)
    assert launched(decide(NOW, PoolPolicy(types=(b, a)), [], tasks(2))) == {("b", False): 1}


def test_without_prices_list_order_decides_as_before() -> None:
    big, small = TypeOffer("big", 8), TypeOffer("small", 1)
    assert launched(decide(NOW, PoolPolicy(types=(big, small)), [], tasks(1))) == {("big", False): 1}
    # one type without a price: prices are not compared at all
    d = decide(NOW, PoolPolicy(types=(big, TypeOffer("small", 1, 1.0))), [], tasks(1))
    assert launched(d) == {("big", False): 1}


def test_room_left_by_a_larger_need_serves_smaller_tasks() -> None:
    g1, g4 = TypeOffer("g1", 1, 2.5), TypeOffer("g4", 4, 4.0)
    # the 2-slot task opens a g4 (4.0 < 2 x 2.5); the 1-slot one takes its leftover room
    assert launched(decide(NOW, PoolPolicy(types=(g1, g4)), [], tasks(2, 1))) == {("g4", False): 1}


def test_each_need_gets_its_own_cheapest_type() -> None:
    g8 = TypeOffer("g8", 8, 8.0)
    d = decide(NOW, PoolPolicy(types=(g8, G5X)), [], tasks(8, 1))
    assert launched(d) == {("g8", False): 1, ("g5.xlarge", False): 1}


# -- spot first, blocked types, room -------------------------------------------------------------------


def test_spot_pairs_first_by_their_spot_price() -> None:
    a = TypeOffer("a", 4, 4.0, spot_price=1.2)
    b = TypeOffer("b", 4, 3.0, spot_price=2.0)
    policy = PoolPolicy(types=(b, a), spot=True)
    assert launched(decide(NOW, policy, [], tasks(4))) == {("a", True): 1}
    # a type's spot price defaults to its price
    c = TypeOffer("c", 4, 1.0)
    assert launched(decide(NOW, PoolPolicy(types=(a, c), spot=True), [], tasks(4))) == {("c", True): 1}


def test_a_blocked_spot_pair_leaves_the_other_spot_types_before_any_on_demand() -> None:
    a = TypeOffer("a", 4, 4.0, spot_price=1.2)
    b = TypeOffer("b", 4, 3.0, spot_price=2.0)
    policy = PoolPolicy(types=(a, b), spot=True)
    assert launched(decide(NOW, policy, [], tasks(4), unavailable={("a", True)})) == {("b", True): 1}
    # every spot pair blocked: the cheapest on-demand type
    both = {("a", True), ("b", True)}
    assert launched(decide(NOW, policy, [], tasks(4), unavailable=both)) == {("b", False): 1}
    no_fallback = PoolPolicy(types=(a, b), spot=True, spot_fallback_to_on_demand=False)
    assert decide(NOW, no_fallback, [], tasks(4), unavailable=both).launch == []


def test_a_blocked_on_demand_type_leaves_the_next_cheapest() -> None:
    policy = PoolPolicy(types=(P38, G5X))
    assert launched(decide(NOW, policy, [], tasks(1), unavailable={("g5.xlarge", False)})) == {("p3.8xlarge", False): 1}
    d = decide(NOW, policy, [], tasks(1), unavailable={("g5.xlarge", False), ("p3.8xlarge", False)})
    assert d.launch == [] and d.never_fit == []  # it waits for a type to come back


def test_a_type_that_cannot_hold_the_task_is_not_chosen_even_if_cheaper() -> None:
    d = decide(NOW, PoolPolicy(types=(G5X, P38), max_instances=3), [], tasks(4))
    assert launched(d) == {("p3.8xlarge", False): 1}  # four g5.xlarge would exceed max_instances


def test_within_max_instances_the_type_that_holds_the_most_tasks() -> None:
    g1, g8 = TypeOffer("g1", 1, 1.0), TypeOffer("g8", 8, 10.0)
    # room for 2: g1 would hold 2 of the 8 tasks, one g8 holds all 8
    assert launched(decide(NOW, PoolPolicy(types=(g1, g8), max_instances=2), [], tasks(*[1] * 8))) == {("g8", False): 1}
    # room enough: eight g1 (8.0) cost less than one g8 (10.0)
    assert launched(decide(NOW, PoolPolicy(types=(g1, g8), max_instances=10), [], tasks(*[1] * 8))) == {
        ("g1", False): 8
    }


def test_a_gang_that_needs_more_instances_than_the_room_takes_a_bigger_type() -> None:
    g4, g8 = TypeOffer("g4", 4, 3.0), TypeOffer("g8", 8, 7.0)
    # four g4 (12.0) cost less than two g8 (14.0), but only when four more instances may open
    busy = [running("b1", 4, free=0), running("b2", 4, free=0)]
    assert launched(decide(NOW, PoolPolicy(types=(g4, g8), max_instances=5), busy, tasks(16))) == {("g8", False): 2}
    assert launched(decide(NOW, PoolPolicy(types=(g4, g8), max_instances=6), busy, tasks(16))) == {("g4", False): 4}
    # more than max_instances g4 for one task: g4 does not fit it at all
    assert launched(decide(NOW, PoolPolicy(types=(g4, g8), max_instances=3), [], tasks(16))) == {("g8", False): 2}


def test_min_instances_take_the_first_allowed_type_spot_first() -> None:
    g4, g8 = TypeOffer("g4", 4, 3.0), TypeOffer("g8", 8, 7.0)
    policy = PoolPolicy(types=(g4, g8), spot=True, min_instances=1)
    assert launched(decide(NOW, policy, [], [])) == {("g4", True): 1}
    assert launched(decide(NOW, policy, [], [], unavailable={("g4", True)})) == {("g8", True): 1}


def test_never_fit_is_unchanged() -> None:
    d = decide(NOW, PoolPolicy(types=(TypeOffer("g4", 4, 3.0),), max_instances=2), [], tasks(6, 12))
    assert sorted(a for a, _ in d.never_fit) == ["a0", "a1"]
    assert all("no allowed instance type fits" in why for _, why in d.never_fit)


def test_the_determined_baseline_ignores_prices() -> None:
    policy = PoolPolicy(types=(P38, G5X), policy="determined")
    assert launched(decide(NOW, policy, [], tasks(1))) == {("p3.8xlarge", False): 1}


# -- what the scheduler can place opens nothing ------------------------------------------------------


G4 = TypeOffer("g4", 4, 4.0)


def test_a_gang_on_running_agents_of_mixed_sizes_opens_nothing() -> None:
    insts = [running("a", 4), running("b", 2), running("c", 1), running("busy", 4, free=1)]
    d = decide(NOW, PoolPolicy(types=(G4,)), insts, tasks(7))
    assert d.launch == [] and d.never_fit == []
    assert d.terminate == []


def test_a_gang_on_booting_instances_of_mixed_sizes_opens_nothing() -> None:
    d = decide(NOW, PoolPolicy(types=(G4,)), [starting("a", 4), starting("b", 8)], tasks(12))
    assert d.launch == []


def test_a_task_no_type_fits_but_a_running_agent_holds_now_does_not_fail() -> None:
    d = decide(NOW, PoolPolicy(types=(G4,)), [running("old-type", 8)], tasks(6))
    assert d.never_fit == [] and d.launch == []
    assert [a for a, _ in decide(NOW, PoolPolicy(types=(G4,)), [], tasks(6)).never_fit] == ["a0"]


def test_the_decider_foresees_the_pools_fitting_policy() -> None:
    # partly used agents with 4 and 2 free; FIFO 2 then 4: best fit puts the 2 on the 2 and both
    # run; worst fit puts it on the 4 and the 4-slot task has nowhere to go
    insts = [running("four", 8, free=4), running("two", 8, free=2)]
    assert decide(NOW, PoolPolicy(types=(G4,), fitting="best"), insts, tasks(2, 4)).launch == []
    d = decide(NOW, PoolPolicy(types=(G4,), fitting="worst"), insts, tasks(2, 4))
    assert launched(d) == {("g4", False): 1}


def test_the_decider_places_in_the_schedulers_fifo_order() -> None:
    # free 6 and 4 on partly used agents; FIFO 2,2,3,3 fits (2 and 2 on the 4, 3 and 3 on the 6) where
    # largest-first best fit would not (3 on the 4, 3 on the 6, 2 on its 3 left, then 1 and 1 left)
    insts = [running("six", 8, free=6), running("four", 8, free=4)]
    assert decide(NOW, PoolPolicy(types=(G4,)), insts, tasks(2, 2, 3, 3)).launch == []


def test_booting_instances_spot_or_not_are_claimed_and_kept() -> None:
    insts = [running("idle", 4, idle_since=NOW - 10_000), starting("boot", 4, spot=True)]
    d = decide(NOW, PoolPolicy(types=(G4,), max_idle=60), insts, tasks(4, 4))
    assert d.launch == [] and d.terminate == []

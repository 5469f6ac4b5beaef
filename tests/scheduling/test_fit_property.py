"""Properties of the scaling decider against the scheduler, over random pools (running instances of
mixed sizes with random free slots, booting ones) and random waiting tasks (gangs included): it never
opens instances for demand the scheduler can place, it stays within max_instances, what it opens holds
what nothing else does, and for tasks of one need it opens the cheapest packing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pedl.scheduling.pool_policy import PoolPolicy, TypeOffer
from pedl.scheduling.scaling_decider import InstanceView, PendingTask, decide
from pedl.scheduling.scheduler import AgentSnapshot, SlotRequest, schedule

NOW = 10_000.0
TYPES = (
    TypeOffer("t1", 1, 1.0),
    TypeOffer("t2", 2, 2.1, spot_price=0.9),
    TypeOffer("t4", 4, 3.9),
    TypeOffer("t8", 8, 8.5, spot_price=2.5),
)
SIZES = (1, 2, 4, 8)
FEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def instances(draw, booting: bool = True) -> list[InstanceView]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        size = draw(st.sampled_from(SIZES))
        state = draw(st.sampled_from(("running", "running", "starting", "requested") if booting else ("running",)))
        spot = draw(st.booleans()) or state == "requested"
        if state == "running":
            free = draw(st.integers(0, size))
            out.append(
                InstanceView(
                    f"i{i}",
                    f"t{size}",
                    "running",
                    0.0,
                    size,
                    spot,
                    free_slots=free,
                    busy=free < size,
                    idle_since=None if free < size else NOW,
                )
            )
        else:
            out.append(InstanceView(f"i{i}", f"t{size}", state, NOW - 1.0, size, spot))  # type: ignore[arg-type]
    return out


def waiting(needs: list[int]) -> list[PendingTask]:
    return [PendingTask(f"a{i:02d}", n, float(i)) for i, n in enumerate(needs)]


def requests(tasks: list[PendingTask]) -> list[SlotRequest]:
    return [SlotRequest(t.allocation_id, t.slots_needed, 42, t.queued_at) for t in tasks]


def agent(inst: InstanceView) -> AgentSnapshot:
    ids = tuple(str(s) for s in range(inst.slots))
    free = ids[inst.slots - inst.free_slots :] if inst.state == "running" else ids
    return AgentSnapshot(inst.id, ids, free, spot=inst.spot)


def placed(tasks: list[PendingTask], insts: list[InstanceView], fitting: str) -> set[str]:
    """What the scheduler places now on the running agents, and then on the booting instances once
    they register (as free agents), in its FIFO order."""
    now = {
        a.allocation_id for a in schedule(requests(tasks), [agent(i) for i in insts if i.state == "running"], fitting)
    }  # type: ignore[arg-type]
    rest = [t for t in tasks if t.allocation_id not in now]
    later = schedule(requests(rest), [agent(i) for i in insts if i.state != "running"], fitting)  # type: ignore[arg-type]
    return now | {a.allocation_id for a in later}


needs = st.lists(st.integers(1, 16), max_size=10)
fittings = st.sampled_from(["best", "worst"])
type_lists = st.lists(st.sampled_from(TYPES), min_size=1, max_size=4, unique=True)


@FEW
@given(insts=instances(), slots=needs, fitting=fittings, types=type_lists, spot=st.booleans())
def test_no_launch_for_demand_the_scheduler_places(insts, slots, fitting, types, spot) -> None:
    tasks = waiting(slots)
    d = decide(NOW, PoolPolicy(types=tuple(types), max_instances=30, fitting=fitting, spot=spot), insts, tasks)
    if placed(tasks, [i for i in insts if i.state == "running"], fitting) == {t.allocation_id for t in tasks}:
        assert d.launch == [] and d.never_fit == []  # all of it fits the running agents now
    if placed(tasks, insts, fitting) == {t.allocation_id for t in tasks}:
        assert d.launch == [] and d.never_fit == []  # ... or the instances already booting
    assert d.terminate == []  # nothing here is idle long, late or lost


@FEW
@given(sizes=st.lists(st.sampled_from(SIZES), min_size=1, max_size=6), data=st.data(), fitting=fittings)
def test_no_launch_for_a_gang_over_free_agents_of_mixed_sizes(sizes, data, fitting) -> None:
    insts = [
        InstanceView(f"i{i}", f"t{s}", "running", 0.0, s, free_slots=s, idle_since=NOW) for i, s in enumerate(sizes)
    ]
    chosen = data.draw(st.lists(st.sampled_from(range(len(sizes))), min_size=1, unique=True))
    need = sum(sizes[i] for i in chosen)
    tasks = waiting([need])
    assert placed(tasks, insts, fitting) == {"a00"}
    # room to open more, and a type (t4) that fits no gang whose need is not a multiple of 4
    d = decide(NOW, PoolPolicy(types=(TYPES[2],), max_instances=len(sizes) + 10, fitting=fitting), insts, tasks)
    assert d.launch == [] and d.never_fit == [] and d.terminate == []


@FEW
@given(insts=instances(), slots=needs, types=type_lists, max_instances=st.integers(0, 12), spot=st.booleans())
def test_launches_stay_within_max_instances(insts, slots, types, max_instances, spot) -> None:
    d = decide(NOW, PoolPolicy(types=tuple(types), max_instances=max_instances, spot=spot), insts, waiting(slots))
    assert len(insts) - len(d.terminate) + sum(launch.count for launch in d.launch) <= max_instances


@FEW
@given(insts=instances(), slots=st.lists(st.integers(0, 16), max_size=10), types=type_lists, fitting=fittings)
def test_what_is_opened_holds_the_demand_nothing_else_holds(insts, slots, types, fitting) -> None:
    tasks = waiting(slots)
    policy = PoolPolicy(types=tuple(types), max_instances=200, fitting=fitting)
    d = decide(NOW, policy, insts, tasks)
    never = {a for a, _ in d.never_fit}
    for a in never:  # only a task no allowed type fits (alone or as a gang of one type) ever fails
        need = next(t.slots_needed for t in tasks if t.allocation_id == a)
        assert all(need > o.slots and (need % o.slots or need // o.slots > 200) for o in types)
    capacity = sum(i.free_slots if i.state == "running" else i.slots for i in insts)
    capacity += sum(launch.count * launch.slots for launch in d.launch)
    assert capacity >= sum(t.slots_needed for t in tasks if t.allocation_id not in never)
    if any(t.slots_needed == 0 and t.allocation_id not in never for t in tasks):
        assert insts or d.launch  # a task of no slots still needs an instance to run on


@FEW
@given(need=st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]), count=st.integers(1, 9), types=type_lists, spot=st.booleans())
def test_tasks_of_one_need_open_the_cheapest_packing(need, count, types, spot) -> None:
    max_instances = 200  # room for every packing: the cost alone decides
    d = decide(NOW, PoolPolicy(types=tuple(types), max_instances=max_instances, spot=spot), [], waiting([need] * count))

    def price(o: TypeOffer) -> float:
        return o.spot_price if spot and o.spot_price is not None else o.price

    def cost(o: TypeOffer) -> float | None:
        if need <= o.slots:
            return -(-count // (o.slots // need)) * price(o)
        if need % o.slots == 0 and need // o.slots <= max_instances:
            return count * (need // o.slots) * price(o)
        return None

    costs = [(c, o) for o in types if (c := cost(o)) is not None]
    if not costs:
        assert d.launch == [] and len(d.never_fit) == count
        return
    cheapest = min(c for c, _ in costs)
    first = next(o for c, o in costs if abs(c - cheapest) < 1e-9)  # list order breaks ties
    assert [(launch.instance_type, launch.spot) for launch in d.launch] == [(first.name, spot)]
    assert abs(sum(launch.count * price(first) for launch in d.launch) - cheapest) < 1e-9


@st.composite
def tight(draw) -> tuple[list[InstanceView], list[int]]:
    """Running agents of any size with random free slots, and tasks that cut those free slots into
    pieces, shuffled: the scheduler's FIFO fit often places all of them, barely."""
    insts, parts = [], []
    for i in range(draw(st.integers(1, 6))):
        size = draw(st.integers(1, 8))
        free = draw(st.integers(0, size))
        insts.append(
            InstanceView(
                f"i{i}",
                f"t{size}",
                "running",
                0.0,
                size,
                draw(st.booleans()),
                free_slots=free,
                busy=free < size,
                idle_since=None if free < size else NOW,
            )
        )
        while free:
            part = draw(st.integers(1, free))
            parts.append(part)
            free -= part
    return insts, draw(st.permutations(parts))


@FEW
@given(pool=tight(), fitting=fittings)
def test_no_launch_when_the_waiting_tasks_fill_the_free_slots_the_schedulers_way(pool, fitting) -> None:
    insts, slots = pool
    tasks = waiting(slots)
    d = decide(NOW, PoolPolicy(types=TYPES, max_instances=30, fitting=fitting), insts, tasks)
    if placed(tasks, insts, fitting) == {t.allocation_id for t in tasks}:
        assert d.launch == [] and d.never_fit == []

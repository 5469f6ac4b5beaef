"""The yield planner, pure: a long checkpointed trial gives its slots to new work that waits for a
booting instance, and only then; what never yields; the budget; moves already under way."""

from __future__ import annotations

from dataclasses import replace

from pedl.scheduling.consolidation import HostView, MovePolicy, TaskView
from pedl.scheduling.yielding import WaitingTask, plan_yields

NOW = 100_000.0
POLICY = MovePolicy(max_moves_per_hour=10, min_runtime_between_moves=600, min_remaining_to_yield=3600)


def host(i: str, slots: int = 4, free: int = 0, ready: bool = True, draining: bool = False) -> HostView:
    return HostView(i, "p3.8xlarge", slots, free if ready else slots, 12.24, ready=ready, draining=draining)


def trial(
    alloc: str,
    on: str = "a",
    slots: int = 1,
    remaining: float | None = 7200.0,
    movable: bool = True,
    since: float = NOW - 3600,
    priority: int = 42,
) -> TaskView:
    return TaskView(alloc, ((on, slots),), movable, remaining, since, priority)


def new(alloc: str, slots: int = 1, first: bool = True, priority: int = 42) -> WaitingTask:
    return WaitingTask(alloc, slots, first, priority)


FULL = host("a")
BOOTING = host("b", ready=False)


def yields(hosts=(FULL, BOOTING), tasks=(), waiting=(), policy: MovePolicy = POLICY, **kw) -> list[tuple[str, str]]:
    return [(m.allocation_id, m.yield_to) for m in plan_yields(NOW, policy, hosts, tasks, waiting, **kw)]


def test_a_long_trial_yields_to_new_work_waiting_for_a_boot() -> None:
    [move] = plan_yields(NOW, POLICY, [FULL, BOOTING], [trial("t1")], [new("n1")])
    assert (move.allocation_id, move.source, move.yield_to) == ("t1", ("a",), "n1")
    assert "yielded its slots on instance a to new work (n1)" in move.reason


def test_the_longest_still_to_run_yields_first() -> None:
    tasks = [trial("short", remaining=4000), trial("long", remaining=90_000), trial("mid", remaining=20_000)]
    assert yields(tasks=tasks, waiting=[new("n1"), new("n2")]) == [("long", "n1"), ("mid", "n2")]


def test_nothing_booting_or_too_little_booting_means_no_yield() -> None:
    # without an instance coming, the trial would have nowhere to go
    assert yields(hosts=[FULL], tasks=[trial("t1")], waiting=[new("n1")]) == []
    # 4 slots booting for 5 waiting: not every waiting task has a place coming
    assert yields(tasks=[trial("t1")], waiting=[new("n1", slots=1), new("n2", slots=4)]) == []
    # a draining instance is not capacity coming
    assert yields(hosts=[FULL, host("b", ready=False, draining=True)], tasks=[trial("t1")], waiting=[new("n1")]) == []


def test_what_never_yields() -> None:
    never = [
        trial("unckpt", movable=False),
        trial("unknown", remaining=None),
        trial("ending", remaining=3599),
        trial("recent", since=NOW - 599),
        TaskView("gang", (("a", 2), ("c", 2)), True, 9e9, 0.0),
    ]
    room = [FULL, BOOTING, host("b2", ready=False)]  # 8 slots coming: enough for all the waiting work
    for task in never:
        assert yields(hosts=room, tasks=[task], waiting=[new("n1"), new("n4", slots=4)]) == [], task
    assert yields(hosts=room, tasks=[trial("t1")], waiting=[new("n1"), new("n4", slots=4)]) == [("t1", "n1")]
    # on a draining instance (consolidation is emptying it) it is moving already
    assert yields(hosts=[host("a", draining=True), BOOTING], tasks=[trial("t1")], waiting=[new("n1")]) == []


def test_only_new_work_as_urgent_is_yielded_to() -> None:
    # a trial queued again after a move has a checkpoint to resume from: it is not new work
    assert yields(tasks=[trial("t1")], waiting=[new("moved", first=False)]) == []
    # work less urgent than the trial (a larger priority number) does not take its slots
    assert yields(tasks=[trial("t1", priority=10)], waiting=[new("n1", priority=42)]) == []
    assert yields(tasks=[trial("t1", priority=42)], waiting=[new("n1", priority=10)]) == [("t1", "n1")]


def test_a_trial_yields_only_slots_the_work_needs() -> None:
    tasks = [trial("one"), trial("two", slots=2)]
    assert yields(tasks=tasks, waiting=[new("n2", slots=2)]) == [("two", "n2")]
    assert yields(tasks=[trial("two", slots=2)], waiting=[new("n1")]) == []
    assert yields(tasks=tasks, waiting=[new("zero", slots=0)]) == []


def test_the_budget_caps_yields_with_the_other_moves() -> None:
    tasks = [trial("t1"), trial("t2")]
    waiting = [new("n1"), new("n2")]
    assert yields(tasks=tasks, waiting=waiting, recent_moves=[NOW - 60] * 9) == [("t1", "n1")]
    assert yields(tasks=tasks, waiting=waiting, recent_moves=[NOW - 60] * 10) == []
    assert yields(tasks=tasks, waiting=waiting, recent_moves=[NOW - 3601] * 10) == [("t1", "n1"), ("t2", "n2")]


def test_slots_a_move_under_way_frees_serve_the_first_in_the_queue() -> None:
    tasks = [trial("t1"), trial("t2")]
    # one slot on `a` comes free when a yield already asked for ends: n1 takes it, only n2 needs a new yield
    assert yields(tasks=tasks, waiting=[new("n1"), new("n2")], leaving={"a": 1}) == [("t1", "n2")]
    assert yields(tasks=tasks, waiting=[new("n1"), new("n2")], leaving={"a": 2}) == []
    # slots leaving an instance that takes no new work (draining, or not ours to count) serve nobody
    assert yields(tasks=tasks, waiting=[new("n1")], leaving={"gone": 1}) == [("t1", "n1")]


def test_switched_off_it_plans_nothing() -> None:
    for policy in (replace(POLICY, yield_to_new_work=False), replace(POLICY, enabled=False)):
        assert yields(tasks=[trial("t1")], waiting=[new("n1")], policy=policy) == []


def test_a_boot_about_to_end_is_no_reason_to_yield() -> None:
    policy = replace(POLICY, boot_time=90.0, checkpoint_cost=20.0)
    just_launched = HostView("b", "p3.8xlarge", 4, 4, 12.24, ready=False, launched_at=NOW - 10)
    nearly_up = HostView("b", "p3.8xlarge", 4, 4, 12.24, ready=False, launched_at=NOW - 75)
    one = {"tasks": [trial("t1")], "waiting": [new("n1")], "policy": policy}
    assert yields(hosts=[FULL, just_launched], **one) == [("t1", "n1")]
    # 15 s of boot left, against a 20 s checkpoint: the new work starts sooner on the booting instance
    assert yields(hosts=[FULL, nearly_up], **one) == []

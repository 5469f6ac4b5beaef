"""The order of `--follow` output: events and log lines come out oldest first, each held until the
other stream has been read past it."""

from __future__ import annotations

from pedl.cli.follow_merge import FollowMerge


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def merge_with_clock() -> tuple[FollowMerge, list[str], Clock]:
    printed: list[str] = []
    clock = Clock()
    return FollowMerge(printed.append, clock=clock, event_hold=1.0, line_hold_max=10.0), printed, clock


def test_a_line_waits_for_the_events_read_after_it_arrived() -> None:
    merge, printed, clock = merge_with_clock()
    merge.add_line(50.2, 7, "[trial 1] first line")  # arrives before the poll saw the trial start
    merge.release()
    assert printed == []  # the event of its start may still be on its way
    clock.now = 100.5
    merge.add_events([(50.0, 3, "[trial 1] is RUNNING")], read_began=100.4)
    merge.release()
    assert printed == []  # the event waits for lines of its moment; the line waits behind it
    clock.now = 101.6
    merge.release()
    assert printed == ["[trial 1] is RUNNING", "[trial 1] first line"]


def test_events_of_one_instant_keep_the_masters_order_and_come_before_lines() -> None:
    merge, printed, clock = merge_with_clock()
    merge.add_line(60.0, 9, "[trial 3] last line")
    merge.add_events(
        [(60.0, 12, "Experiment 1 is COMPLETED"), (60.0, 11, "[trial 3] is COMPLETED")], read_began=clock.now + 0.1
    )
    merge.flush()
    assert printed == ["[trial 3] is COMPLETED", "Experiment 1 is COMPLETED", "[trial 3] last line"]


def test_an_event_waits_for_older_lines_that_arrive_after_it() -> None:
    merge, printed, clock = merge_with_clock()
    merge.add_events([(70.0, 20, "[trial 2] is COMPLETED")], read_began=clock.now)
    clock.now += 0.5
    merge.add_line(69.9, 30, "[trial 2] done")  # shipped by its agent a little late
    merge.add_events([], read_began=clock.now + 0.01)
    clock.now += 0.6
    merge.release()
    assert printed == ["[trial 2] done", "[trial 2] is COMPLETED"]


def test_lines_go_out_once_the_events_are_complete_and_never_wait_forever() -> None:
    merge, printed, clock = merge_with_clock()
    merge.add_line(1.0, 1, "a")
    merge.events_complete()
    merge.release()
    assert printed == ["a"]
    merge2, printed2, clock2 = merge_with_clock()
    merge2.add_line(1.0, 1, "b")  # the events cannot be read (the master is away)
    clock2.now += 10.0
    merge2.release()
    assert printed2 == ["b"] and merge2.held() == 0

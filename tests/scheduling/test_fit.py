"""The shared fit model: one bin by best or worst fit, gangs over the fewest wholly free bins of mixed
sizes, preferred bins first, whole bins kept for gangs, and the capability filter."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from pedl.scheduling.fit import SlotBins


def bins(*specs: tuple) -> SlotBins[str]:
    """(id, total, free[, preferred[, capable]]) each."""
    b: SlotBins[str] = SlotBins()
    for key, total, free, *rest in specs:
        preferred = rest[0] if rest else False
        capable = rest[1] if len(rest) > 1 else True
        b.add(key, total, free, preferred=preferred, capable=capable)
    return b


def test_best_fit_takes_the_tightest_bin_and_worst_the_roomiest() -> None:
    b = bins(("big", 8, 8), ("small", 2, 2), ("mid", 4, 3))
    assert b.fit_one(2, "best") == "small"
    assert b.fit_one(3, "best") == "mid"
    assert b.fit_one(2, "worst") == "big"
    assert b.fit_one(9, "best") is None


def test_place_takes_the_slots_and_moves_the_bin() -> None:
    b = bins(("a", 4, 4), ("b", 4, 4))
    assert b.place(3) == [("a", 3)]
    assert b.free == {"a": 1, "b": 4} and b.free_total == 5
    assert b.place(1) == [("a", 1)]  # now the tightest
    assert b.place(4) == [("b", 4)]
    assert b.place(1) is None and b.free_total == 0


def test_a_partly_used_bin_goes_before_a_whole_one_with_the_same_room() -> None:
    # both have 2 free; taking the whole 2-slot bin would spoil a later gang of 6 (4 + 2)
    b = bins(("whole2", 2, 2), ("used4", 4, 2), ("whole4", 4, 4))
    assert b.place(2) == [("used4", 2)]
    assert sorted(k for k, _ in b.place(6) or []) == ["whole2", "whole4"]


def test_preferred_bins_are_filled_first_whatever_their_fit() -> None:
    b = bins(("od-tight", 2, 2), ("spot-roomy", 8, 8, True))
    assert b.fit_one(2, "best") == "spot-roomy"
    assert b.fit_one(2, "worst") == "spot-roomy"
    b.take("spot-roomy", 7)
    assert b.fit_one(2, "best") == "od-tight"  # no preferred bin has room any more


def test_best_fit_among_preferred_bins() -> None:
    b = bins(("s8", 8, 8, True), ("s4", 4, 4, True), ("od2", 2, 2))
    assert b.fit_one(2, "best") == "s4"
    assert b.fit_one(2, "worst") == "s8"


def test_the_capability_filter() -> None:
    b = bins(("plain", 1, 1, False, False), ("docker", 4, 4, False, True))
    assert b.fit_one(1, capable_only=True) == "docker"
    assert b.fit_one(1) == "plain"
    assert b.fit_one(2, capable_only=True) == "docker"
    assert bins(("plain", 4, 4, False, False)).place(1, capable_only=True) is None


def test_without_the_need_a_bin_without_the_capability_goes_first_among_equals() -> None:
    b = bins(("docker", 2, 2, False, True), ("plain", 2, 2, False, False))
    assert b.fit_one(2) == "plain"
    assert b.fit_one(2, capable_only=True) == "docker"


def test_a_gang_takes_the_fewest_whole_bins_of_mixed_sizes() -> None:
    b = bins(("a1", 1, 1), ("b2", 2, 2), ("c4", 4, 4), ("d4", 4, 4), ("e8", 8, 8))
    assert sorted(b.fit_whole(12) or []) == ["c4", "e8"]
    assert sorted(b.fit_whole(7) or []) == ["a1", "b2", "c4"]
    assert b.fit_whole(20) is None  # 19 slots in all


def test_a_gang_adds_up_exactly_and_uses_whole_bins_only() -> None:
    b = bins(("a", 4, 4), ("b", 4, 4))
    assert b.fit_whole(6) is None  # would strand 2 slots of a second bin
    b = bins(("a", 4, 4), ("b", 4, 3), ("c", 4, 4))
    assert b.place(8) == [("a", 4), ("c", 4)]
    assert b.free == {"a": 0, "b": 3, "c": 0}


def test_a_gang_prefers_preferred_bins_of_the_same_size() -> None:
    b = bins(("od-a", 4, 4), ("od-b", 4, 4), ("spot", 4, 4, True))
    assert b.fit_whole(8) == ["spot", "od-a"]


def test_a_gang_of_capable_bins_only() -> None:
    b = bins(("p", 2, 2, False, False), ("d1", 2, 2, False, True), ("d2", 2, 2, False, True))
    assert sorted(b.fit_whole(4, capable_only=True) or []) == ["d1", "d2"]
    assert b.fit_whole(6, capable_only=True) is None
    assert b.fit_whole(6) is not None


def test_one_bin_goes_before_a_gang() -> None:
    b = bins(("a", 2, 2), ("b", 2, 2), ("c", 4, 4))
    assert b.place(4) == [("c", 4)]
    assert b.place(4) == [("a", 2), ("b", 2)]


def test_zero_slots_go_on_the_fullest_bin_even_a_full_one() -> None:
    b = bins(("roomy", 4, 4), ("full", 4, 0))
    assert b.place(0) == [("full", 0)]
    assert b.free_total == 4
    assert bins().place(0) is None


def test_bins_added_later_are_found() -> None:
    b: SlotBins[int] = SlotBins()
    assert b.place(2) is None and len(b) == 0
    b.add(0, 8, 8)
    assert b.place(2) == [(0, 2)]
    b.add(1, 16, 16)
    assert b.place(16) == [(1, 16)]
    assert b.max_free >= 16 and len(b) == 2


# -- properties against brute force ------------------------------------------------------------------

FEW = settings(max_examples=80, deadline=None)
# (total, free, preferred, capable) per bin
bin_specs = st.lists(
    st.integers(1, 8).flatmap(
        lambda total: st.tuples(st.just(total), st.integers(0, total), st.booleans(), st.booleans())
    ),
    max_size=8,
)


def build(specs: list[tuple[int, int, bool, bool]]) -> SlotBins[int]:
    b: SlotBins[int] = SlotBins()
    for i, (total, free, preferred, capable) in enumerate(specs):
        b.add(i, total, free, preferred=preferred, capable=capable)
    return b


@FEW
@given(specs=bin_specs, need=st.integers(1, 20), capable_only=st.booleans())
def test_a_gang_is_the_fewest_whole_bins_adding_up_exactly(specs, need, capable_only) -> None:
    whole = [i for i, (total, free, _, capable) in enumerate(specs) if free == total and (capable or not capable_only)]
    fewest = next(
        (
            k
            for k in range(1, len(whole) + 1)
            if any(sum(specs[i][0] for i in c) == need for c in combinations(whole, k))
        ),
        None,
    )
    got = build(specs).fit_whole(need, capable_only=capable_only)
    if fewest is None:
        assert got is None
    else:
        assert got is not None and len(got) == fewest == len(set(got))
        assert set(got) <= set(whole) and sum(specs[i][0] for i in got) == need


@FEW
@given(specs=bin_specs, need=st.integers(1, 8), fitting=st.sampled_from(["best", "worst"]), capable_only=st.booleans())
def test_one_bin_is_the_tightest_or_roomiest_of_the_first_class_with_room(specs, need, fitting, capable_only) -> None:
    eligible = [i for i, (_, free, _, capable) in enumerate(specs) if free >= need and (capable or not capable_only)]
    got = build(specs).fit_one(need, fitting, capable_only=capable_only)  # type: ignore[arg-type]
    if not eligible:
        assert got is None
        return
    assert got in eligible
    if any(specs[i][2] for i in eligible):  # a preferred bin with room: one of those
        eligible = [i for i in eligible if specs[i][2]]
    frees = [specs[i][1] for i in eligible]
    assert specs[got][1] == (min(frees) if fitting == "best" else max(frees))


@FEW
@given(specs=bin_specs, needs=st.lists(st.integers(0, 12), max_size=12))
def test_placing_never_gives_a_slot_twice_and_gangs_take_whole_bins(specs, needs) -> None:
    b = build(specs)
    free = {i: f for i, (_, f, _, _) in enumerate(specs)}
    for need in needs:
        before = dict(b.free)
        got = b.place(need)
        if got is None:
            assert b.free == before
            continue
        assert sum(n for _, n in got) == need
        if len(got) > 1:
            assert all(before[k] == b.total[k] == n for k, n in got)
        for k, n in got:
            free[k] -= n
        assert b.free == free and b.free_total == sum(free.values()) and min(free.values()) >= 0


def test_worst_fit_falls_back_to_the_bins_not_preferred() -> None:
    b = bins(("spot-full", 1, 0, True), ("od", 1, 1))
    assert b.fit_one(1, "worst") == "od"

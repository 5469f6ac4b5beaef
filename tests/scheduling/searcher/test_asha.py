"""The adaptive_asha searcher as a pure state machine: rung lengths, brackets by mode, stop decisions
on hand-built sequences in both metric directions, concurrency, state round trips and config
validation (through the master, a stopped trial's endReason and pause/activate:
tests/master/lifecycle/test_progression_asha.py)."""

from __future__ import annotations

import json
import random
import textwrap

import pytest

from pedl.config.experiment_config import ExperimentConfig, parse_experiment_config
from pedl.config.loading import ConfigError
from pedl.scheduling.searcher import SearcherActions, make_searcher
from pedl.scheduling.searcher.asha import (
    AdaptiveASHASearcher,
    bracket_max_concurrent,
    bracket_max_trials,
    bracket_rungs,
    effective_max_rungs,
    make_brackets,
    rung_lengths,
)

SPACE = """
    lr: {type: log, minval: -4, maxval: -1}
    layers: {type: int, minval: 1, maxval: 8}
"""


def asha(searcher: str, seed: int = 0, state: dict | None = None) -> AdaptiveASHASearcher:
    text = (
        f"entrypoint: x\nsearcher: {{name: adaptive_asha, metric: loss, {searcher}}}\n"
        "hyperparameters:\n" + textwrap.indent(textwrap.dedent(SPACE).strip(), "  ") + "\n"
    )
    s = make_searcher(parse_experiment_config(text), seed=seed, state=state)
    assert isinstance(s, AdaptiveASHASearcher)
    return s


def ids(actions: SearcherActions) -> list[str]:
    return [r.request_id for r in actions.create]


# one bracket of rungs at 1, 4 and 16 batches, every trial live at once
ONE_BRACKET = "max_trials: 16, max_length: 16, mode: aggressive, max_rungs: 3, max_concurrent_trials: 16"


# -- rungs and brackets ----------------------------------------------------------------------------


def test_rung_lengths_end_at_max_length() -> None:
    assert rung_lengths(5, 4, 256) == (1, 4, 16, 64, 256)
    assert rung_lengths(5, 4, 1000) == (3, 15, 62, 250, 1000)
    assert rung_lengths(4, 3, 100) == (3, 11, 33, 100)
    assert rung_lengths(1, 4, 50) == (50,)
    assert rung_lengths(3, 4, 2) == (1, 1, 2)  # never below one unit


def test_max_rungs_is_capped_by_length_and_trials_as_determined_does() -> None:
    assert effective_max_rungs(5, 256, 1000, 4) == 5
    assert effective_max_rungs(5, 64, 1000, 4) == 4  # log_4(64) is exactly 3
    assert effective_max_rungs(5, 63, 1000, 4) == 3
    assert effective_max_rungs(5, 1024, 16, 4) == 3  # only 16 trials: two halvings at most
    assert effective_max_rungs(5, 3, 1000, 4) == 1
    assert effective_max_rungs(2, 10_000, 10_000, 4) == 2


@pytest.mark.parametrize(
    ("mode", "rungs"),
    [
        ("aggressive", [5]),
        ("standard", [5, 4, 3]),
        ("conservative", [5, 4, 3, 2, 1]),
    ],
)
def test_brackets_by_mode(mode: str, rungs: list[int]) -> None:
    assert bracket_rungs(mode, 5) == rungs  # type: ignore[arg-type]
    brackets = make_brackets(max_trials=256, max_length=256, divisor=4, max_rungs=5, mode=mode, max_concurrent=0)  # type: ignore[arg-type]
    assert [b.num_rungs for b in brackets] == rungs
    assert sum(b.max_trials for b in brackets) == 256
    for b in brackets:
        assert b.rung_lengths[-1] == 256 and len(b.rung_lengths) == b.num_rungs
    assert (
        bracket_rungs(mode, 4)
        == {
            "aggressive": [4],
            "standard": [4, 3, 2],  # type: ignore[arg-type]
            "conservative": [4, 3, 2, 1],
        }[mode]
    )


def test_bracket_trials_give_each_bracket_about_equal_budget() -> None:
    # weights 4^4/5, 4^3/4, 4^2/3; what rounding leaves goes to the most aggressive bracket
    assert bracket_max_trials(256, 4, [5, 4, 3]) == [182, 56, 18]
    assert bracket_max_trials(16, 4, [3, 2]) == [12, 4]
    assert bracket_max_trials(3, 4, [3, 2, 1]) == [1, 1, 1]  # at least one each


def test_bracket_concurrency() -> None:
    assert bracket_max_concurrent(0, 4, [12, 4]) == [4, 4]  # Determined's default
    assert bracket_max_concurrent(0, 4, [182, 56, 18]) == [18, 18, 18]
    assert bracket_max_concurrent(10, 4, [182, 56, 18]) == [4, 3, 3]
    assert bracket_max_concurrent(2, 4, [182, 56, 18]) == [1, 1, 1]


def test_standard_mode_example() -> None:
    s = asha("max_trials: 16, max_length: 256")
    assert [(b.num_rungs, b.max_trials, b.max_concurrent, b.rung_lengths) for b in s.brackets] == [
        (3, 12, 4, (16, 64, 256)),
        (2, 4, 4, (64, 256)),
    ]


# -- decisions ---------------------------------------------------------------------------------------


def test_stop_decisions_smaller_is_better() -> None:
    s = asha(ONE_BRACKET)
    assert len(s.initial().create) == 16
    assert s.brackets[0].rung_lengths == (1, 4, 16)
    # (trial, loss at rung 1, stopped?) with n recorded so far and max(1, n // 4) continuing
    sequence = [
        ("r0", 0.5, False),  # n=1: alone, the best
        ("r1", 0.6, True),  # n=2: second of two
        ("r2", 0.4, False),  # n=3: new best
        ("r3", 0.7, True),  # n=4: keep 1
        ("r4", 0.45, True),  # n=5: second
        ("r5", 0.1, False),  # n=6: new best
        ("r6", 0.42, True),  # n=7: third
        ("r7", 0.3, False),
    ]  # n=8: keep 2, and it is second
    for rid, loss, stopped in sequence:
        actions = s.on_validation(rid, loss, 1)
        assert actions.stop == ([rid] if stopped else []), rid
        assert actions.create == []
    assert sorted(s.stop_reasons()) == ["r1", "r3", "r4", "r6"]
    assert s.stop_reasons()["r1"] == (
        "stopped at rung 1 of 3 (1 batches, bracket 1 of 1): loss 0.6 ranked 2 of 2; "
        "with fewer than 4 results only the best continues"
    )
    assert s.stop_reasons()["r6"] == (
        "stopped at rung 1 of 3 (1 batches, bracket 1 of 1): loss 0.42 ranked 3 of 7, "
        "not in the top 1/4 (the best 1 go on)"
    )
    assert [rid for rid, _ in s.rungs[0][0]] == ["r5", "r7", "r2", "r6", "r4", "r0", "r1", "r3"]


def test_stop_decisions_larger_is_better_mirror_smaller() -> None:
    s = asha(ONE_BRACKET + ", smaller_is_better: false, metric: accuracy")
    s.initial()
    decisions = [
        s.on_validation(f"r{i}", -loss, 1).stop != []
        for i, loss in enumerate([0.5, 0.6, 0.4, 0.7, 0.45, 0.1, 0.42, 0.3])
    ]
    assert decisions == [False, True, False, True, True, False, True, False]
    assert "accuracy -0.42 ranked 3 of 7" in s.stop_reasons()["r6"]
    assert [m for _, m in s.rungs[0][0]] == sorted((m for _, m in s.rungs[0][0]), reverse=True)


def test_early_trials_go_on_and_are_never_revisited() -> None:
    """The asynchronous rule: the first trial at a rung continues on what is known then, and a
    better trial arriving later does not stop it after the fact."""
    s = asha(ONE_BRACKET)
    s.initial()
    assert s.on_validation("r0", 0.9, 1).stop == []  # alone: the best so far
    assert s.on_validation("r1", 0.1, 1).stop == []
    assert s.on_validation("r2", 0.2, 1).stop == ["r2"]  # much better than r0, yet stopped
    assert s.on_validation("r3", 0.05, 1).stop == []
    assert "r0" not in s.stop_reasons()
    assert s.on_validation("r0", 0.8, 4).stop == []  # first at rung 2 as well
    assert s.on_validation("r1", 0.7, 4).stop == []  # better: goes on
    assert s.on_validation("r3", 0.9, 4).stop == ["r3"]  # worse than both


def test_a_metric_is_recorded_once_per_rung_at_the_first_validation_past_it() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.5, 0)  # before the first milestone
    assert s.rungs[0][0] == []
    s.on_validation("r0", 0.5, 2)  # past 1, short of 4
    s.on_validation("r0", 0.1, 3)
    assert s.rungs[0][0] == [["r0", 0.5]] and s.rungs[0][1] == []
    assert s.rung_of["r0"] == 1


def test_one_validation_can_pass_several_rungs() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.2, 1)
    assert s.on_validation("r1", 0.5, 16).stop == ["r1"]  # recorded at rung 1, stopped there
    assert s.rungs[0][1] == []
    assert s.on_validation("r2", 0.1, 16).stop == []  # best at rung 1 and 2, then the top
    assert [t for t in s.rungs[0]] == [[["r2", 0.1], ["r0", 0.2], ["r1", 0.5]], [["r2", 0.1]], [["r2", 0.1]]]


def test_the_top_rung_never_stops_a_trial() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    for i in range(4):
        s.on_validation(f"r{i}", 0.1 * (i + 1), 16)  # r0 reaches the top; the others stop lower
    assert s.on_validation("r0", 5.0, 16).stop == []
    assert s.rungs[0][2] == [["r0", 0.1]]


def test_stopped_and_closed_trials_are_ignored() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.1, 1)
    assert s.on_validation("r1", 0.5, 1).stop == ["r1"]
    assert s.on_validation("r1", 0.01, 4).stop == []  # still finishing its last step
    assert all(rid != "r1" for rid, _ in s.rungs[0][1])
    s.on_trial_closed("r2")
    s.on_validation("r2", 0.0, 16)
    assert all(rid != "r2" for table in s.rungs[0] for rid, _ in table)
    assert s.on_validation("nope", 0.0, 16).stop == []


def test_ties_favour_the_newcomer_as_determined_does() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.5, 1)
    assert s.on_validation("r1", 0.5, 1).stop == []
    assert [rid for rid, _ in s.rungs[0][0]] == ["r1", "r0"]


def test_a_failed_trial_counts_as_worst_at_its_next_rung() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.9, 1)
    s.on_trial_exited_early("r0", "errored")  # it passed rung 1; it fails before rung 2
    assert s.rungs[0][1] == [["r0", None]]
    s.on_trial_exited_early("r1", "errored")
    assert s.rungs[0][0] == [["r0", 0.9], ["r1", None]]
    assert "r0" in s.closed and "r1" in s.closed
    # a failure counts in n, so a third result at rung 1 keeps max(1, 3 // 4) = 1 and the best goes on
    assert s.on_validation("r2", 1.5, 1).stop == ["r2"]
    assert s.on_validation("r3", 0.1, 1).stop == []
    json.dumps(s.state(), allow_nan=False)


def test_non_finite_metrics_rank_worst_and_stay_json() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.5, 1)
    assert s.on_validation("r1", float("nan"), 1).stop == ["r1"]
    assert s.rungs[0][0] == [["r0", 0.5], ["r1", None]]
    json.dumps(s.state(), allow_nan=False)


# -- creating and ending -----------------------------------------------------------------------------


def drive(
    s: AdaptiveASHASearcher,
    seed: int,
    events: int | None = None,
    live: list[str] | None = None,
    steps: dict[str, int] | None = None,
) -> tuple[list, list[str], dict]:
    """A small deterministic workload: pick a live trial, advance it one rung-ish step, report a
    loss that depends on its hparams; close it when stopped or at max_length. Returns the log of
    (event, actions) and the trials still live."""
    rng = random.Random(seed)
    hp: dict[str, dict] = {}
    if live is None:
        first = s.initial()
        live = ids(first)
        hp.update({r.request_id: r.hparams for r in first.create})
    steps = {} if steps is None else steps
    top = s.brackets[0].rung_lengths[-1]
    log: list = []
    n = 0
    while live and (events is None or n < events):
        n += 1
        rid = live[rng.randrange(len(live))]
        steps[rid] = min(top, max(1, steps.get(rid, 0) * 2 or 1))
        loss = round(rng.random() + 0.01 * int(rid[1:]) % 7, 6)
        a = s.on_validation(rid, loss, steps[rid])
        log.append(("validation", rid, loss, steps[rid], a.stop, ids(a)))
        if a.stop or steps[rid] >= top:
            live.remove(rid)
            c = s.on_trial_closed(rid)
            live += ids(c)
            log.append(("closed", rid, ids(c), c.shutdown))
        assert len(s.live) == len(live)
    return log, live, steps


@pytest.mark.parametrize("mode", ["aggressive", "standard", "conservative"])
def test_creates_max_trials_then_shuts_down(mode: str) -> None:
    s = asha(f"max_trials: 40, max_length: 64, mode: {mode}")
    log, live, _ = drive(s, seed=1)
    assert live == [] and s.created == 40 and len(s.closed) == 40
    assert log[-1][0] == "closed" and log[-1][3] is True  # shutdown with the last close only
    assert sum(1 for e in log if e[0] == "closed" and e[3]) == 1
    assert s.progress() == 1.0
    counts = [sum(1 for b in s.bracket_of.values() if b == i) for i in range(len(s.brackets))]
    assert counts == [b.max_trials for b in s.brackets]


def test_live_trials_never_exceed_each_bracket_cap() -> None:
    s = asha("max_trials: 300, max_length: 256, mode: standard, max_concurrent_trials: 7")
    assert [b.max_concurrent for b in s.brackets] == [3, 2, 2]
    assert len(s.initial().create) == 7
    rng = random.Random(5)
    while s.live:
        per_bracket = [sum(1 for r in s.live if s.bracket_of[r] == b) for b in range(3)]
        assert all(n <= b.max_concurrent for n, b in zip(per_bracket, s.brackets, strict=True))
        assert len(s.live) <= 7
        rid = s.live[rng.randrange(len(s.live))]
        created = s.on_trial_closed(rid).create
        # caps add up to the limit, so a closed trial's place goes to its own bracket or to none
        assert all(s.bracket_of[r.request_id] == s.bracket_of[rid] for r in created)
    assert s.created == 300


def test_a_small_max_concurrent_trials_is_a_hard_cap() -> None:
    s = asha("max_trials: 60, max_length: 256, mode: conservative, max_concurrent_trials: 2")
    assert len(s.brackets) == 3 and [b.max_concurrent for b in s.brackets] == [1, 1, 1]
    assert ids(s.initial()) == ["r0", "r1"]
    assert [s.bracket_of[r] for r in s.live] == [0, 1]
    while s.live:
        s.on_trial_closed(s.live[0])
        assert len(s.live) <= 2
    assert s.created == 60


def test_trials_are_reproducible_by_seed_and_index() -> None:
    a, b, c = (asha("max_trials: 8, max_length: 16", seed=seed).initial() for seed in (3, 3, 4))
    assert [(r.request_id, r.hparams, r.seed) for r in a.create] == [
        (r.request_id, r.hparams, r.seed) for r in b.create
    ]
    assert [r.hparams for r in a.create] != [r.hparams for r in c.create]
    for r in a.create:
        assert 1e-4 <= r.hparams["lr"] <= 1e-1 and 1 <= r.hparams["layers"] <= 8


def test_shutdown_waits_for_every_trial() -> None:
    s = asha("max_trials: 3, max_length: 16")
    assert ids(s.initial()) == ["r0", "r1", "r2"]
    assert s.exhausted
    assert not s.on_trial_closed("r1").shutdown
    assert not s.on_trial_exited_early("r0", "killed").shutdown
    assert s.on_trial_closed("r2").shutdown


# -- state ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("events_before_save", [0, 7, 40, 90])
def test_state_round_trip_mid_search_decides_identically(events_before_save: int) -> None:
    spec = "max_trials: 30, max_length: 64, mode: conservative, max_concurrent_trials: 6"
    original = asha(spec, seed=9)
    _, live, steps = drive(original, seed=2, events=events_before_save)
    saved = json.loads(json.dumps(original.state(), allow_nan=False))  # the experiment row holds JSON
    restored = asha(spec, seed=9, state=saved)
    assert restored.state() == original.state()
    assert restored.stop_reasons() == original.stop_reasons()
    assert restored.progress() == original.progress()
    assert restored.initial().create == []  # nothing created twice
    log_a, _, _ = drive(original, seed=3, live=list(live), steps=dict(steps))
    log_b, _, _ = drive(restored, seed=3, live=list(live), steps=dict(steps))
    assert log_a == log_b
    assert original.state() == restored.state()
    assert original.created == 30


def test_state_is_a_snapshot() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.5, 1)
    saved = s.state()
    frozen = json.loads(json.dumps(saved))
    s.on_validation("r1", 0.9, 1)
    s.on_validation("r0", 0.4, 4)
    assert saved == frozen


def test_progress_counts_closed_trials_against_max_trials() -> None:
    s = asha("max_trials: 4, max_length: 16")
    s.initial()
    assert s.progress() == 0.0
    s.on_trial_closed("r0")
    s.on_trial_exited_early("r1", "x")
    assert s.progress() == pytest.approx(0.5)


def test_progress_budget_shrinks_by_what_a_stop_saves() -> None:
    s = asha(ONE_BRACKET)  # 16 trials of 16 batches, rungs at 1, 4, 16
    s.initial()
    assert s.total_length({}) == 16
    done = {"r0": 1 / 16, "r1": 1 / 16}
    before = s.progress(done)
    assert before == pytest.approx(2 / 16 / 16)
    s.on_validation("r0", 0.5, 1)
    assert s.on_validation("r1", 0.6, 1).stop == ["r1"]  # it will train 1 batch of its 16
    assert s.total_length(done) == pytest.approx(15 + 1 / 16)
    assert s.progress(done) == pytest.approx((2 / 16) / (15 + 1 / 16)) and s.progress(done) > before
    s.on_trial_exited_early("r2", "boom")  # a failure saves nothing: its length stays in the budget
    assert s.total_length(done) == pytest.approx(15 + 1 / 16)
    finished = {f"r{i}": 1.0 for i in range(16)} | {"r1": 1 / 16}
    assert s.progress(finished) == 1.0


# -- config ------------------------------------------------------------------------------------------


def problems(searcher: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(f"entrypoint: x\nsearcher: {searcher}\n")
    return {p["field"]: p["message"] for p in info.value.fields}


def test_config_defaults() -> None:
    sc = parse_experiment_config(
        "entrypoint: x\nsearcher: {name: adaptive_asha, metric: loss, max_trials: 10, max_length: {epochs: 2}}\n"
    ).searcher
    assert (sc.divisor, sc.max_rungs, sc.mode, sc.max_concurrent_trials) == (4, 5, "standard", 0)
    assert sc.max_length is not None and (sc.max_length.unit, sc.max_length.units) == ("epochs", 2)


def test_config_round_trips_through_its_json_dump() -> None:
    c = parse_experiment_config(
        "entrypoint: x\nsearcher: {name: adaptive_asha, metric: loss, max_trials: 10, "
        "max_length: 64, divisor: 3, max_rungs: 4, mode: conservative}\n"
    )
    assert ExperimentConfig.model_validate(c.model_dump(mode="json")) == c


@pytest.mark.parametrize(
    ("searcher", "missing"),
    [
        ("{name: adaptive_asha, metric: loss, max_length: 10}", ["searcher.max_trials"]),
        ("{name: adaptive_asha, metric: loss, max_trials: 10}", ["searcher.max_length"]),
        ("{name: adaptive_asha, metric: loss}", ["searcher.max_trials", "searcher.max_length"]),
    ],
)
def test_adaptive_asha_requires_max_trials_and_max_length(searcher: str, missing: list[str]) -> None:
    found = problems(searcher)
    for field in missing:
        assert (
            found[field] == "required for the adaptive_asha searcher"
            if field == "searcher.max_trials"
            else "needs time_metric and max_time (or the deprecated max_length)" in found[field]
        )


@pytest.mark.parametrize(
    ("searcher", "field"),
    [
        ("{name: adaptive_asha, metric: l, max_trials: 4, max_length: 8, divisor: 1}", "searcher.divisor"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, max_length: 8, max_rungs: 0}", "searcher.max_rungs"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, max_length: 8, mode: wild}", "searcher.mode"),
        ("{name: random, metric: l, max_trials: 4, divisor: 3}", "searcher.divisor"),
        ("{name: single, metric: l, mode: aggressive}", "searcher.mode"),
    ],
)
def test_bad_asha_fields_are_named(searcher: str, field: str) -> None:
    assert field in problems(searcher)


# -- the master's room -------------------------------------------------------------


def test_room_changes_no_bracket_and_only_delays_creation() -> None:
    cfg = parse_experiment_config(
        "entrypoint: x\nsearcher: {name: adaptive_asha, metric: loss, max_trials: 16, max_length: 256}\n"
        "hyperparameters:\n  lr: {type: double, minval: 0, maxval: 1}\n"
    )
    free = make_searcher(cfg, seed=1)
    capped = make_searcher(cfg, seed=1, room=2)
    assert isinstance(free, AdaptiveASHASearcher) and isinstance(capped, AdaptiveASHASearcher)
    assert capped.brackets == free.brackets  # sizes and per-bracket concurrency as without a room
    assert [b.max_concurrent for b in capped.brackets] == [4, 4] and capped.max_concurrent == 0
    assert ids(free.initial()) == [f"r{i}" for i in range(8)]
    first = capped.initial()
    assert ids(first) == ["r0", "r1"]
    assert [r.hparams for r in first.create] == [r.hparams for r in make_searcher(cfg, seed=1).initial().create[:2]]
    assert "room" not in capped.state()
    # with room again (the pool grew) it fills exactly as the uncapped searcher did
    grown = make_searcher(cfg, seed=1, state=capped.state(), room=None)
    assert ids(grown.top_up()) == [f"r{i}" for i in range(2, 8)]
    assert grown.state()["bracket_of"] == free.state()["bracket_of"]
    assert capped.total_trials() == 16 and capped.progress() == 0

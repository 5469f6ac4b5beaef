"""Searchers as pure state machines: how many trials, which hyperparameters, concurrency limits,
reproducibility and state round trips."""

from __future__ import annotations

import json
import math
import textwrap

import pytest

from pedl.config.experiment_config import parse_experiment_config
from pedl.scheduling.searcher import Searcher, SearcherActions, make_searcher
from pedl.scheduling.searcher import hparams as hp_mod
from pedl.scheduling.searcher.simple import GridSearcher, RandomSearcher, SingleSearcher


def config(searcher: str, hyperparameters: str = "") -> object:
    text = f"entrypoint: x\nsearcher: {searcher}\n"
    if hyperparameters:
        text += "hyperparameters:\n" + textwrap.indent(textwrap.dedent(hyperparameters).strip(), "  ") + "\n"
    return parse_experiment_config(text)


def searcher_for(searcher: str, hyperparameters: str = "", seed: int = 0, state: dict | None = None) -> Searcher:
    return make_searcher(config(searcher, hyperparameters), seed=seed, state=state)  # type: ignore[arg-type]


def ids(actions: SearcherActions) -> list[str]:
    return [r.request_id for r in actions.create]


def run_to_end(s: Searcher) -> list[dict]:
    """Close trials as they are created until the searcher shuts down; return every hparams."""
    seen = []
    pending = list(s.initial().create)
    shutdown = False
    while pending:
        r = pending.pop(0)
        seen.append(r.hparams)
        actions = s.on_trial_closed(r.request_id)
        pending += actions.create
        shutdown = actions.shutdown
    assert shutdown
    return seen


# -- factory ---------------------------------------------------------------------------------------


def test_factory_builds_the_named_searcher() -> None:
    assert isinstance(searcher_for("{name: single, metric: l}"), SingleSearcher)
    assert isinstance(searcher_for("{name: grid, metric: l}"), GridSearcher)
    assert isinstance(searcher_for("{name: random, metric: l, max_trials: 2}"), RandomSearcher)


# -- single ----------------------------------------------------------------------------------------


def test_single_creates_one_trial_with_first_values() -> None:
    s = searcher_for(
        "{name: single, metric: l}",
        """
        i: {type: int, minval: 3, maxval: 9}
        d: {type: double, minval: 0.5, maxval: 1.5}
        l: {type: log, minval: -3, maxval: -1}
        c: {type: categorical, vals: [adam, sgd]}
        k: {type: const, val: 7}
        raw: hello
        nested: {a: {type: int, minval: 1, maxval: 2}, b: [1, 2]}
    """,
    )
    actions = s.initial()
    assert ids(actions) == ["r0"]
    assert not actions.shutdown
    hp = actions.create[0].hparams
    assert hp == {
        "i": 3,
        "d": 0.5,
        "l": pytest.approx(0.001),
        "c": "adam",
        "k": 7,
        "raw": "hello",
        "nested": {"a": 1, "b": [1, 2]},
    }
    assert s.total_trials() == 1
    done = s.on_trial_closed("r0")
    assert done.create == [] and done.shutdown
    assert s.progress() == 1.0


def test_single_with_no_hyperparameters() -> None:
    s = searcher_for("{name: single, metric: l}")
    actions = s.initial()
    assert [r.hparams for r in actions.create] == [{}]


# -- grid ----------------------------------------------------------------------------------------


def test_grid_points_for_each_type() -> None:
    s = searcher_for(
        "{name: grid, metric: l}",
        """
        i: {type: int, minval: 0, maxval: 10, count: 3}
        d: {type: double, minval: 0, maxval: 1, count: 5}
        l: {type: log, minval: -4, maxval: -2, count: 3, base: 10}
        c: {type: categorical, vals: [a, b]}
        k: {type: const, val: 1}
    """,
    )
    assert isinstance(s, GridSearcher)
    assert s.total_trials() == 3 * 5 * 3 * 2
    assert sorted({p["i"] for p in s.points}) == [0, 5, 10]
    assert sorted({p["d"] for p in s.points}) == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    assert sorted({p["l"] for p in s.points}) == pytest.approx([1e-4, 1e-3, 1e-2])
    assert {p["c"] for p in s.points} == {"a", "b"}
    assert {p["k"] for p in s.points} == {1}
    # every combination exactly once
    assert len({json.dumps(p, sort_keys=True) for p in s.points}) == len(s.points)


def test_grid_log_base_two() -> None:
    s = searcher_for("{name: grid, metric: l}", "l: {type: log, minval: 1, maxval: 3, count: 3, base: 2}")
    assert [p["l"] for p in s.points] == pytest.approx([2, 4, 8])


def test_grid_int_count_larger_than_range_gives_each_integer_once() -> None:
    s = searcher_for("{name: grid, metric: l}", "i: {type: int, minval: 1, maxval: 3, count: 10}")
    assert sorted(p["i"] for p in s.points) == [1, 2, 3]


def test_grid_count_one_is_minval() -> None:
    s = searcher_for(
        "{name: grid, metric: l}",
        """
        i: {type: int, minval: 4, maxval: 9, count: 1}
        d: {type: double, minval: 0.2, maxval: 0.9, count: 1}
    """,
    )
    assert list(s.points) == [{"i": 4, "d": 0.2}]


def test_grid_nested_hyperparameters_keep_their_shape() -> None:
    s = searcher_for(
        "{name: grid, metric: l}",
        """
        opt:
          name: {type: categorical, vals: [adam, sgd]}
          lr: {type: double, minval: 0.1, maxval: 0.2, count: 2}
          fixed: 3
        layers: {type: int, minval: 1, maxval: 2, count: 2}
    """,
    )
    assert len(s.points) == 8
    for p in s.points:
        assert set(p) == {"opt", "layers"}
        assert set(p["opt"]) == {"name", "lr", "fixed"}
        assert p["opt"]["fixed"] == 3
    assert {(p["opt"]["name"], p["opt"]["lr"], p["layers"]) for p in s.points} == {
        (n, lr, layers) for n in ("adam", "sgd") for lr in (0.1, 0.2) for layers in (1, 2)
    }


@pytest.mark.parametrize(
    "searcher",
    [
        "{name: single, metric: l, max_length: 1}",
        "{name: grid, metric: l}",
        "{name: random, metric: l, max_trials: 2, max_length: 1}",
        "{name: adaptive_asha, metric: l, max_trials: 2, max_length: 4}",
    ],
)
def test_an_empty_hyperparameter_group_is_kept_in_every_trials_hparams(searcher: str) -> None:
    # Determined keeps it: the noop model reads hparams["actions"] with no actions configured
    s = searcher_for(
        searcher,
        """
        actions: {}
        opt:
          inner: {}
          lr: 0.1
    """,
    )
    for request in s.initial().create:
        assert request.hparams == {"actions": {}, "opt": {"inner": {}, "lr": 0.1}}


def test_grid_creates_every_point_then_shuts_down() -> None:
    s = searcher_for("{name: grid, metric: l}", "c: {type: categorical, vals: [1, 2, 3, 4]}")
    actions = s.initial()
    assert ids(actions) == ["r0", "r1", "r2", "r3"]
    assert [r.hparams["c"] for r in actions.create] == [1, 2, 3, 4]
    for rid in ["r0", "r1", "r2"]:
        assert not s.on_trial_closed(rid).shutdown
    assert s.on_trial_closed("r3").shutdown


def test_grid_of_empty_space_is_one_trial() -> None:
    assert len(run_to_end(searcher_for("{name: grid, metric: l}"))) == 1


def test_progress_is_the_length_done_against_one_length_per_trial() -> None:
    s = searcher_for("{name: random, metric: l, max_trials: 4}", "lr: {type: double, minval: 0, maxval: 1}")
    s.initial()
    assert s.total_length({}) == 4
    assert s.progress({"r0": 0.5}) == pytest.approx(0.125)
    assert s.progress({"r0": 1.0, "r1": 0.6, "r2": 3.0, "r3": -1.0}) == pytest.approx(0.65)  # each within 0..1
    single = searcher_for("{name: single, metric: l}")
    single.initial()
    assert single.progress({"r0": 0.6}) == pytest.approx(0.6)


# -- random --------------------------------------------------------------------------------------

RANDOM_SPACE = """
    i: {type: int, minval: 1, maxval: 5}
    d: {type: double, minval: -1, maxval: 1}
    l: {type: log, minval: -5, maxval: -1}
    c: {type: categorical, vals: [a, b, c]}
    k: 9
    g: {x: {type: int, minval: 10, maxval: 20}}
"""


def test_random_creates_max_trials_within_bounds() -> None:
    s = searcher_for("{name: random, metric: l, max_trials: 25}", RANDOM_SPACE, seed=3)
    points = run_to_end(s)
    assert len(points) == 25
    for p in points:
        assert 1 <= p["i"] <= 5 and isinstance(p["i"], int)
        assert -1 <= p["d"] <= 1
        assert 1e-5 <= p["l"] <= 1e-1
        assert p["c"] in ("a", "b", "c")
        assert p["k"] == 9
        assert 10 <= p["g"]["x"] <= 20
    assert len({json.dumps(p, sort_keys=True) for p in points}) > 20  # actually random


def test_random_is_reproducible_for_the_same_seed() -> None:
    a = run_to_end(searcher_for("{name: random, metric: l, max_trials: 10}", RANDOM_SPACE, seed=42))
    b = run_to_end(searcher_for("{name: random, metric: l, max_trials: 10}", RANDOM_SPACE, seed=42))
    c = run_to_end(searcher_for("{name: random, metric: l, max_trials: 10}", RANDOM_SPACE, seed=43))
    assert a == b
    assert a != c


def test_trial_seeds_are_reproducible_and_distinct() -> None:
    a = searcher_for("{name: random, metric: l, max_trials: 5}", RANDOM_SPACE, seed=7).initial()
    b = searcher_for("{name: random, metric: l, max_trials: 5}", RANDOM_SPACE, seed=7).initial()
    assert [r.seed for r in a.create] == [r.seed for r in b.create]
    assert len({r.seed for r in a.create}) == 5
    assert all(0 <= r.seed < 2**31 for r in a.create)


@pytest.mark.parametrize("closed_before_save", [0, 1, 3])
def test_state_round_trip_continues_identically(closed_before_save: int) -> None:
    spec = "{name: random, metric: l, max_trials: 8, max_concurrent_trials: 2}"
    original = searcher_for(spec, RANDOM_SPACE, seed=11)
    live = ids(original.initial())
    for _ in range(closed_before_save):
        live = live[1:] + ids(original.on_trial_closed(live[0]))
    # what the master stores on the experiment row is JSON
    saved = json.loads(json.dumps(original.state()))
    restored = searcher_for(spec, RANDOM_SPACE, seed=11, state=saved)
    assert restored.state() == original.state()
    assert restored.progress() == original.progress()
    while live:
        a = original.on_trial_closed(live[0])
        b = restored.on_trial_closed(live[0])
        assert [(r.request_id, r.hparams, r.seed) for r in a.create] == [
            (r.request_id, r.hparams, r.seed) for r in b.create
        ]
        assert a.shutdown == b.shutdown
        live = live[1:] + ids(a)
    assert original.state() == restored.state()


def test_state_is_a_snapshot() -> None:
    s = searcher_for("{name: grid, metric: l}", "c: {type: categorical, vals: [1, 2, 3]}")
    s.initial()
    saved = s.state()
    frozen = json.loads(json.dumps(saved))
    s.on_trial_closed("r0")
    s.on_validation("r1", 0.5, 10)
    assert saved == frozen


def test_restored_grid_does_not_recreate_trials() -> None:
    spec = "{name: grid, metric: l}"
    space = "c: {type: categorical, vals: [1, 2]}"
    s = searcher_for(spec, space)
    s.initial()
    restored = searcher_for(spec, space, state=s.state())
    assert restored.initial().create == []  # nothing new: both already exist
    restored.on_trial_closed("r0")
    assert restored.on_trial_closed("r1").shutdown


# -- concurrency ---------------------------------------------------------------------------------


def test_max_concurrent_trials_limits_live_trials_and_refills_on_close() -> None:
    s = searcher_for(
        "{name: grid, metric: l, max_concurrent_trials: 2}", "c: {type: categorical, vals: [1, 2, 3, 4, 5]}"
    )
    assert ids(s.initial()) == ["r0", "r1"]
    assert len(s.live) == 2
    assert ids(s.on_trial_closed("r1")) == ["r2"]
    assert sorted(s.live) == ["r0", "r2"]
    assert ids(s.on_trial_closed("r0")) == ["r3"]
    assert ids(s.on_trial_closed("r2")) == ["r4"]
    last = s.on_trial_closed("r3")
    assert last.create == [] and not last.shutdown  # r4 still live
    assert s.on_trial_closed("r4").shutdown


def test_never_more_live_than_the_limit() -> None:
    s = searcher_for("{name: random, metric: l, max_trials: 30, max_concurrent_trials: 3}", RANDOM_SPACE)
    live = ids(s.initial())
    while live:
        assert len(live) <= 3
        live = live[1:] + ids(s.on_trial_closed(live[0]))
    assert s.created == 30


def test_zero_means_no_limit() -> None:
    s = searcher_for("{name: random, metric: l, max_trials: 12}", RANDOM_SPACE)
    assert len(s.initial().create) == 12


def test_closing_an_unknown_or_already_closed_trial_changes_nothing() -> None:
    s = searcher_for("{name: grid, metric: l, max_concurrent_trials: 1}", "c: {type: categorical, vals: [1, 2]}")
    s.initial()
    assert ids(s.on_trial_closed("r0")) == ["r1"]
    again = s.on_trial_closed("r0")
    assert again.create == [] and not again.shutdown
    assert s.closed == ["r0"]
    assert s.on_trial_closed("nope").create == []


# -- ending ----------------------------------------------------------------------------------------


def test_shutdown_only_when_all_closed() -> None:
    s = searcher_for("{name: random, metric: l, max_trials: 3}", RANDOM_SPACE)
    s.initial()
    assert not s.on_trial_closed("r0").shutdown
    assert not s.on_trial_closed("r2").shutdown
    assert s.on_trial_closed("r1").shutdown


def test_on_trial_exited_early_closes_the_trial_and_refills() -> None:
    s = searcher_for("{name: grid, metric: l, max_concurrent_trials: 1}", "c: {type: categorical, vals: [1, 2]}")
    s.initial()
    actions = s.on_trial_exited_early("r0", "errored")
    assert ids(actions) == ["r1"]
    assert "r0" in s.closed and "r0" not in s.live
    assert s.on_trial_exited_early("r1", "killed").shutdown


def test_single_exited_early_shuts_down() -> None:
    s = searcher_for("{name: single, metric: l}")
    s.initial()
    assert s.on_trial_exited_early("r0", "invalid hp").shutdown


def test_progress_counts_closed_trials() -> None:
    s = searcher_for("{name: grid, metric: l}", "c: {type: categorical, vals: [1, 2, 3, 4]}")
    assert s.progress() == 0.0
    s.initial()
    assert s.progress() == 0.0
    s.on_trial_closed("r0")
    assert s.progress() == pytest.approx(0.25)
    s.on_trial_exited_early("r1", "x")
    assert s.progress() == pytest.approx(0.5)
    s.on_trial_closed("r2")
    s.on_trial_closed("r3")
    assert s.progress() == 1.0


def test_validation_tracks_the_best_metric_per_trial() -> None:
    s = searcher_for("{name: grid, metric: l}", "c: {type: categorical, vals: [1, 2]}")
    s.initial()
    assert s.on_validation("r0", 0.5, 10).create == []
    s.on_validation("r0", 0.7, 20)
    s.on_validation("r0", 0.3, 30)
    assert s.best["r0"] == 0.3
    bigger = searcher_for("{name: grid, metric: acc, smaller_is_better: false}", "c: {type: categorical, vals: [1]}")
    bigger.initial()
    bigger.on_validation("r0", 0.5, 1)
    bigger.on_validation("r0", 0.4, 2)
    assert bigger.best["r0"] == 0.5


# -- hparams helpers -----------------------------------------------------------------------------


def test_sample_log_is_uniform_in_the_exponent() -> None:
    import random as _random

    space = config("{name: random, metric: l, max_trials: 1}", "l: {type: log, minval: -6, maxval: 0}")
    rng = _random.Random(0)
    exps = [
        math.log10(hp_mod.sample(space.hyperparameters, rng)["l"])  # type: ignore[attr-defined]
        for _ in range(2000)
    ]
    below = sum(1 for e in exps if e < -3)
    assert 800 < below < 1200  # about half the samples below 10**-3


# -- bounded creation: lazy grids, room, the trial limit -------------------------


def test_grid_order_is_itertools_product_order() -> None:
    import itertools

    s = searcher_for(
        "{name: grid, metric: l}",
        """
        a: {type: categorical, vals: [x, y, z]}
        g: {b: {type: int, minval: 0, maxval: 6, count: 4}, k: 5}
        d: {type: double, minval: 0, maxval: 1, count: 2}
    """,
    )
    expected = [
        {"a": a, "g": {"b": b, "k": 5}, "d": d}
        for a, b, d in itertools.product(["x", "y", "z"], [0, 2, 4, 6], [0.0, 1.0])
    ]
    assert list(s.points) == expected
    assert [s.points[i] for i in range(len(expected))] == expected
    assert s.points[-1] == expected[-1] and s.points[2:4] == expected[2:4]
    with pytest.raises(IndexError):
        s.points[len(expected)]


def test_grid_point_i_is_decoded_without_building_the_grid() -> None:
    # 10**36 points: building any of it would never finish; each point is computed from its index
    space = "\n".join(f"h{i}: {{type: int, minval: 0, maxval: 999999, count: 1000000}}" for i in range(6))
    hyperparameters = config("{name: grid, metric: l}", space).hyperparameters  # type: ignore[attr-defined]
    assert hp_mod.grid_size(hyperparameters) == 10**36
    s = searcher_for("{name: grid, metric: l}", space)
    assert s.total_trials() == 10**36
    assert s.points[0] == {f"h{i}": 0 for i in range(6)}
    assert s.points[10**36 - 1] == {f"h{i}": 999999 for i in range(6)}
    assert s.points[123] == {**{f"h{i}": 0 for i in range(5)}, "h5": 123}
    # a restored searcher creates point `created` directly
    restored = searcher_for(
        "{name: grid, metric: l, max_concurrent_trials: 1}",
        space,
        state={"created": 10**6 + 7, "closed": [], "live": [], "exhausted": False, "best": {}},
    )
    [req] = restored.initial().create
    assert req.request_id == f"r{10**6 + 7}"
    assert req.hparams == {**{f"h{i}": 0 for i in range(4)}, "h4": 1, "h5": 7}


def test_grid_size_counts_nested_groups_and_distinct_integers() -> None:
    cfg = config(
        "{name: grid, metric: l}",
        """
        outer:
          inner: {a: {type: categorical, vals: [1, 2, 3]}, b: {type: log, minval: 0, maxval: 1, count: 5}}
        i: {type: int, minval: 1, maxval: 3, count: 100}
        k: 1
    """,
    )
    assert hp_mod.grid_size(cfg.hyperparameters) == 3 * 5 * 3  # type: ignore[attr-defined]
    assert len(make_searcher(cfg, seed=0).points) == 45  # type: ignore[arg-type,attr-defined]


def test_room_caps_live_trials_without_entering_the_state() -> None:
    cfg = config("{name: random, metric: l, max_trials: 100000000}", "x: {type: int, minval: 0, maxval: 9}")
    s = make_searcher(cfg, seed=3, room=3)  # type: ignore[arg-type]
    assert ids(s.initial()) == ["r0", "r1", "r2"]
    assert "room" not in s.state() and s.total_trials() == 100_000_000
    assert ids(s.on_trial_closed("r0")) == ["r3"]  # a close makes room for one
    assert s.progress() == pytest.approx(1 / 100_000_000)
    # more room later (a pool grew): the same trials the uncapped searcher would have created
    grown = make_searcher(cfg, seed=3, state=s.state(), room=6)  # type: ignore[arg-type]
    more = grown.top_up().create
    assert [r.request_id for r in more] == ["r4", "r5", "r6"]
    reference = make_searcher(
        config(
            "{name: random, metric: l, max_trials: 7}",  # type: ignore[arg-type]
            "x: {type: int, minval: 0, maxval: 9}",
        ),
        seed=3,
    )
    assert [r.hparams for r in more] == [r.hparams for r in reference.initial().create][4:]
    assert make_searcher(cfg, seed=3, state=grown.state(), room=0).top_up().create == []  # type: ignore[arg-type]


def test_room_never_ends_a_searcher() -> None:
    s = searcher_for("{name: grid, metric: l}", "c: {type: categorical, vals: [1, 2, 3]}")
    s.room = 1
    assert ids(s.initial()) == ["r0"]
    assert ids(s.on_trial_closed("r0")) == ["r1"]
    assert ids(s.on_trial_closed("r1")) == ["r2"]
    assert s.exhausted  # known as soon as the last point is created
    assert s.on_trial_closed("r2").shutdown


def test_trial_limit_check() -> None:
    from pedl.errors import InvalidArgument
    from pedl.scheduling.searcher.limits import check_trial_count

    check_trial_count(config("{name: random, metric: l, max_trials: 10}"), 10)  # type: ignore[arg-type]
    check_trial_count(config("{name: single, metric: l}"), 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument) as e:
        check_trial_count(config("{name: random, metric: l, max_trials: 11}"), 10)  # type: ignore[arg-type]
    assert e.value.fields[0]["field"] == "searcher.max_trials"
    huge = "\n".join(f"h{i}: {{type: double, minval: 0, maxval: 1, count: {10**18}}}" for i in range(200))
    with pytest.raises(InvalidArgument) as e:
        check_trial_count(config("{name: grid, metric: l}", huge), 10)  # type: ignore[arg-type]
    assert e.value.fields[0]["field"] == "hyperparameters"
    two_points = config("{name: grid, metric: l}", "c: {type: categorical, vals: [1, 2]}")
    check_trial_count(two_points, 2)  # type: ignore[arg-type]

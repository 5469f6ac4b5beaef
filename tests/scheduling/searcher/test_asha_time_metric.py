"""adaptive_asha with Determined 0.38's searcher.time_metric / max_time: rungs laid out over max_time
and reached by the time metric's value in the validation reports, not by their steps; the config's
checks name the field (through the master, a report's metric decides as its steps did:
tests/master/lifecycle/test_progression_asha.py)."""

from __future__ import annotations

import pytest

from pedl.config.experiment_config import parse_experiment_config
from tests.scheduling.searcher.test_asha import asha, problems

ONE_BRACKET = (
    "max_trials: 16, time_metric: batches, max_time: 16, mode: aggressive, max_rungs: 3, max_concurrent_trials: 16"
)


def test_rungs_are_laid_out_over_max_time() -> None:
    s = asha(ONE_BRACKET)
    assert len(s.initial().create) == 16
    assert s.brackets[0].rung_lengths == (1, 4, 16)


def test_a_rung_is_reached_by_the_time_metric_not_by_the_steps() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    # many steps, but the time metric says it has not trained a unit yet: no rung
    assert s.on_validation("r0", 0.5, 100, {"loss": 0.5, "batches": 0}).stop == []
    assert s.rungs[0][0] == []
    assert s.on_validation("r0", 0.5, 0, {"loss": 0.5, "batches": 1}).stop == []
    assert s.rungs[0][0] == [["r0", 0.5]]
    stopped = s.on_validation("r1", 0.6, 0, {"loss": 0.6, "batches": 1.5})  # second of two at rung 1
    assert stopped.stop == ["r1"]
    assert s.stop_reasons()["r1"].startswith("stopped at rung 1 of 3 (1 batches, bracket 1 of 1): loss 0.6")
    # one report past two rungs is recorded at each
    assert s.on_validation("r2", 0.1, 0, {"loss": 0.1, "batches": 4}).stop == []
    assert [rid for rid, _ in s.rungs[0][0]] == ["r2", "r0", "r1"] and s.rungs[0][1] == [["r2", 0.1]]


@pytest.mark.parametrize(
    "report",
    [
        None,
        {"loss": 0.9},
        {"loss": 0.9, "batches": "ten"},
        {"loss": 0.9, "batches": True},
        {"loss": 0.9, "batches": float("nan")},
    ],
)
def test_a_report_without_a_number_for_the_time_metric_moves_no_rung(report: dict | None) -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.5, 0, {"loss": 0.5, "batches": 1})
    assert s.on_validation("r1", 0.9, 50, report).stop == []  # it would be stopped at rung 1
    assert s.best["r1"] == 0.9 and [rid for rid, _ in s.rungs[0][0]] == ["r0"]


def test_any_metric_can_measure_time_and_the_state_round_trips() -> None:
    s = asha(
        "max_trials: 4, time_metric: epochs_done, max_time: 8, mode: aggressive, max_rungs: 2, divisor: 2, "
        "max_concurrent_trials: 4"
    )
    s.initial()
    assert s.brackets[0].rung_lengths == (4, 8)
    s.on_validation("r0", 0.2, 1, {"epochs_done": 4.0})
    restored = asha(
        "max_trials: 4, time_metric: epochs_done, max_time: 8, mode: aggressive, max_rungs: 2, "
        "divisor: 2, max_concurrent_trials: 4",
        state=s.state(),
    )
    assert restored.on_validation("r1", 0.3, 1, {"epochs_done": 4}).stop == ["r1"]
    assert "(4 epochs_done," in restored.stop_reasons()["r1"]


def test_time_metric_and_max_time_are_kept_in_the_config() -> None:
    sc = parse_experiment_config(
        "entrypoint: x\nsearcher: {name: adaptive_asha, metric: x, max_trials: 10, "
        "time_metric: batches, max_time: 100}\n"
    ).searcher
    assert (sc.time_metric, sc.max_time, sc.max_length, sc.trial_length) == ("batches", 100, None, 100)
    other = parse_experiment_config(
        "entrypoint: x\nsearcher: {name: adaptive_asha, metric: x, max_trials: 10, "
        "time_metric: epochs_done, max_time: 3}\n"
    ).searcher
    assert other.trial_length == 0  # not in batches: the trial decides how long it trains


@pytest.mark.parametrize(
    ("searcher", "field"),
    [
        ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches}", "searcher.max_time"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, max_time: 10}", "searcher.time_metric"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches, max_time: 0}", "searcher.max_time"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches, max_time: -5}", "searcher.max_time"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches, max_time: 1.5}", "searcher.max_time"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches, max_time: ten}", "searcher.max_time"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: '', max_time: 10}", "searcher.time_metric"),
        ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: [a], max_time: 10}", "searcher.time_metric"),
        ("{name: adaptive_asha, metric: l, max_trials: 4}", "searcher.max_length"),
        ("{name: random, metric: l, max_trials: 4, time_metric: batches, max_time: 10}", "searcher.time_metric"),
        ("{name: single, metric: l, max_length: 4, time_metric: batches, max_time: 10}", "searcher.max_time"),
    ],
)
def test_bad_time_metric_or_max_time_is_named(searcher: str, field: str) -> None:
    assert field in problems(searcher)

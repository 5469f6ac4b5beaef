"""Build the searcher an experiment config names."""

from __future__ import annotations

from typing import Any

from pedl.config.experiment_config import ExperimentConfig
from pedl.scheduling.searcher.asha import AdaptiveASHASearcher
from pedl.scheduling.searcher.base import Searcher
from pedl.scheduling.searcher.simple import GridSearcher, RandomSearcher, SingleSearcher


def make_searcher(
    config: ExperimentConfig, seed: int, state: dict[str, Any] | None = None, *, room: int | None = None
) -> Searcher:
    """`room`: live trials the master has room for now (None: no cap); see Searcher."""
    sc = config.searcher
    common = {
        "seed": seed,
        "max_concurrent": sc.max_concurrent_trials,
        "state": state,
        "smaller_is_better": sc.smaller_is_better,
        "room": room,
    }
    if sc.name == "single":
        return SingleSearcher(config.hyperparameters, **common)
    if sc.name == "grid":
        return GridSearcher(config.hyperparameters, **common)
    if sc.name == "random":
        return RandomSearcher(config.hyperparameters, sc.max_trials or 1, **common)
    if sc.name == "adaptive_asha":
        if sc.max_trials is None or (sc.max_length is None and (sc.time_metric is None or sc.max_time is None)):
            raise ValueError("adaptive_asha needs searcher.max_trials and time_metric with max_time (or max_length)")
        if sc.time_metric is not None and sc.max_time is not None:  # Determined 0.38: rungs by a reported metric
            return AdaptiveASHASearcher(
                config.hyperparameters,
                max_trials=sc.max_trials,
                max_length=sc.max_time,
                divisor=sc.divisor,
                max_rungs=sc.max_rungs,
                mode=sc.mode,
                metric=sc.metric,
                unit=sc.time_metric,
                time_metric=sc.time_metric,
                **common,
            )
        assert sc.max_length is not None
        return AdaptiveASHASearcher(
            config.hyperparameters,
            max_trials=sc.max_trials,
            max_length=sc.max_length.units,
            divisor=sc.divisor,
            max_rungs=sc.max_rungs,
            mode=sc.mode,
            metric=sc.metric,
            unit=sc.max_length.unit,
            **common,
        )
    raise ValueError(f"unknown searcher {sc.name!r}")

"""How many trials an experiment config asks for, and the master's bound on it. Computed from the
config alone (a grid's size is a product of per-hyperparameter counts), never by creating trials."""

from __future__ import annotations

from pedl.config.experiment_config import ExperimentConfig
from pedl.errors import InvalidArgument
from pedl.scheduling.searcher.hparams import grid_size


def check_trial_count(cfg: ExperimentConfig, limit: int) -> None:
    """Refuse a searcher that would create more than `limit` trials (limits.max_trials_per_experiment)."""
    sc = cfg.searcher
    allowed = f"this master allows at most {limit:,} trials per experiment (limits.max_trials_per_experiment)"
    if sc.name in ("random", "adaptive_asha") and sc.max_trials is not None and sc.max_trials > limit:
        raise InvalidArgument(
            f"searcher.max_trials: {sc.max_trials:,} is too many; {allowed}",
            fields=[{"field": "searcher.max_trials", "message": f"at most {limit}"}],
        )
    if sc.name == "grid":
        # counts are 64-bit and the config's size is bounded, so the exact product is cheap
        size = grid_size(cfg.hyperparameters)
        if size > limit:
            # str() of an int past 4,300 digits raises: show a huge size by its bit length
            shown = f"{size:,}" if size < 10**30 else f"about 10^{int(size.bit_length() * 0.30103)}"
            raise InvalidArgument(
                f"hyperparameters: the grid has {shown} points; {allowed}",
                fields=[{"field": "hyperparameters", "message": f"more than {limit} grid points"}],
            )

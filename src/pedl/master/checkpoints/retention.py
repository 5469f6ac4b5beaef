"""Which checkpoints an experiment's save_* policy keeps (Determined's save_experiment_best,
save_trial_best and save_trial_latest): pure, so garbage collection (checkpoints/gc.py) and its
tests decide the same way from facts alone."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RetentionPolicy:
    """Determined's save_* numbers: a checkpoint is kept if any of them keeps it."""

    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1

    @classmethod
    def of(cls, storage_config: Mapping[str, Any]) -> RetentionPolicy:
        defaults = cls()
        return cls(
            **{
                name: int(value if (value := storage_config.get(name)) is not None else getattr(defaults, name))
                for name in ("save_experiment_best", "save_trial_best", "save_trial_latest")
            }
        )

    def describe(self) -> str:
        return (
            f"save_trial_latest={self.save_trial_latest}, save_trial_best={self.save_trial_best}, "
            f"save_experiment_best={self.save_experiment_best}"
        )


@dataclass(frozen=True)
class CheckpointFacts:
    """What the decision needs of one completed checkpoint. `metric` is the searcher metric of the
    trial's validation at the checkpoint's steps_completed, None when there is none (or it is not
    a finite number): such a checkpoint can be kept as a latest one, never as a best one."""

    uuid: str
    trial_id: int
    steps_completed: int
    report_time: float = 0.0
    metric: float | None = None


def select_deletions(
    checkpoints: Sequence[CheckpointFacts],
    policy: RetentionPolicy,
    *,
    smaller_is_better: bool,
    closed_trials: Collection[int],
) -> list[str]:
    """The uuids to delete, in (trial, steps) order: checkpoints of `closed_trials` that none of the
    policy's rules keeps. Checkpoints of trials still running are never deleted, but they count
    for save_experiment_best, so a collection after one trial ends agrees with the one at the end of
    the experiment (more checkpoints can only push an old one out of the experiment's best).

    Ties: the later checkpoint (more steps, then later report) counts as newer and as better."""

    def newest_first(c: CheckpointFacts) -> tuple:
        return (-c.steps_completed, -c.report_time, c.uuid)

    def best_first(c: CheckpointFacts) -> tuple:
        assert c.metric is not None
        return (c.metric if smaller_is_better else -c.metric, *newest_first(c))

    keep: set[str] = set()
    by_trial: dict[int, list[CheckpointFacts]] = defaultdict(list)
    for c in checkpoints:
        by_trial[c.trial_id].append(c)
    for trial_checkpoints in by_trial.values():
        keep.update(c.uuid for c in sorted(trial_checkpoints, key=newest_first)[: policy.save_trial_latest])
        scored = [c for c in trial_checkpoints if c.metric is not None]
        keep.update(c.uuid for c in sorted(scored, key=best_first)[: policy.save_trial_best])
    scored = [c for c in checkpoints if c.metric is not None]
    keep.update(c.uuid for c in sorted(scored, key=best_first)[: policy.save_experiment_best])
    doomed = [c for c in checkpoints if c.trial_id in closed_trials and c.uuid not in keep]
    return [c.uuid for c in sorted(doomed, key=lambda c: (c.trial_id, c.steps_completed, c.uuid))]


def metric_value(metrics: Mapping[str, Any] | None, name: str | None) -> float | None:
    value = (metrics or {}).get(name) if name else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)

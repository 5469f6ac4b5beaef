"""core.train: training and validation metrics and progress, sent to the master or printed locally."""

from __future__ import annotations

import abc
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from pedl.core.cluster_info import TrialInfo
from pedl.core.distributed import DistributedContext
from pedl.core.master_session import MasterSession
from pedl.core.wire_format import format_metrics, to_json_value

TRAINING = "training"
VALIDATION = "validation"


class TrainContext(abc.ABC):
    """Reports metrics; `MasterTrainContext` on the cluster, `LocalTrainContext` off it.

    Reports go out in order from a background sender, which sends what has queued up meanwhile as one
    batch (one request, stored at once). Every call that needs an answer (storing a checkpoint, the
    searcher's operations, report_completed, the preemption check) and closing the context wait for
    the queued reports first; while the master is unreachable the sender retries (see
    master_session.RetryPolicy), and a report that failed for good is raised by the next call.

    With several workers only the chief (rank 0) reports: on the others every report_* call checks
    its arguments and then does nothing, so all ranks can run the same code. Metrics of other
    ranks reach the master only through the chief (e.g. `core.distributed.gather` them first).
    """

    def __init__(self, *, distributed: DistributedContext | None = None) -> None:
        self._is_chief = distributed is None or distributed.is_chief

    def report_training_metrics(
        self,
        *,
        steps_completed: int,
        metrics: Mapping[str, Any],
        batch_metrics: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Training metrics averaged over the batches since the last report."""
        self.report_metrics(
            group=TRAINING, steps_completed=steps_completed, metrics=metrics, batch_metrics=batch_metrics
        )

    def report_validation_metrics(self, *, steps_completed: int, metrics: Mapping[str, Any]) -> None:
        """Validation metrics; the searcher reads the experiment's `searcher.metric` from these."""
        self.report_metrics(group=VALIDATION, steps_completed=steps_completed, metrics=metrics)

    def report_metrics(
        self,
        *,
        group: str,
        steps_completed: int,
        metrics: Mapping[str, Any],
        batch_metrics: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        steps_completed = check_steps(steps_completed)
        if type(metrics) is not dict and not isinstance(metrics, Mapping):  # (a dict's check first: cheaper)
            raise TypeError(f"metrics must be a dict of name -> value, got {type(metrics).__name__}")
        if not group:
            raise ValueError("group must be a non-empty string")
        encoded = to_json_value(metrics, where="metrics")
        encoded_batches = (
            [to_json_value(b, where=f"batch_metrics[{i}]") for i, b in enumerate(batch_metrics)]
            if batch_metrics
            else []
        )
        if not self._is_chief:
            return
        self._send_metrics(group, steps_completed, metrics, encoded, encoded_batches)

    def report_progress(self, progress: float) -> None:
        """Fraction of the trial's work done, 0.0 to 1.0."""
        progress = float(progress)
        if not 0.0 <= progress <= 1.0:
            raise ValueError(f"progress must be between 0 and 1, got {progress}")
        if self._is_chief:
            self._send_progress(progress)

    @abc.abstractmethod
    def _send_metrics(
        self,
        group: str,
        steps_completed: int,
        raw: Mapping[str, Any],
        encoded: dict[str, Any],
        batch_metrics: list[Any],
    ) -> None: ...

    @abc.abstractmethod
    def _send_progress(self, progress: float) -> None: ...


class MasterTrainContext(TrainContext):
    def __init__(
        self, session: MasterSession, trial: TrialInfo, *, distributed: DistributedContext | None = None
    ) -> None:
        super().__init__(distributed=distributed)
        self._session = session
        self._trial = trial
        self._single_path = f"/api/v1/trials/{trial.trial_id}/metrics"
        self._batch_path = f"/api/v1/trials/{trial.trial_id}/metrics/batch"
        self._single = self._single_form  # (bound once: a report per step)

    def _send_metrics(
        self,
        group: str,
        steps_completed: int,
        raw: Mapping[str, Any],
        encoded: dict[str, Any],
        batch_metrics: list[Any],
    ) -> None:
        # alone, Determined's single report (made from the entry only then); queued behind others, one entry
        # of a batch (one request). No reportTime: the master stamps a report when it stores it (it never
        # read the trial's; formatting it was a fifth of a report's cost to the training loop), and no
        # batchMetrics where there are none (the master's default).
        metrics = {"avgMetrics": encoded, "batchMetrics": batch_metrics} if batch_metrics else {"avgMetrics": encoded}
        self._session.post_in_background(
            self._single_path,
            self._single,
            batch=(
                self._batch_path,
                {
                    "group": group,
                    "trialRunId": self._trial.trial_run_id,
                    "stepsCompleted": steps_completed,
                    "metrics": metrics,
                },
            ),
        )

    def _single_form(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A batch entry as the body of Determined's single-report route."""
        report = {k: v for k, v in entry.items() if k != "group"}
        report["metrics"] = {"batchMetrics": [], **report["metrics"]}
        return {"metrics": {"trialId": self._trial.trial_id, **report}, "group": entry["group"]}

    def _send_progress(self, progress: float) -> None:
        self._session.post_in_background(
            f"/api/v1/trials/{self._trial.trial_id}/progress", {"progress": progress, "is_raw": False}
        )


class LocalTrainContext(TrainContext):
    """Off-cluster twin: one readable line per report on stdout."""

    def _send_metrics(
        self,
        group: str,
        steps_completed: int,
        raw: Mapping[str, Any],
        encoded: dict[str, Any],
        batch_metrics: list[Any],
    ) -> None:
        print(f"[pedl] {group} metrics: steps_completed={steps_completed} {format_metrics(raw)}", flush=True)

    def _send_progress(self, progress: float) -> None:
        pass


def check_steps(steps_completed: Any, what: str = "steps_completed") -> int:
    """`steps_completed` as an int (numpy integers welcome); bools, floats and negatives refused."""
    try:
        if isinstance(steps_completed, bool):
            raise TypeError
        steps = operator.index(steps_completed)
    except TypeError:
        raise TypeError(f"{what} must be a non-negative int, got {steps_completed!r}") from None
    if steps < 0:
        raise ValueError(f"{what} must be a non-negative int, got {steps}")
    return steps

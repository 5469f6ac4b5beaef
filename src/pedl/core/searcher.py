"""core.searcher: the work the searcher gives this trial, as Determined's SearcherOperation.

A trial gets one operation: train to the experiment's `searcher.max_length` (in that setting's
units), reporting progress along the way and the searcher metric at the end.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping
from typing import Any

from pedl.core.distributed import DistributedContext
from pedl.core.master_session import MasterSession
from pedl.core.wire_format import format_metrics, to_json_value


class SearcherOperation:
    """Train until `length` units (batches, unless the config says epochs or records) are done.

    Every rank gets the same operation. Only the chief's report_progress and report_completed
    reach the master; on the other ranks they check their arguments and do nothing else.
    """

    def __init__(self, context: SearcherContext, length: int, *, is_chief: bool) -> None:
        self._context = context
        self._length = length
        self._is_chief = is_chief
        self._completed = False

    @property
    def length(self) -> int:
        return self._length

    @property
    def completed(self) -> bool:
        return self._completed

    def report_progress(self, length: float) -> None:
        """How many units of `self.length` are done so far."""
        length = float(length)
        if length < 0:
            raise ValueError(f"progress length must not be negative, got {length}")
        if not self._is_chief:
            return
        fraction = min(1.0, length / self._length) if self._length > 0 else 1.0
        self._context._send_progress(fraction)

    def report_completed(self, searcher_metric: Any) -> None:
        """The operation is done; `searcher_metric` is the value of the experiment's searcher.metric."""
        if self._completed:
            raise RuntimeError("report_completed() was already called for this operation")
        encoded = to_json_value(searcher_metric, where="searcher_metric")
        if self._is_chief:
            self._context._send_completed(self._length, searcher_metric, encoded)
        self._completed = True


class SearcherContext(abc.ABC):
    """`MasterSearcherContext` on the cluster, `LocalSearcherContext` off it."""

    def __init__(
        self,
        distributed: DistributedContext,
        length: int | None,
        *,
        missing_length_reason: str = "the searcher length is unknown",
    ) -> None:
        self._distributed = distributed
        self._length = length
        self._missing_reason = missing_length_reason

    def operations(self) -> Iterator[SearcherOperation]:
        """Yield this trial's operations (one), the same on every rank; the chief must report
        each one completed before asking for the next (the other ranks need not)."""
        if self._length is None:
            raise RuntimeError(self._missing_reason)
        op = SearcherOperation(self, self._length, is_chief=self._distributed.is_chief)
        yield op
        if self._distributed.is_chief and not op.completed:
            raise RuntimeError(
                "call op.report_completed(searcher_metric) before asking for the next searcher operation"
            )

    @abc.abstractmethod
    def _send_progress(self, fraction: float) -> None: ...

    @abc.abstractmethod
    def _send_completed(self, length: int, raw_metric: Any, encoded_metric: Any) -> None: ...


class MasterSearcherContext(SearcherContext):
    def __init__(
        self, distributed: DistributedContext, length: int | None, session: MasterSession, trial_id: int, **kwargs: Any
    ) -> None:
        super().__init__(distributed, length, **kwargs)
        self._session = session
        self._trial_id = trial_id

    def _send_progress(self, fraction: float) -> None:
        self._session.post(f"/api/v1/trials/{self._trial_id}/progress", {"progress": fraction, "is_raw": False})

    def _send_completed(self, length: int, raw_metric: Any, encoded_metric: Any) -> None:
        self._session.post(
            f"/api/v1/trials/{self._trial_id}/searcher/completed_operation",
            {"op": {"length": length}, "searcherMetric": encoded_metric},
        )


class LocalSearcherContext(SearcherContext):
    def _send_progress(self, fraction: float) -> None:
        pass

    def _send_completed(self, length: int, raw_metric: Any, encoded_metric: Any) -> None:
        metric = format_metrics({"searcher_metric": raw_metric})
        print(f"[pedl] searcher operation completed: length={length} {metric}", flush=True)


def length_from_config(config: Mapping[str, Any]) -> int | None:
    """`searcher.max_length` of an experiment config as a count of its units, or None if unset.

    Accepts `max_length: 100` and `max_length: {batches: 100}` (a fully defaulted config may also
    carry the other units as null).
    """
    searcher = config.get("searcher") or {}
    value = searcher.get("max_length")
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, Mapping):
        for unit in ("batches", "epochs", "records"):
            if value.get(unit) is not None:
                return int(value[unit])
    raise ValueError(f"searcher.max_length must be an integer or {{batches: N}}, got {value!r}")

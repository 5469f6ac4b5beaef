"""Trials: reading and killing one (service) and showing it as trialv1Trial (to_wire), what a trial reports
about itself (reports), the checkpoints and model versions it uses (source_infos), its allocations over time
(timeline) and its metric series beside other trials' (time_series)."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.trials.reports import (
        completed_operation,
        early_exit,
        report_metrics,
        report_progress,
        run_start,
        runner_metadata,
        trial_for_report,
    )
    from pedl.master.trials.service import (
        describe,
        get,
        kill_by,
        metrics_of,
        task_id_of,
        wait_reasons,
        within_bytes,
        workloads,
    )
    from pedl.master.trials.source_infos import report, stored_type
    from pedl.master.trials.time_series import compare, parse_metric_ids
    from pedl.master.trials.timeline import MAX_ALLOCATIONS

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "reports": [
            "completed_operation",
            "early_exit",
            "report_metrics",
            "report_progress",
            "run_start",
            "runner_metadata",
            "trial_for_report",
        ],
        "service": [
            "describe",
            "get",
            "kill_by",
            "metrics_of",
            "task_id_of",
            "wait_reasons",
            "within_bytes",
            "workloads",
        ],
        "source_infos": ["report", "stored_type"],
        "time_series": ["compare", "parse_metric_ids"],
        "timeline": ["MAX_ALLOCATIONS"],
    },
)

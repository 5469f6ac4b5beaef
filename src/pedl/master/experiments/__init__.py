"""Experiments: creating, reading and acting on one (service) and showing it as v1Experiment (to_wire),
listing them (listing, labels), editing (edits), moving (moves), bulk actions (bulk), continuing
(continuation), deleting (deletion, purge; the worker is workers/experiment_deletion.py), their code (code),
warm starts, TensorBoard files and jobs (an experiment's place in its pool's queue). What happens to a
running experiment is lifecycle/progression.py, and lifecycle/experiment_actions.py kills, pauses and
activates one."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.experiments.bulk import MAX_IDS, BulkFilters
    from pedl.master.experiments.code import model_definition_b64
    from pedl.master.experiments.continuation import continue_by
    from pedl.master.experiments.deletion import mark_all, request_deletion
    from pedl.master.experiments.edits import change_label, patch, set_archived
    from pedl.master.experiments.jobs import JOB_STATES, JobPage, JobQuery, QueueUpdate, update
    from pedl.master.experiments.labels import SEP, having_any, joined, split
    from pedl.master.experiments.listing import ExperimentQuery, ExperimentStats, page, reported_state, stats
    from pedl.master.experiments.moves import move
    from pedl.master.experiments.service import (
        best_validation_metric,
        checkpoints,
        describe,
        effective_config,
        events_of,
        get,
        submit,
        trials_page,
    )
    from pedl.master.experiments.tensorboard_files import delete, storage_of
    from pedl.master.experiments.warm_start import resolve

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "bulk": ["BulkFilters", "MAX_IDS"],
        "code": ["model_definition_b64"],
        "continuation": ["continue_by"],
        "deletion": ["mark_all", "request_deletion"],
        "edits": ["change_label", "patch", "set_archived"],
        "jobs": ["JOB_STATES", "JobPage", "JobQuery", "QueueUpdate", "update"],
        "labels": ["SEP", "having_any", "joined", "split"],
        "listing": ["ExperimentQuery", "ExperimentStats", "page", "reported_state", "stats"],
        "moves": ["move"],
        "service": [
            "best_validation_metric",
            "checkpoints",
            "describe",
            "effective_config",
            "events_of",
            "get",
            "submit",
            "trials_page",
        ],
        "tensorboard_files": ["delete", "storage_of"],
        "warm_start": ["resolve"],
    },
)

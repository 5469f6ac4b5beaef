"""Checkpoints: reading and downloading them (service, download), as the API sends them (to_wire), editing
and deleting them or some of their files (edits, deletion, file_removal, globs), their metrics and totals, where
they may live (storage_roots), and garbage collection: the pure decision (retention), the plan and the marking
(gc), GC tasks on agents (gc_tasks, gc_reports). The GC worker is workers/checkpoint_gc.py; the GC task as the
cluster sees it and the holds on checkpoints being deleted are in lifecycle/."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.checkpoints.deletion import Deletion, Outcome, delete_from_storage
    from pedl.master.checkpoints.download import prepare, tar_stream
    from pedl.master.checkpoints.edits import delete, mark_left, remove_files, set_metadata
    from pedl.master.checkpoints.file_removal import remove_entries
    from pedl.master.checkpoints.gc import MAX_PER_TASK, Plan, experiments_to_sweep, mark_deleted, plan
    from pedl.master.checkpoints.gc_tasks import Item, Job, directory, end_overdue, runs_on_agent, start
    from pedl.master.checkpoints.globs import check_globs, doomed
    from pedl.master.checkpoints.metrics import of_checkpoint, of_version, pages
    from pedl.master.checkpoints.retention import CheckpointFacts, RetentionPolicy, metric_value, select_deletions
    from pedl.master.checkpoints.service import (
        Page,
        Trained,
        describe,
        get,
        listing,
        report_outside_roots,
        validation_metrics_at,
        validations_at,
        with_training,
    )
    from pedl.master.checkpoints.storage_roots import (
        StorageRoots,
        allowed_roots,
        checkpoint_problem,
        confine_experiment_storage,
        is_path_component,
        location_problem,
        storage_problem,
    )
    from pedl.master.checkpoints.totals import NONE, CheckpointTotals, of_experiments, of_trials

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "deletion": ["Deletion", "Outcome", "delete_from_storage"],
        "download": ["prepare", "tar_stream"],
        "edits": ["delete", "mark_left", "remove_files", "set_metadata"],
        "file_removal": ["remove_entries"],
        "gc": ["MAX_PER_TASK", "Plan", "experiments_to_sweep", "mark_deleted", "plan"],
        "gc_tasks": ["Item", "Job", "directory", "end_overdue", "runs_on_agent", "start"],
        "globs": ["check_globs", "doomed"],
        "metrics": ["of_checkpoint", "of_version", "pages"],
        "retention": ["CheckpointFacts", "RetentionPolicy", "metric_value", "select_deletions"],
        "service": [
            "Page",
            "Trained",
            "describe",
            "get",
            "listing",
            "report_outside_roots",
            "validation_metrics_at",
            "validations_at",
            "with_training",
        ],
        "storage_roots": [
            "StorageRoots",
            "allowed_roots",
            "checkpoint_problem",
            "confine_experiment_storage",
            "is_path_component",
            "location_problem",
            "storage_problem",
        ],
        "totals": ["CheckpointTotals", "NONE", "of_experiments", "of_trials"],
    },
)

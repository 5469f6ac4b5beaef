"""Metrics: trials' reports (service, batches, columns, summaries), their digests for charts (digests,
digest_queue, series_digest; the digester's loop is workers/metric_digests.py), series read for charts and the
SDK (series, downsample, reports, export) and Determined's metric streams (streams, stream_reads). Retention is
workers/metric_retention.py."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.metrics.batches import MAX_REPORTS, Report, store
    from pedl.master.metrics.columns import Columns, finite_number, numbers_only
    from pedl.master.metrics.digest_queue import Block, DigestQueue, block_of
    from pedl.master.metrics.digests import Marks, digest_pass, load, note_report, note_reports, reached_step, sweep
    from pedl.master.metrics.downsample import DEFAULT_POINTS, MAX_POINTS, MIN_POINTS
    from pedl.master.metrics.export import Export, plan
    from pedl.master.metrics.reports import check_trials
    from pedl.master.metrics.series import MAX_NAMES, Answer, for_experiment, for_trial, read_series
    from pedl.master.metrics.series_digest import DIGEST_POINTS, Digest, answer, decode, encode, fold_arrays, points_of
    from pedl.master.metrics.service import clean_metrics, json_safe, list_metrics, record, update_best
    from pedl.master.metrics.stream_reads import Poll, batches_poll, metric_names_poll, sample_poll, snapshot_poll
    from pedl.master.metrics.streams import (
        DEFAULT_DATAPOINTS,
        DEFAULT_SAMPLE_TRIALS,
        MAX_DATAPOINTS,
        MAX_SAMPLE_TRIALS,
        REREAD_SECONDS,
        BatchesSent,
        NamesSent,
        Point,
        SampleSent,
        SnapshotRow,
        SnapshotSent,
        Window,
        bounded,
        experiment_ids,
        metric_group,
        metric_name,
        period,
        sample_by_length,
        thin,
    )
    from pedl.master.metrics.summaries import fold_columns, key, rebuild

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "batches": ["MAX_REPORTS", "Report", "store"],
        "columns": ["Columns", "finite_number", "numbers_only"],
        "digest_queue": ["Block", "DigestQueue", "block_of"],
        "digests": ["Marks", "digest_pass", "load", "note_report", "note_reports", "reached_step", "sweep"],
        "downsample": ["DEFAULT_POINTS", "MAX_POINTS", "MIN_POINTS"],
        "export": ["Export", "plan"],
        "reports": ["check_trials"],
        "series": ["Answer", "MAX_NAMES", "for_experiment", "for_trial", "read_series"],
        "series_digest": ["DIGEST_POINTS", "Digest", "answer", "decode", "encode", "fold_arrays", "points_of"],
        "service": ["clean_metrics", "json_safe", "list_metrics", "record", "update_best"],
        "stream_reads": ["Poll", "batches_poll", "metric_names_poll", "sample_poll", "snapshot_poll"],
        "streams": [
            "BatchesSent",
            "DEFAULT_DATAPOINTS",
            "DEFAULT_SAMPLE_TRIALS",
            "MAX_DATAPOINTS",
            "MAX_SAMPLE_TRIALS",
            "NamesSent",
            "Point",
            "REREAD_SECONDS",
            "SampleSent",
            "SnapshotRow",
            "SnapshotSent",
            "Window",
            "bounded",
            "experiment_ids",
            "metric_group",
            "metric_name",
            "period",
            "sample_by_length",
            "thin",
        ],
        "summaries": ["fold_columns", "key", "rebuild"],
    },
)

"""pedl.core: the library training code imports (Determined's Core API shape).

    with pedl.core.init() as core:
        for op in core.searcher.operations():
            ...train, core.train.report_training_metrics(...), core.checkpoint.store_path(...)...
            if core.preempt.should_preempt(): return
            op.report_completed(val_loss)

The same script runs off-cluster: metrics are printed and checkpoints go to ./checkpoints.
"""

from pedl.core.checkpoint import CheckpointContext
from pedl.core.cluster_info import ClusterInfo, TrialInfo, get_cluster_info
from pedl.core.context import Context, init
from pedl.core.distributed import DistributedContext
from pedl.core.preempt import PreemptContext
from pedl.core.searcher import SearcherContext, SearcherOperation
from pedl.core.train import TrainContext

__all__ = [
    "CheckpointContext",
    "ClusterInfo",
    "Context",
    "DistributedContext",
    "PreemptContext",
    "SearcherContext",
    "SearcherOperation",
    "TrainContext",
    "TrialInfo",
    "get_cluster_info",
    "init",
]

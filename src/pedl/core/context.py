"""`pedl.core.init()`: the one entry point, wiring the sub-contexts for the cluster or a laptop.

On the cluster (DET_MASTER and DET_ALLOCATION_ID set) everything talks to the master; off it, the
local twins print metrics and keep checkpoints in a local directory. With WORLD_SIZE > 1 in the
environment the workers join a torch.distributed group, and only the chief (rank 0) reports.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from pedl.common.checkpoint_storage import CheckpointStorage, SharedFSStorage, storage_from_config
from pedl.core.checkpoint import (
    CheckpointContext,
    LocalCheckpointContext,
    MasterCheckpointContext,
)
from pedl.core.cluster_info import ClusterInfo, get_cluster_info
from pedl.core.distributed import DistributedContext, distributed_from_env
from pedl.core.master_session import MasterSession, RetryPolicy
from pedl.core.preempt import LocalPreemptContext, MasterPreemptContext, PreemptContext
from pedl.core.searcher import (
    LocalSearcherContext,
    MasterSearcherContext,
    SearcherContext,
    length_from_config,
)
from pedl.core.train import LocalTrainContext, MasterTrainContext, TrainContext

DEFAULT_LOCAL_LENGTH = 100
DEFAULT_LOCAL_CHECKPOINT_DIR = "checkpoints"

StorageArg = str | os.PathLike[str] | Mapping[str, Any] | CheckpointStorage


class Context:
    """What training code holds: `.train`, `.checkpoint`, `.preempt`, `.distributed`, `.searcher`.

    `.info` is the ClusterInfo (None off-cluster). `.hparams` are the trial's hyperparameters
    (off-cluster: from the config and init's `hparams`). `.config` is the experiment config as a
    dict (off-cluster: the config given to init, validated and defaulted, or {}).
    """

    def __init__(
        self,
        *,
        train: TrainContext,
        checkpoint: CheckpointContext,
        preempt: PreemptContext,
        distributed: DistributedContext,
        searcher: SearcherContext,
        info: ClusterInfo | None,
        hparams: dict[str, Any],
        config: dict[str, Any],
        sessions: tuple[MasterSession, ...] = (),
    ) -> None:
        self.train = train
        self.checkpoint = checkpoint
        self.preempt = preempt
        self.distributed = distributed
        self.searcher = searcher
        self.info = info
        self.hparams = hparams
        self.config = config
        self._sessions = sessions

    def start(self) -> None:
        self.preempt.start()

    def close(self) -> None:
        try:
            for session in self._sessions:
                session.flush()  # reports still queued reach the master before the task ends
        finally:
            self.preempt.close()
            for session in self._sessions:
                session.close()
            self.distributed.close()

    def __enter__(self) -> Context:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.close()  # an undelivered report is raised here, so the trial does not end quietly
            return
        with contextlib.suppress(Exception):  # the exception already in flight is the one to report
            self.close()


def init(
    *,
    distributed: DistributedContext | None = None,
    checkpoint_storage: StorageArg | None = None,
    config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    hparams: Mapping[str, Any] | None = None,
    max_length: int | None = None,
) -> Context:
    """Build the Core API context; use it as `with pedl.core.init() as core:`.

    distributed: this worker's place among the trial's workers. By default it comes from the
        environment: `DistributedContext.from_torch_distributed()` when WORLD_SIZE > 1 (the master
        sets it for a trial spread over several agents; so does torchrun), else a single process.
        The context closes it on exit (destroying a torch process group it made).
    checkpoint_storage: a directory, a `checkpoint_storage` config dict or a CheckpointStorage.
        On the cluster it overrides the experiment's storage; off it the default is ./checkpoints.
    config, hparams, max_length: used off-cluster only, standing in for what the master provides:
        an experiment config (YAML path or dict) supplies searcher.max_length and hyperparameters
        (the first grid point of each range); `hparams` override those; `max_length` overrides the
        searcher length (default 100).
    """
    made_here = distributed is None
    if distributed is None:
        distributed = distributed_from_env()
    try:
        info = get_cluster_info()
        if info is None:
            return _local_context(distributed, checkpoint_storage, config, hparams, max_length)
        return _cluster_context(info, distributed, checkpoint_storage)
    except BaseException:
        if made_here:
            distributed.close()
        raise


def _cluster_context(
    info: ClusterInfo, distributed: DistributedContext, checkpoint_storage: StorageArg | None
) -> Context:
    trial = info.trial
    if trial is None:
        raise RuntimeError(
            f"pedl.core.init() runs in trial tasks; this task is "
            f"{info.task_type or 'unknown'} (DET_TRIAL_ID is not set)"
        )
    retry = RetryPolicy.from_env()
    session = MasterSession(info.master_url, info.session_token, retry=retry, cert_file=info.master_cert_file)
    watch_session = MasterSession(info.master_url, info.session_token, retry=retry, cert_file=info.master_cert_file)
    config = trial.config
    storage = None
    if checkpoint_storage is not None:
        storage = _storage_from_arg(checkpoint_storage)
    elif config.get("checkpoint_storage"):
        storage = storage_from_config(config["checkpoint_storage"])
    return Context(
        train=MasterTrainContext(session, trial, distributed=distributed),
        checkpoint=MasterCheckpointContext(
            storage,
            distributed,
            session,
            info,
            missing_storage_reason="the experiment config (DET_EXPERIMENT_CONFIG) has no "
            "checkpoint_storage; pass checkpoint_storage= to pedl.core.init()",
        ),
        preempt=MasterPreemptContext(distributed, session, watch_session, info.allocation_id),
        distributed=distributed,
        searcher=MasterSearcherContext(
            distributed,
            length_from_config(config),
            session,
            trial.trial_id,
            missing_length_reason="the experiment config has no searcher.max_length",
        ),
        info=info,
        hparams=dict(trial.hparams),
        config=config,
        sessions=(session, watch_session),
    )


def _local_context(
    distributed: DistributedContext,
    checkpoint_storage: StorageArg | None,
    config: str | os.PathLike[str] | Mapping[str, Any] | None,
    hparams: Mapping[str, Any] | None,
    max_length: int | None,
) -> Context:
    config_dict = load_local_config(config) if config is not None else {}
    local_hparams = first_grid_point(config_dict.get("hyperparameters") or {})
    local_hparams.update(hparams or {})
    length = max_length if max_length is not None else length_from_config(config_dict)
    storage = _storage_from_arg(checkpoint_storage if checkpoint_storage is not None else DEFAULT_LOCAL_CHECKPOINT_DIR)
    where = storage.base_path if isinstance(storage, SharedFSStorage) else storage
    if distributed.is_chief:
        print(f"[pedl] not on a cluster: metrics are printed here, checkpoints go to {where}", flush=True)
    return Context(
        train=LocalTrainContext(distributed=distributed),
        checkpoint=LocalCheckpointContext(storage, distributed),
        preempt=LocalPreemptContext(distributed),
        distributed=distributed,
        searcher=LocalSearcherContext(distributed, length if length is not None else DEFAULT_LOCAL_LENGTH),
        info=None,
        hparams=local_hparams,
        config=config_dict,
    )


def _storage_from_arg(arg: StorageArg) -> CheckpointStorage:
    if isinstance(arg, CheckpointStorage):
        return arg
    if isinstance(arg, Mapping):
        return storage_from_config(arg)
    return SharedFSStorage(Path(arg))


def load_local_config(config: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """An experiment config (YAML file or dict), validated and defaulted like the master does."""
    from pedl.config.experiment_config import parse_experiment_config

    if isinstance(config, Mapping):
        parsed = parse_experiment_config(dict(config))
    else:
        path = Path(config)
        parsed = parse_experiment_config(path.read_text(), source=str(path))
    return parsed.model_dump(mode="json")


def first_grid_point(tree: Mapping[str, Any]) -> dict[str, Any]:
    """Concrete hyperparameters from a (dumped) hyperparameter tree: const values, the low end of
    each range (base**minval for log), the first categorical value; nested groups stay nested."""
    out: dict[str, Any] = {}
    for name, spec in tree.items():
        if not isinstance(spec, Mapping):
            out[name] = spec
            continue
        kind = spec.get("type")
        if kind is None:
            out[name] = first_grid_point(spec)
        elif kind == "const":
            out[name] = spec.get("val")
        elif kind in ("int", "double"):
            out[name] = spec["minval"]
        elif kind == "log":
            out[name] = float(spec.get("base", 10.0)) ** float(spec["minval"])
        elif kind == "categorical":
            out[name] = spec["vals"][0]
        else:
            out[name] = dict(spec)
    return out

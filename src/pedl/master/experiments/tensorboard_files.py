"""An experiment's TensorBoard files: Determined's Core API writes them into the experiment's checkpoint
storage under <cluster id>/tensorboard/experiment/<experiment id>/ (determined/tensorboard/build.py;
shared_fs through /determined_shared_fs, or the S3 prefix). Deleting them (Determined's DELETE
/experiments/{id}/tensorboard-files, the SDK's delete_tensorboard_files, `det e delete-tb-files`) goes as
deleting a checkpoint goes (checkpoint_deletion.delete_from_storage): that directory, checked against the
master's storage roots first."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.config.checkpoint_storage import experiment_storage
from pedl.errors import Forbidden, InvalidArgument, Unavailable
from pedl.master.caller_cache import Caller
from pedl.master.checkpoints.deletion import Deletion, Outcome, delete_from_storage
from pedl.master.checkpoints.storage_roots import allowed_roots, is_path_component
from pedl.master.experiments.service import get
from pedl.master.identity.authz import require_owner

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

StorageFor = Callable[[Mapping[str, Any]], CheckpointStorage]


def storage_of(storage: Mapping[str, Any], cluster_id: str) -> dict[str, Any]:
    """The storage whose "checkpoint" named after an experiment's id is that experiment's TensorBoard
    directory: the experiment's storage with <cluster id>/tensorboard/experiment appended to its
    storage_path (shared_fs) or prefix (s3), so the checks and deletion of checkpoints apply as they are."""
    if not is_path_component(cluster_id):
        raise InvalidArgument(f"the cluster id {cluster_id!r} is not a single path component")
    below = posixpath.join(cluster_id, "tensorboard", "experiment")
    out = dict(storage)
    if (out.get("type") or "shared_fs") == "s3":
        out["prefix"] = "/".join(p for p in [*str(out.get("prefix") or "").split("/"), below] if p)
    else:
        out["storage_path"] = posixpath.join(str(out.get("storage_path") or ""), below)
    return out


def tensorboard_location(ctx: MasterContext, experiment_id: int, who: Caller) -> dict[str, Any]:
    """The TensorBoard storage of the experiment, for its owner or an admin."""
    default = ctx.config.effective_checkpoint_storage().model_dump(mode="json")
    with ctx.db.read_session() as s:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"delete the TensorBoard files of experiment {experiment_id}")
        return storage_of(experiment_storage(exp.config, default), ctx.cluster_id)


def delete(ctx: MasterContext, who: Caller, experiment_id: int, storage_for: StorageFor = storage_from_config) -> None:
    """Delete the experiment's TensorBoard directory (none there: nothing to do). One outside the
    master's storage roots is refused (403), a storage failure is a 503; the request returns when the
    files are gone (Determined answers at once and deletes in a task)."""
    storage = tensorboard_location(ctx, experiment_id, who)
    name = str(experiment_id)
    outcome = Outcome()  # no trial (the directory holds every trial's) and never a model version
    delete_from_storage(
        [Deletion(name, 0, storage)], allowed_roots(ctx.config), storage_for, outcome, registered=lambda _name: False
    )
    if name in outcome.refused:
        raise Forbidden(f"the TensorBoard files of experiment {experiment_id} are left alone: {outcome.refused[name]}")
    if name in outcome.failed:
        raise Unavailable(
            f"could not delete the TensorBoard files of experiment {experiment_id}: {outcome.failed[name]}; try again"
        )

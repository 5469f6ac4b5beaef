"""Determined 0.38.1's task info files, written by the agent for each task: the harness of an
unmodified Determined script reads them at `/run/determined/info` (a fixed path, so each task sees
its own through a mount namespace or its container), and writes shared_fs checkpoints under
`/determined_shared_fs`, which maps to the checkpoint storage's host_path.

Pure: everything comes from the task's final environment (the master's DET_* variables and the
agent's own), so what the files say always agrees with what pedl.core reads from the environment.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pedl.config.checkpoint_storage import as_determined
from pedl.config.trial_api import determined_trial_config

INFO_DIR = "/run/determined/info"  # where Determined's harness looks (determined/_info.py)
SHARED_FS_DIR = "/determined_shared_fs"  # determined.constants.SHARED_FS_CONTAINER_PATH
# determined.constants.MANAGED_TRAINING_MODEL_COPY: a clean copy of the model definition, which the Trial
# APIs copy into each checkpoint (as `code/`) instead of the working directory the trial writes in
MODEL_COPY_DIR = "/run/determined/train/model"


def info_files(env: Mapping[str, str], gpu_uuids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """cluster.json, trial.json (trials only), resources.json and rendezvous.json, by file name;
    the keys are the constructor arguments of Determined's ClusterInfo, TrialInfo, ResourcesInfo
    and RendezvousInfo, which it calls with them."""
    config = _json(env.get("DET_EXPERIMENT_CONFIG"), {})
    files: dict[str, dict[str, Any]] = {
        "cluster.json": {
            "master_url": env.get("DET_MASTER", ""),
            "cluster_id": env.get("DET_CLUSTER_ID", ""),
            "agent_id": env.get("DET_AGENT_ID", ""),
            "slot_ids": _json(env.get("DET_SLOT_IDS"), []),
            "task_id": env.get("DET_TASK_ID", ""),
            "allocation_id": env.get("DET_ALLOCATION_ID", ""),
            "session_token": env.get("DET_SESSION_TOKEN", ""),
            "task_type": env.get("DET_TASK_TYPE", "TRIAL"),
            "master_cert_name": env.get("DET_MASTER_CERT_NAME") or None,
            "master_cert_file": env.get("DET_MASTER_CERT_FILE") or None,
            "latest_checkpoint": env.get("DET_LATEST_CHECKPOINT") or None,
        },
        "resources.json": {"gpu_uuids": list(gpu_uuids)},
        "rendezvous.json": _rendezvous(env),
    }
    if files["cluster.json"]["task_type"] == "TRIAL":
        files["trial.json"] = {
            "trial_id": int(env.get("DET_TRIAL_ID", "0") or 0),
            "experiment_id": int(env.get("DET_EXPERIMENT_ID", "0") or 0),
            "trial_seed": int(env.get("DET_TRIAL_SEED", "0") or 0),
            "hparams": _json(env.get("DET_HPARAMS"), {}),
            # with Determined's defaults, which its harness indexes; the region reaches boto3 as
            # AWS_DEFAULT_REGION (storage_variables)
            "config": determined_trial_config(as_determined(config)) if isinstance(config, dict) else config,
            "steps_completed": int(env.get("DET_STEPS_COMPLETED", "0") or 0),
            "trial_run_id": int(env.get("DET_TRIAL_RUN_ID", "1") or 1),
            "debug": bool(config.get("debug", False)) if isinstance(config, dict) else False,
            "inter_node_network_interface": env.get("DET_INTER_NODE_NETWORK_INTERFACE") or None,
        }
    return files


def storage_variables(env: Mapping[str, str]) -> dict[str, str]:
    """AWS_DEFAULT_REGION for a task whose S3 storage names a region, unless the task sets it."""
    config = _json(env.get("DET_EXPERIMENT_CONFIG"), {})
    storage = config.get("checkpoint_storage") if isinstance(config, dict) else None
    region = storage.get("region") if isinstance(storage, dict) and storage.get("type") == "s3" else None
    if region and "AWS_DEFAULT_REGION" not in env and "AWS_REGION" not in env:
        return {"AWS_DEFAULT_REGION": str(region)}
    return {}


def _rendezvous(env: Mapping[str, str]) -> dict[str, Any]:
    # a trial on one agent is a world of one node; several agents are told every node's address
    addrs = _json(env.get("PEDL_NODE_ADDRS"), None) or [env.get("MASTER_ADDR") or "127.0.0.1"]
    slot_ids = _json(env.get("DET_SLOT_IDS"), [])
    counts = _json(env.get("PEDL_NODE_SLOTS"), None) or [len(slot_ids) if isinstance(slot_ids, list) else 0]
    return {
        "container_addrs": addrs,
        "container_rank": int(env.get("NODE_RANK", "0") or 0),
        "container_slot_counts": counts,
    }


def shared_fs_host_path(env: Mapping[str, str]) -> Path | None:
    """The host directory `/determined_shared_fs` stands for: the shared_fs storage's host_path in
    the task's experiment config; None for other storage (S3 needs no mount)."""
    config = _json(env.get("DET_EXPERIMENT_CONFIG"), {})
    storage = config.get("checkpoint_storage") if isinstance(config, dict) else None
    if not isinstance(storage, dict) or storage.get("type", "shared_fs") != "shared_fs":
        return None
    host = storage.get("host_path")
    return Path(os.path.expanduser(str(host))) if host else None


STORAGE_MODE = 0o1777  # a storage directory the agent creates: as /tmp, each user's tasks add, none removes another's


def prepare_shared_fs(env: Mapping[str, str]) -> Path | None:
    """The shared_fs storage's host_path (shared_fs_host_path), with the directories every user's tasks
    write in (its storage_path; Determined's <cluster id>/tensorboard/experiment, where each experiment's
    event files go), created where missing with STORAGE_MODE: the tasks of every user (each its own uid)
    make their checkpoint and experiment directories there, and the sticky bit keeps each user's from the
    others. An existing directory is left as it is."""
    host = shared_fs_host_path(env)
    if host is None:
        return None
    config = _json(env.get("DET_EXPERIMENT_CONFIG"), {})
    storage_path = os.path.expanduser(str(config["checkpoint_storage"].get("storage_path") or ""))
    base = Path(os.path.normpath(host / storage_path))
    shared = [host, base] if base != host and host in base.parents else [host]
    cluster_id = env.get("DET_CLUSTER_ID", "")
    if cluster_id and "/" not in cluster_id and cluster_id not in (".", ".."):
        shared += [
            shared[-1] / cluster_id,
            shared[-1] / cluster_id / "tensorboard",
            shared[-1] / cluster_id / "tensorboard" / "experiment",
        ]
    for directory in shared:
        if not directory.exists():
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, STORAGE_MODE)
    return host


def write_info_dir(directory: Path, files: Mapping[str, Mapping[str, Any]]) -> None:
    """A fresh directory holding the files, readable by the task only (the session token is in
    cluster.json)."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    for stale in directory.iterdir():
        stale.unlink()
    for name, content in files.items():
        path = directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(content, f)


def model_copy_directory(info_directory: Path) -> Path:
    """Where the agent keeps a trial's MODEL_COPY_DIR: beside its info files."""
    return info_directory.with_name(info_directory.name + ".model")


def _json(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default

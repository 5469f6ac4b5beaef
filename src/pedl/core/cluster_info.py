"""What a task knows about itself on the cluster, read from the DET_* variables the master sets.

`get_cluster_info()` returns None off-cluster (no DET_MASTER or no DET_ALLOCATION_ID), so the same
script runs on a laptop. pedl reads environment variables only, never /run/determined/info.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pedl.common.master_trust import master_cert_from_env


@dataclass(frozen=True)
class TrialInfo:
    trial_id: int
    experiment_id: int
    trial_seed: int
    hparams: dict[str, Any]
    config: dict[str, Any]
    steps_completed: int
    trial_run_id: int


@dataclass(frozen=True)
class ClusterInfo:
    master_url: str
    cluster_id: str
    agent_id: str
    task_id: str
    allocation_id: str
    session_token: str = field(repr=False)
    task_type: str
    latest_checkpoint: str | None
    trial: TrialInfo | None
    slot_ids: list[int] = field(default_factory=list)
    user: str | None = None
    resources_id: str | None = None
    # the CA file to verify an https:// master against (None: the system's CAs); agents set
    # PEDL_MASTER_CERT and DET_MASTER_CERT_FILE, Determined's name
    master_cert_file: str | None = None


def get_cluster_info(environ: Mapping[str, str] | None = None) -> ClusterInfo | None:
    """The running task's ClusterInfo, or None when not running on a pedl (or Determined) cluster."""
    env = os.environ if environ is None else environ
    if not env.get("DET_MASTER") or not env.get("DET_ALLOCATION_ID"):
        return None
    trial = _trial_info(env) if env.get("DET_TRIAL_ID") else None
    return ClusterInfo(
        master_url=normalize_master_url(env["DET_MASTER"]),
        cluster_id=env.get("DET_CLUSTER_ID", ""),
        agent_id=env.get("DET_AGENT_ID", ""),
        task_id=env.get("DET_TASK_ID", ""),
        allocation_id=env["DET_ALLOCATION_ID"],
        session_token=env.get("DET_SESSION_TOKEN", ""),
        task_type=env.get("DET_TASK_TYPE") or ("TRIAL" if trial else ""),
        latest_checkpoint=env.get("DET_LATEST_CHECKPOINT") or None,
        trial=trial,
        slot_ids=_json(env, "DET_SLOT_IDS", []),
        user=env.get("DET_USER") or None,
        resources_id=env.get("DET_RESOURCES_ID") or None,
        master_cert_file=master_cert_from_env(env),
    )


def normalize_master_url(url: str) -> str:
    url = url.strip().rstrip("/")
    return url if "://" in url else f"http://{url}"


def _trial_info(env: Mapping[str, str]) -> TrialInfo:
    return TrialInfo(
        trial_id=_int(env, "DET_TRIAL_ID"),
        experiment_id=_int(env, "DET_EXPERIMENT_ID"),
        trial_seed=_int(env, "DET_TRIAL_SEED"),
        hparams=_json(env, "DET_HPARAMS", {}),
        config=_json(env, "DET_EXPERIMENT_CONFIG", {}),
        steps_completed=_int(env, "DET_STEPS_COMPLETED"),
        trial_run_id=_int(env, "DET_TRIAL_RUN_ID"),
    )


def _int(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from None


def _json(env: Mapping[str, str], name: str, default: Any) -> Any:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(value, type(default)):
        raise ValueError(f"{name} must be a JSON {type(default).__name__}, got {raw[:100]!r}")
    return value

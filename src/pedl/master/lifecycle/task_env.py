"""The environment a trial process gets (Determined's DET_* names), built from rows."""

from __future__ import annotations

from typing import Any

from pedl.master.lifecycle.task_access import task_user_token


def trial_env(
    *,
    cluster_id: str,
    experiment_id: int,
    config_json: str,
    trial: Any,
    hparams_json: str,
    alloc: Any,
    session_token: str,
    username: str,
    user_env: dict[str, str],
    steps_completed: int,
) -> dict[str, str]:
    """`trial` and `alloc`: rows or models with the columns used here; `config_json` and
    `hparams_json`: the experiment's config and the trial's hyperparameters as JSON text (encoded once
    per experiment, and as stored, by the caller)."""
    # Determined 0.38.1's Trial APIs restore their own checkpoints (which hold numpy's RNG state) with torch.load's
    # default, which torch 2.6 made weights-only: without this every resume of a PyTorchTrial fails to unpickle.
    # A trial loads its own checkpoints, or the warm start its owner chose; its environment may set it to 0.
    env = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", **user_env}
    env.update(
        {
            "DET_CLUSTER_ID": cluster_id,
            "DET_TASK_ID": alloc.task_id,
            "DET_ALLOCATION_ID": alloc.id,
            "DET_RESOURCES_ID": alloc.id,
            "DET_SESSION_TOKEN": session_token,
            "DET_TASK_TYPE": "TRIAL",
            "DET_TRIAL_ID": str(trial.id),
            "DET_EXPERIMENT_ID": str(experiment_id),
            "DET_TRIAL_SEED": str(trial.seed),
            "DET_HPARAMS": hparams_json,
            "DET_EXPERIMENT_CONFIG": config_json,
            "DET_STEPS_COMPLETED": str(steps_completed),
            "DET_TRIAL_RUN_ID": str(trial.run_id),
            # a warm-started trial's runs start from the source checkpoint until it has one of its own
            "DET_LATEST_CHECKPOINT": trial.latest_checkpoint or getattr(trial, "warm_start_checkpoint", None) or "",
            "DET_USER": username,
            "DET_USER_TOKEN": task_user_token(session_token),
        }
    )
    return env

"""The environment a trial process gets (Determined's DET_* names), built from rows."""

from __future__ import annotations

import json

from pedl.master.db import models


def trial_env(*, cluster_id: str, exp: models.Experiment, trial: models.Trial, alloc: models.Allocation,
              session_token: str, username: str, user_env: dict[str, str], steps_completed: int) -> dict[str, str]:
    env = dict(user_env)
    env.update({
        "DET_CLUSTER_ID": cluster_id,
        "DET_TASK_ID": alloc.task_id,
        "DET_ALLOCATION_ID": alloc.id,
        "DET_RESOURCES_ID": alloc.id,
        "DET_SESSION_TOKEN": session_token,
        "DET_TASK_TYPE": "TRIAL",
        "DET_TRIAL_ID": str(trial.id),
        "DET_EXPERIMENT_ID": str(exp.id),
        "DET_TRIAL_SEED": str(trial.seed),
        "DET_HPARAMS": json.dumps(trial.hparams),
        "DET_EXPERIMENT_CONFIG": json.dumps(exp.config),
        "DET_STEPS_COMPLETED": str(steps_completed),
        "DET_TRIAL_RUN_ID": str(trial.run_id),
        "DET_LATEST_CHECKPOINT": trial.latest_checkpoint or "",
        "DET_USER": username,
    })
    return env

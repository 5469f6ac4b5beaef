"""TensorBoards: what one shows is settled at launch (the experiments' best trials and the trials named),
written into its context as .pedl/tensorboard.json; in the task, .pedl/tensorboard_runs.py gives
TensorBoard each trial's event files from checkpoint storage, or writes them from the stored metrics.

Where pedl's event files are made: in the task, which reads the metrics with its own token through
the routes any live task may read (paged NDJSON), so the master does no per-TensorBoard file work and
the files are on the agent that serves them, whichever host that is."""

from __future__ import annotations

import base64
import json
import os
import posixpath
from importlib import resources
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.checkpoint_storage import experiment_storage
from pedl.config.task_config import TaskConfig
from pedl.errors import InvalidArgument, NotFound
from pedl.master.db import models
from pedl.master.lifecycle.task_kind_parts import Prepared, launched

MAX_EXPERIMENTS = 100  # experimentIds of one TensorBoard
MAX_TRIALS = 100  # trialIds of one TensorBoard (Determined: "at most 100 trials ... per TensorBoard")
TRIALS_PER_EXPERIMENT = 100  # an experiment with more shows its best this many, as Determined's does
PLAN_PATH = ".pedl/tensorboard.json"
RUNS_PATH = ".pedl/tensorboard_runs.py"


def prepare(
    s: Session, owner: models.User, cfg: TaskConfig, experiment_ids: tuple[int, ...], trial_ids: tuple[int, ...]
) -> Prepared:
    """The experiments and trials asked for must exist (404 naming the field); the trials' experiments
    join the experiment ids (the description names them). Adds the plan file to the context."""
    exp_ids = list(dict.fromkeys(experiment_ids))
    tr_ids = list(dict.fromkeys(trial_ids))
    if not exp_ids and not tr_ids:
        raise InvalidArgument.at("experimentIds", "give at least one experiment id or trial id (trialIds)")
    if len(exp_ids) > MAX_EXPERIMENTS:
        raise InvalidArgument.at(
            "experimentIds", f"{len(exp_ids)} experiments, more than the limit of {MAX_EXPERIMENTS} for one TensorBoard"
        )
    if len(tr_ids) > MAX_TRIALS:
        raise InvalidArgument.at(
            "trialIds", f"{len(tr_ids)} trials, more than the limit of {MAX_TRIALS} for one TensorBoard"
        )
    trials = {t.id: t for t in s.scalars(select(models.Trial).where(models.Trial.id.in_(tr_ids)))} if tr_ids else {}
    missing_trial = next((t for t in tr_ids if t not in trials), None)
    if missing_trial is not None:
        raise _not_found("trialIds", f"trial {missing_trial} not found")
    for trial_id in tr_ids:
        if trials[trial_id].experiment_id not in exp_ids:
            exp_ids.append(trials[trial_id].experiment_id)
    exps = {e.id: e for e in s.scalars(select(models.Experiment).where(models.Experiment.id.in_(exp_ids)))}
    missing_exp = next((e for e in exp_ids if e not in exps), None)
    if missing_exp is not None:
        raise _not_found("experimentIds", f"experiment {missing_exp} not found")
    shown: dict[int, list[int]] = {e: best_trials(s, exps[e]) for e in dict.fromkeys(experiment_ids)}
    for trial_id in tr_ids:
        listed = shown.setdefault(trials[trial_id].experiment_id, [])
        if trial_id not in listed:
            listed.append(trial_id)
    plan = {
        "experiments": [{"id": e, "storage_root": storage_root(exps[e].config), "trials": shown[e]} for e in exp_ids]
    }
    return Prepared(
        tuple(exp_ids),
        tuple(tr_ids),
        files=(_file(PLAN_PATH, json.dumps(plan).encode()), _file(RUNS_PATH, _runs_source())),
        config=inherited(cfg, [exps[e] for e in exp_ids]),
    )


def inherited(cfg: TaskConfig, exps: list[models.Experiment]) -> dict[str, Any]:
    """What a TensorBoard takes from its experiments, as Determined 0.38's does (api_tensorboard.go): the most
    recent one's (the highest id's) image with its image pull secrets unless the request names an image, its
    registry_auth unless the request gives one, and each shared_fs storage mounted read-only at its own path
    (so that in a container too the event files are where the plan says; a process task reads the host's
    paths as they are). Nothing else: the experiments' environment variables and bind mounts are their
    owners' config, and a TensorBoard runs as the user who starts it, whose experiments they need not be."""
    mounts = [m.model_dump(mode="json") for m in cfg.bind_mounts]
    taken = {m["container_path"] for m in mounts}
    for root in dict.fromkeys(storage_root(exp.config) for exp in exps):
        if root and ":" not in root and "," not in root and root not in taken:  # a path docker -v cannot take
            taken.add(root)
            mounts.append({"host_path": root, "container_path": root, "read_only": True})
    data: dict[str, Any] = {"bind_mounts": mounts}
    latest = max(exps, key=lambda e: e.id, default=None)
    given = cfg.model_dump(mode="json")["environment"] if "environment" in cfg.model_fields_set else {}
    theirs = ((latest.config or {}).get("environment") or {}) if latest is not None else {}
    environment = dict(given)
    if given.get("image") is None:
        if theirs.get("image") is not None:
            environment["image"] = theirs["image"]
        secrets = ((theirs.get("pod_spec") or {}).get("spec") or {}).get("imagePullSecrets")
        if secrets:
            pod = dict(given.get("pod_spec") or {})
            spec = dict(pod.get("spec") or {})
            spec["imagePullSecrets"] = [*(spec.get("imagePullSecrets") or []), *secrets]
            environment["pod_spec"] = {**pod, "spec": spec}
    if given.get("registry_auth") is None and theirs.get("registry_auth") is not None:
        environment["registry_auth"] = theirs["registry_auth"]
    if environment != given:
        data["environment"] = environment
    try:
        checked = TaskConfig.model_validate({**cfg.model_dump(mode="json"), **data})
    except ValidationError as exc:  # an experiment stored before a check it would now fail
        problem = exc.errors()[0].get("msg")
        raise InvalidArgument.at(
            "config",
            f"the experiments' image or registry_auth do not fit a TensorBoard ({problem}); give them in the config",
        ) from None
    return checked.model_dump(mode="json", include=set(data))


def _not_found(field: str, message: str) -> NotFound:
    return NotFound(f"{field}: {message}", fields=[{"field": field, "message": message}])


def best_trials(s: Session, exp: models.Experiment) -> list[int]:
    """The experiment's trials a TensorBoard shows: all of them, or its best TRIALS_PER_EXPERIMENT by the
    searcher metric (those without one last), in id order."""
    T = models.Trial
    searcher = (exp.config or {}).get("searcher") or {}
    smaller = searcher.get("smaller_is_better", True) is not False
    order = T.best_metric.asc() if smaller else T.best_metric.desc()
    ids = s.scalars(
        select(T.id)
        .where(T.experiment_id == exp.id)
        .order_by(T.best_metric.is_(None), order, T.id)
        .limit(TRIALS_PER_EXPERIMENT)
    ).all()
    return sorted(ids)


def storage_root(config: dict[str, Any] | None) -> str | None:
    """The host directory of an experiment's shared_fs (or directory) checkpoint storage, under which Determined's Core
    API writes <cluster id>/tensorboard/experiment/<id>/trial/<id>/; None for other storage (its trials
    are shown from the stored metrics)."""
    storage = experiment_storage(config)
    if (storage.get("type") or "shared_fs") != "shared_fs" or not storage.get("host_path"):
        return None
    host = os.path.expanduser(str(storage["host_path"]))
    return posixpath.normpath(posixpath.join(host, str(storage.get("storage_path") or "")))


def _runs_source() -> bytes:
    return resources.files("pedl.launch").joinpath("tensorboard_runs.py").read_bytes()


def _file(path: str, content: bytes) -> dict[str, Any]:
    return {"path": path, "type": 48, "mode": 0o644, "content": base64.b64encode(content).decode()}


def entrypoint(task: Any) -> list[str]:
    return launched(["--http", f"/proxy/{task.id}/"], argv(task.id, task.config.get("tensorboard_args") or []))


def argv(task_id: str, extra: list[str]) -> list[str]:
    """tensorboard_runs.py adds --logdir; the flags are TensorBoard 2.x's (Determined's launcher gives the
    same path prefix, --bind_all and --load_fast=false)."""
    return [
        "python3",
        RUNS_PATH,
        "--plan",
        PLAN_PATH,
        "--",
        "python3",
        "-m",
        "tensorboard.main",
        "--port",
        "{port}",
        "--bind_all",
        f"--path_prefix=/proxy/{task_id}",
        "--load_fast=false",
        *extra,
    ]

"""Continuing an ended single-trial experiment (det e continue): the override config is merged into the
experiment's config (its original config stays as the user sent it), the experiment becomes ACTIVE
again and its trial gets a new run from its latest checkpoint, with restarts counted from zero.

As Determined: only an ended experiment (COMPLETED, CANCELED, ERROR) is continued, its searcher must
stay `single`, and `project`/`workspace` cannot change this way. pedl does not continue the unfinished
trials of grid or random searches, which Determined 0.38.1 does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.experiment_config import parse_experiment_config
from pedl.config.loading import parse_yaml_text
from pedl.errors import InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments.listing import reported_state
from pedl.master.experiments.service import effective_config, get
from pedl.master.identity.authz import require_owner
from pedl.master.lifecycle import allocations, search_progress
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import ENDED_EXPERIMENT, CheckpointState, ExperimentState, TrialState
from pedl.master.lifecycle.transitions import set_experiment_state, set_trial_state
from pedl.scheduling.searcher import make_searcher

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

FIXED = ("project", "workspace")  # Determined: `det experiment move` changes these
LENGTHS = ("max_length", "min_validation_period", "min_checkpoint_period")  # replaced whole, not merged
STORAGE_KEPT = ("save_experiment_best", "save_trial_best", "save_trial_latest")  # the storage's only changes


def merge(base: dict[str, Any], override: dict[str, Any], path: str = "") -> dict[str, Any]:
    """`override` over `base`: mappings merge key by key; any other value (a list too) replaces. A
    length, and a hyperparameter given with its `type` or as a bare value, replaces whole."""
    out = dict(base)
    for key, value in override.items():
        old = out.get(key)
        whole = key in LENGTHS or (path == "hyperparameters" and (not isinstance(value, dict) or "type" in value))
        if isinstance(value, dict) and isinstance(old, dict) and not whole:
            out[key] = merge(old, value, f"{path}.{key}" if path else key)
        else:
            out[key] = value
    return out


def _override(text: str | None, fx: ClusterEffects) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    data = parse_yaml_text(text, "overrideConfig", limits=fx.config.limits)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidArgument.at("overrideConfig", "must be a YAML mapping of config keys")
    for key in FIXED:
        if key in data:
            raise InvalidArgument.at(
                f"overrideConfig.{key}",
                f"'{key}' cannot change when continuing an experiment; the experiment keeps its own",
            )
    storage = data.get("checkpoint_storage")
    if isinstance(storage, dict):
        moved = sorted(k for k in storage if k not in STORAGE_KEPT)
        if moved:
            raise InvalidArgument.at(
                f"overrideConfig.checkpoint_storage.{moved[0]}",
                "the trial resumes from a checkpoint in the storage it has: only "
                f"{', '.join(STORAGE_KEPT)} can change when continuing",
            )
    elif storage is not None:
        raise InvalidArgument.at("overrideConfig.checkpoint_storage", "must be a mapping")
    return data


def _latest_checkpoint(s: Session, trial: models.Trial) -> str | None:
    """The trial's newest checkpoint whose files are kept (garbage collection may have deleted the
    one it last reported)."""
    C = models.Checkpoint
    return s.scalar(
        select(C.uuid)
        .where(C.trial_id == trial.id, C.state == CheckpointState.COMPLETED)
        .order_by(C.steps_completed.desc(), C.report_time.desc())
        .limit(1)
    )


def continue_experiment(
    fx: ClusterEffects, s: Session, who: Caller, experiment_id: int, override_text: str | None
) -> models.Experiment:
    """Inside Controller.run: check, merge, and queue the trial's new run."""
    exp = get(s, experiment_id)
    require_owner(who, exp.owner_id, f"continue experiment {experiment_id}")
    state = reported_state(s, exp).removeprefix("STATE_")
    if exp.state not in ENDED_EXPERIMENT:
        raise InvalidArgument(
            f"experiment {experiment_id} is {state}: only an experiment that has ended "
            "(COMPLETED, CANCELED or ERROR) can be continued"
        )
    searcher = (exp.config.get("searcher") or {}).get("name")
    if searcher != "single":
        raise InvalidArgument(
            f"experiment {experiment_id} uses the {searcher} searcher: only a single-trial "
            "experiment (searcher.name: single) can be continued"
        )
    override = _override(override_text, fx)
    merged = merge(exp.config, override)
    if (merged.get("searcher") or {}).get("name") != "single":
        raise InvalidArgument.at("overrideConfig.searcher.name", "must stay single when continuing")
    cfg = parse_experiment_config(merged, "the continued experiment's config", limits=fx.config.limits)
    full = effective_config(fx.config, cfg)
    trials = list(s.scalars(select(models.Trial).where(models.Trial.experiment_id == exp.id)))
    if len(trials) != 1:
        raise InvalidArgument(
            f"experiment {experiment_id} has {len(trials)} trials: a single-trial experiment "
            "with its one trial can be continued"
        )
    [trial] = trials
    now = fx.now
    # the single searcher's trial, now of the merged config, is open again
    seed = int(exp.searcher_state.get("seed", 0))
    [request] = make_searcher(cfg, seed=seed).initial().create
    old = exp.searcher_state.get("state") or {}
    exp.searcher_state = {
        **exp.searcher_state,
        "state": {**old, "created": 1, "closed": [], "live": [trial.request_id], "exhausted": True},
    }
    exp.config = full
    exp.resource_pool = full["resources"]["resource_pool"]
    exp.end_time, exp.end_reason = None, None
    changed = ", ".join(_leaves(override)) or "nothing"
    set_experiment_state(s, now, exp, ExperimentState.ACTIVE, f"continued by {who.user.username} (changed: {changed})")

    trial.hparams = request.hparams
    trial.target_length = cfg.searcher.trial_length
    trial.latest_checkpoint = _latest_checkpoint(s, trial)
    trial.restarts, trial.end_time, trial.end_reason = 0, None, None
    # the progress it reported was of the target it had
    trial.summary_metrics = {k: v for k, v in (trial.summary_metrics or {}).items() if k != "progress"}
    set_trial_state(
        s,
        now,
        trial,
        TrialState.QUEUED,
        "its experiment was continued: a new run from "
        + (f"checkpoint {trial.latest_checkpoint}" if trial.latest_checkpoint else "the start"),
    )
    search_progress.recompute(s, exp, make_searcher(cfg, seed=seed, state=exp.searcher_state["state"]))
    allocations.new(fx, s, exp, trial)
    return exp


def _leaves(data: dict[str, Any], path: str = "") -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        name = f"{path}.{key}" if path else str(key)
        out += _leaves(value, name) if isinstance(value, dict) and value else [name]
    return out


def continue_by(ctx: MasterContext, who: Caller, experiment_id: int, override_text: str | None) -> None:
    """POST /api/v1/experiments/continue, under the cluster lock."""
    ctx.controller.run(lambda s: continue_experiment(ctx.controller, s, who, experiment_id, override_text))
    ctx.controller.wake()

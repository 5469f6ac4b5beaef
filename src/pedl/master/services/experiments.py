"""Experiments: create (validate config, store the model definition, start the searcher), query,
and the user actions kill / pause / activate, which go through the cluster controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pedl.config.checkpoint_storage import merge_storage
from pedl.config.experiment_config import ExperimentConfig, parse_experiment_config
from pedl.errors import Conflict, InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.lifecycle import ExperimentState
from pedl.master.searcher.limits import check_trial_count
from pedl.master.services import experiment_flow, model_definitions, storage_roots
from pedl.master.services.authz import require_owner
from pedl.master.services.transitions import record_event

if TYPE_CHECKING:
    from pedl.master.cluster.controller import Controller


def effective_config(ctl: Controller, cfg: ExperimentConfig) -> dict[str, Any]:
    """The fully defaulted config stored on the experiment and handed to trials."""
    master = ctl.ctx.config
    pool_name = cfg.resources.resource_pool or (
        master.default_compute_resource_pool if cfg.resources.slots_per_trial > 0 else master.default_aux_resource_pool)
    pool = master.pool(pool_name)
    if pool is None:
        names = ", ".join(p.pool_name for p in master.resource_pools)
        raise InvalidArgument(f"resources.resource_pool: no resource pool named {pool_name!r} (pools: {names})",
                              fields=[{"field": "resources.resource_pool", "message": "unknown pool"}])
    if pool.max_slots_per_trial and cfg.resources.slots_per_trial > pool.max_slots_per_trial:
        raise InvalidArgument(
            f"resources.slots_per_trial: {cfg.resources.slots_per_trial} exceeds pool {pool_name}'s limit of "
            f"{pool.max_slots_per_trial}", fields=[{"field": "resources.slots_per_trial", "message": "too many"}])
    data = cfg.model_dump(mode="json")
    data["resources"]["resource_pool"] = pool_name
    data["resources"]["priority"] = cfg.resources.priority or pool.scheduler.default_priority
    data["checkpoint_storage"] = merge_storage(
        master.effective_checkpoint_storage().model_dump(mode="json"),
        cfg.checkpoint_storage.model_dump(mode="json") if cfg.checkpoint_storage is not None else None)
    storage_roots.confine_experiment_storage(master, data["checkpoint_storage"])
    return data


def create(ctl: Controller, s: Session, owner: models.User, *, config_text: str, files: Any, activate: bool,
           validate_only: bool = False, parent_id: int | None = None, project_id: int | None = None) -> models.Experiment | dict:
    if not isinstance(config_text, str) or not config_text.strip():
        raise InvalidArgument("config: the experiment config is required (YAML text)",
                              fields=[{"field": "config", "message": "required"}])
    cfg = parse_experiment_config(config_text, limits=ctl.ctx.config.limits)
    full = effective_config(ctl, cfg)
    check_trial_count(cfg, ctl.ctx.config.limits.max_trials_per_experiment)
    tgz, size, count = model_definitions.files_to_tgz(files, ctl.ctx.config.limits.max_model_definition_bytes)
    if validate_only:
        return full
    now = ctl.now
    exp = models.Experiment(
        name=cfg.name or "Experiment (unnamed)", description=cfg.description, owner_id=owner.id,
        state=ExperimentState.ACTIVE.value if activate else ExperimentState.PAUSED.value, config=full,
        original_config=config_text, searcher_state={}, progress=0.0, resource_pool=full["resources"]["resource_pool"],
        start_time=now, archived=False, parent_id=parent_id, project_id=project_id or 1)
    s.add(exp)
    s.flush()
    if not cfg.name:
        exp.name = f"Experiment {exp.id}"
    s.add(models.ModelDefinition(experiment_id=exp.id, archive=tgz, size_bytes=size, file_count=count))
    record_event(s, now, "experiment", exp.id, f"created by {owner.username} ({count} files, {size} bytes)",
                 to_state=exp.state)
    experiment_flow.start_searcher(ctl, s, exp)
    return exp


def get(s: Session, experiment_id: int) -> models.Experiment:
    exp = s.get(models.Experiment, experiment_id)
    if exp is None:
        raise NotFound(f"experiment {experiment_id} not found")
    return exp


def list_page(s: Session, *, offset: int, limit: int, archived: bool | None, usernames: list[str],
              states: list[str], newest_first: bool = False) -> tuple[list[models.Experiment], int]:
    q = select(models.Experiment)
    if archived is not None:
        q = q.where(models.Experiment.archived.is_(archived))
    if usernames:
        ids = select(models.User.id).where(models.User.username.in_(usernames))
        q = q.where(models.Experiment.owner_id.in_(ids))
    if states:
        q = q.where(models.Experiment.state.in_(states))
    total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
    order = models.Experiment.id.desc() if newest_first else models.Experiment.id
    rows = list(s.scalars(q.order_by(order).offset(offset).limit(limit if limit > 0 else None)))
    return rows, total


def trial_counts(s: Session, experiment_ids: list[int]) -> dict[int, int]:
    if not experiment_ids:
        return {}
    rows = s.execute(select(models.Trial.experiment_id, func.count()).where(
        models.Trial.experiment_id.in_(experiment_ids)).group_by(models.Trial.experiment_id))
    return {eid: n for eid, n in rows}


def events(s: Session, exp: models.Experiment, after_id: int = 0, limit: int = 500) -> list[models.Event]:
    trial_ids = [str(t) for t in s.scalars(select(models.Trial.id).where(models.Trial.experiment_id == exp.id))]
    q = select(models.Event).where(
        ((models.Event.entity_type == "experiment") & (models.Event.entity_id == str(exp.id)))
        | ((models.Event.entity_type == "trial") & (models.Event.entity_id.in_(trial_ids))),
        models.Event.id > after_id).order_by(models.Event.id).limit(limit)
    return list(s.scalars(q))


# the states a user action applies to (a repeat is a no-op); kill applies to every state
_ACTION_FROM = {"pause": {ExperimentState.ACTIVE, ExperimentState.PAUSED},
                "activate": {ExperimentState.ACTIVE, ExperimentState.PAUSED}}


def act(ctl: Controller, who: Caller, experiment_id: int, action: str) -> None:
    """kill, pause or activate: by the experiment's owner or an admin."""
    fn = {"kill": experiment_flow.kill, "pause": experiment_flow.pause, "activate": experiment_flow.activate}[action]

    def run(s: Session) -> None:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"{action} experiment {experiment_id}")
        allowed = _ACTION_FROM.get(action)
        if allowed is not None and exp.state not in allowed:
            state = exp.state.removeprefix("STATE_")
            raise Conflict(f"experiment {experiment_id} is {state}: only "
                           f"{' or '.join(a.removeprefix('STATE_') for a in sorted(allowed))} experiments "
                           f"can be {'paused' if action == 'pause' else 'activated'}")
        fn(ctl, s, exp)

    ctl.run(run)
    ctl.wake()

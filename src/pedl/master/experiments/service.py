"""Experiments: create (validate config, store the model definition, start the searcher), query,
and the user actions kill / pause / activate, which go through the cluster controller."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pedl.config.checkpoint_storage import directory_host_path, merge_storage
from pedl.config.experiment_config import ExperimentConfig, parse_experiment_config
from pedl.config.master_config import MasterConfig
from pedl.config.task_container import container_spec
from pedl.errors import Conflict, InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.checkpoints import service as checkpoints_service
from pedl.master.checkpoints import storage_roots
from pedl.master.checkpoints import totals as checkpoint_totals
from pedl.master.cluster.wait_reasons import static_pool_warning
from pedl.master.db import models
from pedl.master.experiments import listing as experiment_listing
from pedl.master.experiments import to_wire, warm_start
from pedl.master.experiments.labels import joined as joined_labels
from pedl.master.experiments.listing import ExperimentQuery, ExperimentStats
from pedl.master.identity.authz import require_owner, require_user
from pedl.master.lifecycle import experiment_actions, progression
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import AgentState, ExperimentState, TrialState
from pedl.master.lifecycle.transitions import record_event
from pedl.master.tasks import bind_mount_roots, model_definitions
from pedl.master.trials import service as trials_service
from pedl.master.trials import to_wire as trials_to_wire
from pedl.master.wire.experiment import Event, Experiment
from pedl.master.wire.trial import Trial
from pedl.master.workspaces import projects, templates
from pedl.master.workspaces import workspace_storage as workspace_storage_of
from pedl.scheduling.searcher.limits import check_trial_count

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def effective_config(
    master: MasterConfig, cfg: ExperimentConfig, workspace_storage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The fully defaulted config stored on the experiment and handed to trials. Its checkpoint_storage is
    its own over its workspace's (when that has one) over the master's."""
    pool_name = cfg.resources.resource_pool or (
        master.default_compute_resource_pool if cfg.resources.slots_per_trial > 0 else master.default_aux_resource_pool
    )
    pool = master.pool(pool_name)
    if pool is None:
        names = ", ".join(p.pool_name for p in master.resource_pools)
        raise InvalidArgument(
            f"resources.resource_pool: no resource pool named {pool_name!r} (pools: {names})",
            fields=[{"field": "resources.resource_pool", "message": "unknown pool"}],
        )
    if pool.max_slots_per_trial and cfg.resources.slots_per_trial > pool.max_slots_per_trial:
        raise InvalidArgument(
            f"resources.slots_per_trial: {cfg.resources.slots_per_trial} exceeds pool {pool_name}'s limit of "
            f"{pool.max_slots_per_trial}",
            fields=[{"field": "resources.slots_per_trial", "message": "too many"}],
        )
    data = cfg.model_dump(mode="json")
    data["resources"]["resource_pool"] = pool_name
    data["resources"]["priority"] = cfg.resources.priority or pool.scheduler.default_priority
    data["checkpoint_storage"] = merge_storage(
        workspace_storage_of.base_for(master, workspace_storage),
        cfg.checkpoint_storage.model_dump(mode="json") if cfg.checkpoint_storage is not None else None,
    )
    if data["checkpoint_storage"].get("type") == "directory":
        data["checkpoint_storage"] = _with_host_path(master, pool_name, cfg, data["checkpoint_storage"])
    storage_roots.confine_experiment_storage(master, data["checkpoint_storage"])
    bind_mount_roots.check(data.get("bind_mounts") or [], master.security.bind_mounts)
    return data


def _with_host_path(master: MasterConfig, pool: str, cfg: ExperimentConfig, storage: dict[str, Any]) -> dict[str, Any]:
    """A directory storage with the host directory its trials' files are in (the master deletes and
    serves them there): given, or the path itself for process tasks, or below a covering bind mount."""
    if storage.get("host_path"):
        return storage
    container = container_spec(master.task_defaults(pool), cfg.environment, cfg.bind_mounts)
    host = directory_host_path(storage["container_path"], container)
    if host is None:
        raise InvalidArgument.at(
            "checkpoint_storage.container_path",
            f"{storage['container_path']} is in the task's container and no bind mount covers "
            "it, so its checkpoints would go with the container: add a bind mount, or give "
            "host_path",
        )
    return {**storage, "host_path": host}


def create(
    fx: ClusterEffects,
    s: Session,
    owner: models.User,
    *,
    config_text: str,
    files: Any,
    activate: bool,
    validate_only: bool = False,
    parent_id: int | None = None,
    project_id: int | None = None,
    template: str | None = None,
    warnings: list[str] | None = None,
) -> models.Experiment | dict:
    """Create the experiment (its searcher makes its first trials), or with `validate_only` return
    its effective config. The named template is merged under the config before it is validated; the
    project is `project_id`, else the config's workspace/project, else project 1. What the user
    should be warned of is recorded as events and, when given, appended to `warnings`."""
    if not isinstance(config_text, str) or not config_text.strip():
        raise InvalidArgument(
            "config: the experiment config is required (YAML text)", fields=[{"field": "config", "message": "required"}]
        )
    config = templates.apply(s, template, config_text, fx.config.limits, owner) if template else config_text
    cfg = parse_experiment_config(config, limits=fx.config.limits)
    project = projects.for_experiment(s, project_id, cfg.workspace, cfg.project)
    full = effective_config(fx.config, cfg, workspace_storage_of.of_project(s, project))
    check_trial_count(cfg, fx.config.limits.max_trials_per_experiment)
    warm = warm_start.resolve(s, full["searcher"])
    if warm is not None:  # resolved now, as Determined does: the source trial may checkpoint again later
        full["searcher"]["source_checkpoint_uuid"] = warm
    tgz, size, count = model_definitions.files_to_tgz(files, fx.config.limits.max_model_definition_bytes)
    if validate_only:
        return full
    model_definitions.check_stored(
        s, owner.id, len(tgz), fx.config.limits.max_model_definition_bytes_per_user, "modelDefinition"
    )
    now = fx.now
    exp = models.Experiment(
        name=cfg.name or "Experiment (unnamed)",
        description=cfg.description,
        owner_id=owner.id,
        state=ExperimentState.ACTIVE if activate else ExperimentState.PAUSED,
        config=full,
        original_config=config_text,
        searcher_state={},
        progress=0.0,
        resource_pool=full["resources"]["resource_pool"],
        start_time=now,
        archived=False,
        parent_id=parent_id,
        project_id=project,
        labels=joined_labels(full.get("labels") or []),
    )
    s.add(exp)
    s.flush()
    if not cfg.name:
        exp.name = f"Experiment {exp.id}"
    s.add(models.ModelDefinition(experiment_id=exp.id, archive=tgz, size_bytes=size, file_count=count))
    record_event(
        s, now, "experiment", exp.id, f"created by {owner.username} ({count} files, {size} bytes)", to_state=exp.state
    )
    warning = fit_warning(fx, s, exp)
    if warning:
        record_event(s, now, "experiment", exp.id, warning, level="warning")
        if warnings is not None:
            warnings.append(warning)
    progression.start_searcher(fx, s, exp)
    return exp


def fit_warning(fx: ClusterEffects, s: Session, exp: models.Experiment) -> str | None:
    """On a pool without a provider, a warning when no agent of the pool (connected or coming back)
    could ever hold a trial; a dynamic pool launches what fits, or fails the trial at once."""
    pool = fx.config.pool(exp.resource_pool)
    if pool is None or pool.provider is not None:
        return None
    sizes = [
        len(a.slots)
        for a in s.scalars(
            select(models.Agent).where(
                models.Agent.resource_pool == exp.resource_pool,
                models.Agent.state != AgentState.GONE,
                models.Agent.enabled.is_(True),
            )
        )
    ]
    return static_pool_warning(int(exp.config["resources"]["slots_per_trial"]), exp.resource_pool, sizes)


def get(s: Session, experiment_id: int) -> models.Experiment:
    exp = s.get(models.Experiment, experiment_id)
    if exp is None:
        raise NotFound(f"experiment {experiment_id} not found")
    return exp


def list_page(s: Session, query: ExperimentQuery) -> tuple[list[models.Experiment], int]:
    return experiment_listing.page(s, query)


def events(s: Session, exp: models.Experiment, after_id: int = 0, limit: int = 500) -> list[models.Event]:
    trial_ids = [str(t) for t in s.scalars(select(models.Trial.id).where(models.Trial.experiment_id == exp.id))]
    q = (
        select(models.Event)
        .where(
            ((models.Event.entity_type == "experiment") & (models.Event.entity_id == str(exp.id)))
            | ((models.Event.entity_type == "trial") & (models.Event.entity_id.in_(trial_ids))),
            models.Event.id > after_id,
        )
        .order_by(models.Event.id)
        .limit(limit)
    )
    return list(s.scalars(q))


# the states a user action applies to (a repeat is a no-op); kill applies to every state
_ACTION_FROM = {
    "pause": {ExperimentState.ACTIVE, ExperimentState.PAUSED},
    "activate": {ExperimentState.ACTIVE, ExperimentState.PAUSED},
}


def act(ctx: MasterContext, who: Caller, experiment_id: int, action: str) -> None:
    """kill, pause or activate: by the experiment's owner or an admin."""
    fn = {"kill": experiment_actions.kill, "pause": experiment_actions.pause, "activate": experiment_actions.activate}[
        action
    ]

    def run(s: Session) -> None:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"{action} experiment {experiment_id}")
        allowed = _ACTION_FROM.get(action)
        if allowed is not None and exp.state not in allowed:
            state = exp.state.removeprefix("STATE_")
            raise Conflict(
                f"experiment {experiment_id} is {state}: only "
                f"{' or '.join(a.removeprefix('STATE_') for a in sorted(allowed))} experiments "
                f"can be {'paused' if action == 'pause' else 'activated'}"
            )
        fn(ctx.controller, s, exp)

    ctx.controller.run(run)
    ctx.controller.wake()


# What the routers call: each opens its own session or takes the cluster lock.


def _shown(
    s: Session,
    exp: models.Experiment,
    stats: dict[int, ExperimentStats] | None = None,
    places: dict[int, projects.Placement] | None = None,
) -> Experiment:
    """The experiment with its owner's username, its trials' statistics and its project and workspace."""
    owner = s.get(models.User, exp.owner_id)
    got = (stats if stats is not None else experiment_listing.stats(s, [exp])).get(exp.id, ExperimentStats())
    place = (places if places is not None else projects.placements(s, {exp.project_id})).get(exp.project_id)
    return to_wire.experiment(exp, owner.username if owner else "", got, place or projects.Placement())


@dataclass(frozen=True)
class Submitted:
    experiment: Experiment | None  # None when only validating
    config: dict[str, Any]  # the effective config
    warnings: list[str] = field(default_factory=list)  # for the user: a trial no agent of a static pool can hold


@dataclass(frozen=True)
class ExperimentPage:
    items: list[Experiment]
    total: int  # the experiments the query matches on every page


@dataclass(frozen=True)
class TrialPage:
    items: list[Trial]
    total: int  # the experiment's trials on every page


def submit(
    ctx: MasterContext,
    who: Caller,
    *,
    config_text: str,
    files: Any,
    activate: bool,
    validate_only: bool,
    parent_id: int | None,
    project_id: int | None,
    template: str | None = None,
) -> Submitted:
    """Create an experiment for the caller and wake the loop."""
    owner = require_user(who, "create experiments")

    def work(s: Session) -> Submitted:
        warnings: list[str] = []
        result = create(
            ctx.controller,
            s,
            owner,
            config_text=config_text,
            files=files,
            activate=activate,
            validate_only=validate_only,
            parent_id=parent_id,
            project_id=project_id,
            template=template,
            warnings=warnings,
        )
        if isinstance(result, dict):  # validate only
            return Submitted(None, result)
        return Submitted(_shown(s, result), result.config, warnings)

    out = ctx.controller.run(work)
    ctx.controller.wake()
    return out


def listing(ctx: MasterContext, query: ExperimentQuery) -> ExperimentPage:
    with ctx.db.read_session() as s:
        rows, total = list_page(s, query)
        stats = experiment_listing.stats(s, rows)
        places = projects.placements(s, {e.project_id for e in rows})
        return ExperimentPage([_shown(s, e, stats, places) for e in rows], total)


def describe(ctx: MasterContext, experiment_id: int) -> Experiment:
    with ctx.db.read_session() as s:
        return _shown(s, get(s, experiment_id))


def trials_page(ctx: MasterContext, experiment_id: int, offset: int, limit: int) -> TrialPage:
    """One page of the experiment's trials in id order (cut short past limits.max_listing_bytes), each with
    why it waits (when queued) and how many checkpoints it has and their bytes, and how many it has."""
    with ctx.db.session() as s:
        get(s, experiment_id)
        q = select(models.Trial).where(models.Trial.experiment_id == experiment_id)
        total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
        rows = list(s.scalars(q.order_by(models.Trial.id).offset(offset).limit(limit or None)))
        rows = trials_service.within_bytes(rows, ctx.config.limits.max_listing_bytes)
        waits = trials_service.wait_reasons(s, [t.id for t in rows if t.state == TrialState.QUEUED])
        kept = checkpoint_totals.of_trials(s, [t.id for t in rows])
        return TrialPage(
            [
                trials_to_wire.trial(t, checkpoints=kept.get(t.id, checkpoint_totals.NONE), wait_reason=waits.get(t.id))
                for t in rows
            ],
            total,
        )


CHECKPOINT_SORTS = ("report_time", "steps", "searcher_metric", "uuid", "state")


def _sorted_checkpoints(
    exp: models.Experiment,
    out: list[checkpoints_service.Trained],
    sort: str,
    descending: bool | None,
    metric: str | None,
) -> list[checkpoints_service.Trained]:
    """By a validation metric (`metric`, or the searcher's with sort "searcher_metric"): ascending or
    descending values as asked, and when not asked the searcher's best first; those without the metric
    last either way. Else by the attribute, ascending unless descending."""
    if sort == "searcher_metric" or metric:
        searcher = exp.config.get("searcher", {})
        name = metric or searcher.get("metric")
        if descending is None:
            descending = not searcher.get("smaller_is_better", True) if not metric else False

        def score(row: checkpoints_service.Trained) -> float | None:  # the wire's training.searcherMetric
            value = row.validation.get(name) if row.trial is not None and row.validation else None
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None

        scored = [(value, r) for r in out if (value := score(r)) is not None]
        with_metric = [r for _, r in sorted(scored, key=lambda pair: pair[0], reverse=descending)]
        return with_metric + [r for r in out if score(r) is None]
    key = {
        "report_time": lambda r: (r.checkpoint.report_time, r.checkpoint.steps_completed, r.checkpoint.uuid),
        "steps": lambda r: (r.checkpoint.steps_completed, r.checkpoint.report_time),
        "uuid": lambda r: r.checkpoint.uuid,
        "state": lambda r: (r.checkpoint.state, r.checkpoint.report_time),
    }[sort]
    return sorted(out, key=key, reverse=bool(descending))


def checkpoints(
    ctx: MasterContext,
    experiment_id: int | None = None,
    *,
    trial_id: int | None = None,
    limit: int = 0,
    offset: int = 0,
    sort: str = "report_time",
    descending: bool | None = None,
    metric: str | None = None,
    states: Sequence[str] = (),
) -> checkpoints_service.Page:
    """An experiment's (or one trial's) checkpoints with their trials and validation metrics, of the
    given states (none given: all), sorted (by searcher metric: best first, those without one last),
    from `offset`, the first `limit` (0: all), and how many there are."""
    C = models.Checkpoint
    with ctx.db.session() as s:
        if trial_id is not None:
            exp = get(s, trials_service.get(s, trial_id).experiment_id)
            query = select(C).where(C.trial_id == trial_id)
        elif experiment_id is not None:
            exp = get(s, experiment_id)
            query = select(C).where(C.experiment_id == exp.id)
        else:
            raise ValueError("the checkpoints of an experiment or of a trial: experiment_id or trial_id")
        if states:
            query = query.where(C.state.in_(list(states)))
        out = _sorted_checkpoints(
            exp,
            checkpoints_service.with_training(s, list(s.scalars(query.order_by(C.report_time)))),
            sort,
            descending,
            metric,
        )
        page = out[offset : offset + limit] if limit else out[offset:]
        return checkpoints_service.Page([row.wire() for row in page], len(out))


def events_of(ctx: MasterContext, experiment_id: int, after_id: int) -> list[Event]:
    """The experiment's and its trials' events past `after_id`, oldest first (the first 500)."""
    with ctx.db.session() as s:
        return [to_wire.event(ev) for ev in events(s, get(s, experiment_id), after_id)]


def best_validation_metric(ctx: MasterContext, experiment_id: int) -> float:
    """The best searcher metric any of its trials reported; NotFound before the first."""
    with ctx.db.session() as s:
        exp = get(s, experiment_id)
        smaller = exp.config.get("searcher", {}).get("smaller_is_better", True)
        agg = func.min if smaller else func.max
        value = s.scalar(select(agg(models.Trial.best_metric)).where(models.Trial.experiment_id == exp.id))
    if value is None:
        raise NotFound("no validation metric reported yet")
    return value

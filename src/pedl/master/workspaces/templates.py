"""Config templates (`det template`): a named, partial experiment config. An experiment (or a task) created
with one gets the template merged under its own config, the way Determined merges templates.

A template's config runs as whoever names it (its image, variables, mounts, entrypoint), so a user may name
only their own templates and those of an (active) admin: another user's would run that user's choices with
the caller's tokens (`usable`)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pedl.config.experiment_config import ExperimentConfig
from pedl.config.loading import parse_yaml_text
from pedl.config.storable_values import value_problems
from pedl.errors import Conflict, Forbidden, InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.identity.authz import require_owner, require_user
from pedl.master.wire.template import Template
from pedl.master.workspaces import to_wire, workspaces
from pedl.master.workspaces.workspaces import DEFAULT_ID, checked_name

if TYPE_CHECKING:
    from pedl.config.security_config import LimitsConfig
    from pedl.master.context import MasterContext


def checked_config(config: Any, limits: LimitsConfig) -> dict[str, Any]:
    """A template's config: a mapping of experiment config keys, with values both databases store,
    no larger than an experiment config may be. The rest is checked once merged into an experiment's."""
    if not isinstance(config, dict):
        raise InvalidArgument.at("config", "must be a mapping of experiment config keys")
    unknown = sorted(set(config) - set(ExperimentConfig.model_fields))
    if unknown:
        raise InvalidArgument(
            f"config.{unknown[0]}: unknown key of an experiment config",
            fields=[{"field": f"config.{k}", "message": "unknown key"} for k in unknown],
        )
    problems = value_problems(config, max_string_length=limits.max_string_length, path="config", limit=1)
    if problems:
        raise InvalidArgument.at(*problems[0])
    size = len(json.dumps(config).encode())
    if size > limits.max_config_bytes:
        raise InvalidArgument.at(
            "config", f"{size} bytes, more than the limit of {limits.max_config_bytes} (limits.max_config_bytes)"
        )
    return config


def merged(template: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """`config` over `template`, as Determined's schemas.Merge: mappings merge key by key, all the way
    down; any other value of the config (a list too) replaces the template's, and a null one leaves
    the template's. Two mappings of different `type` (a checkpoint storage, a hyperparameter) are
    one union member each: the config's stays whole."""
    out = copy.deepcopy(template)
    for key, value in config.items():
        under = out.get(key)
        if value is None and key in out:
            continue
        if (
            isinstance(value, dict)
            and isinstance(under, dict)
            and ("type" not in value or "type" not in under or value["type"] == under["type"])
        ):
            out[key] = merged(under, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def usable(s: Session, name: str, user: models.User, field: str) -> models.Template:
    """The template named `name`, if `user` may run its config: their own, or an active admin's (one of
    another user would run that user's image, variables and mounts with `user`'s tokens). An unknown
    template is a 404, another user's a 403, each naming `field`."""
    template = s.get(models.Template, name)
    if template is None:
        raise NotFound(f"{field}: no template named {name!r}", fields=[{"field": field, "message": "not found"}])
    if template.owner_id == user.id:
        return template
    owner = s.get(models.User, template.owner_id)
    if owner is not None and owner.admin and owner.active:
        return template
    whose = owner.username if owner is not None else "a deleted user"
    message = (
        f"template {name!r} belongs to {whose}: its config (image, variables, mounts) would run as you; "
        "use your own templates or an admin's"
    )
    raise Forbidden(f"{field}: {message}", fields=[{"field": field, "message": message}])


def apply(s: Session, name: str, config_text: str, limits: LimitsConfig, user: models.User) -> str | dict[str, Any]:
    """The experiment's config with the template named `name` merged under it (the text itself when
    it is not a mapping: validating it says what is wrong). The template must be `usable` by `user`."""
    template = usable(s, name, user, "template")
    data = parse_yaml_text(config_text, "experiment config", limits=limits)
    return merged(template.config, data) if isinstance(data, dict) else config_text


def shown(s: Session, rows: list[models.Template]) -> list[Template]:
    """The rows as the API shows them, with their owners' usernames."""
    owners = dict(
        s.execute(
            select(models.User.id, models.User.username).where(models.User.id.in_({t.owner_id for t in rows}))
        ).all()
    )
    return [to_wire.template(t, username=owners.get(t.owner_id, "")) for t in rows]


def get(s: Session, name: str) -> models.Template:
    template = s.get(models.Template, name)
    if template is None:
        raise NotFound(f"template {name!r} not found")
    return template


def create(ctx: MasterContext, who: Caller, name: str, config: Any, workspace_id: int) -> Template:
    """A new template of the caller's in the workspace (0: Uncategorized); a taken name is a 409."""
    owner = require_user(who, "create templates")
    checked_name(name, "name")
    checked_config(config, ctx.config.limits)
    try:
        with ctx.db.session() as s:
            if s.get(models.Workspace, workspace_id or DEFAULT_ID) is None:
                raise NotFound(
                    f"workspaceId: workspace {workspace_id} not found",
                    fields=[{"field": "workspaceId", "message": "not found"}],
                )
            if s.get(models.Template, name) is not None:
                raise _taken(name)
            now = ctx.clock.now()
            template = models.Template(
                name=name,
                workspace_id=workspace_id or DEFAULT_ID,
                owner_id=owner.id,
                config=config,
                created_at=now,
                updated_at=now,
            )
            s.add(template)
            s.flush()
            return shown(s, [template])[0]
    except IntegrityError:  # another request took the name between the check and the insert
        raise _taken(name) from None


def _taken(name: str) -> Conflict:
    return Conflict(
        f"name: a template named {name!r} exists already; `det template set` changes it",
        fields=[{"field": "name", "message": "taken"}],
    )


def set_config(ctx: MasterContext, who: Caller, name: str, config: Any) -> Template:
    """Replace the template's config: by its owner or an admin."""
    checked_config(config, ctx.config.limits)
    with ctx.db.session() as s:
        template = get(s, name)
        require_owner(who, template.owner_id, f"change template {name!r}")
        template.config = config
        template.updated_at = ctx.clock.now()
        return shown(s, [template])[0]


def remove(ctx: MasterContext, who: Caller, name: str) -> None:
    """Delete the template: by its owner or an admin. Experiments made with it keep their configs."""
    with ctx.db.session() as s:
        template = get(s, name)
        require_owner(who, template.owner_id, f"remove template {name!r}")
        s.delete(template)


def describe(ctx: MasterContext, name: str) -> Template:
    with ctx.db.read_session() as s:
        return shown(s, [get(s, name)])[0]


@dataclass(frozen=True)
class TemplateQuery:
    offset: int = 0
    limit: int = 0
    name: str | None = None  # a part of the name, any case (Determined's filter)
    workspace_ids: list[int] = field(default_factory=list)
    sort_by: str | None = None
    order_by: str | None = None


SORTS = {"SORT_BY_UNSPECIFIED": lambda: models.Template.name, "SORT_BY_NAME": lambda: models.Template.name}


@dataclass(frozen=True)
class TemplatePage:
    """One page of templates as the API sends them, how many match, and the page's limit (at most
    workspaces.MAX_PAGE, whatever the query asked)."""

    items: list[Template]
    total: int
    limit: int


def listing(ctx: MasterContext, q: TemplateQuery) -> TemplatePage:
    """One page of templates by name."""
    T = models.Template
    key = workspaces.sort_key(SORTS, q.sort_by)
    descending, limit = workspaces.is_descending(q.order_by), workspaces.page_limit(q.limit)
    stmt = select(T)
    if q.name:
        stmt = stmt.where(func.lower(T.name).contains(q.name.lower(), autoescape=True))
    if q.workspace_ids:
        stmt = stmt.where(T.workspace_id.in_(q.workspace_ids))
    with ctx.db.read_session() as s:
        total = s.scalar(select(func.count()).select_from(stmt.subquery())) or 0
        rows = list(s.scalars(stmt.order_by(key.desc() if descending else key.asc()).offset(q.offset).limit(limit)))
        return TemplatePage(shown(s, rows), total, limit)

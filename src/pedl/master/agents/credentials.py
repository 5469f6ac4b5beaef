"""Agents authenticate as themselves: an enrollment secret (the agent token, or an instance's single-use one)
admits an id without a credential, which the master then issues; an id with one is admitted with it only."""

# Only sha256 digests of credentials and instance secrets are stored: they are 256-bit random strings, which no
# dictionary reaches, so a slow password hash would add nothing. `admit` is the pure decision.

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common import agent_protocol as proto
from pedl.errors import NotFound
from pedl.master.caller_cache import Caller
from pedl.master.cluster import agent_events
from pedl.master.db import models
from pedl.master.db.base import existing
from pedl.master.identity.authz import require_admin
from pedl.master.lifecycle.states import InstanceState
from pedl.master.lifecycle.transitions import record_event

if TYPE_CHECKING:
    from pedl.master.cluster.agent_hub import AgentConnection
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

SPOT_REQUEST_PREFIX = "sir-"
ENDED = (InstanceState.TERMINATING, InstanceState.TERMINATED)

# close reasons: a WebSocket close reason holds 123 bytes, so they name no agent id
HAS_CREDENTIAL = "this agent id has a credential of its own, which this connection did not present"
WRONG_CREDENTIAL = "wrong credential for this agent id"
WRONG_TOKEN = "wrong agent token"
MISSING_TOKEN = "missing agent token"
SECRET_USED = "this instance's single-use enrollment secret was already used"
OTHER_INSTANCE = "this enrollment secret belongs to another instance"
INSTANCE_ENDED = "the instance of this enrollment secret has ended"
NOT_LAUNCHED = "the launch of this enrollment secret's instance was not recorded"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _same(offered: str, expected: str) -> bool:
    return bool(offered) and bool(expected) and hmac.compare_digest(offered.encode(), expected.encode())


@dataclass(frozen=True)
class Offer:
    """What a connection presents: its credential, an enrollment secret, and whether the development
    opt-in (security.allow_unauthenticated_loopback_agents, from a loopback peer) admits it without."""

    credential: str = ""
    secret: str = ""
    loopback_dev: bool = False


@dataclass(frozen=True)
class EnrollmentView:
    """An instance's single-use enrollment secret, as `admit` needs it."""

    bound_to: str | None  # the instance or spot request it was launched into; None: not recorded
    consumed: bool
    instance_ended: bool
    fulfilled_by: str | None = None  # the instance that fulfilled the spot request it is bound to


@dataclass(frozen=True)
class Admission:
    reason: str | None  # None: admitted; else why not (the close reason)
    issue: bool = False  # the agent gets a credential of its own now
    consume: bool = False  # the instance's single-use secret is used up now


def admit(
    agent_id: str, stored_hash: str | None, offer: Offer, cluster_secret: str, enrollment: EnrollmentView | None
) -> Admission:
    """Whether this connection may be agent `agent_id`. `stored_hash`: the digest of the id's credential,
    None when it has none; `enrollment`: the instance secret the offered secret is, if it is one."""
    if stored_hash is not None:
        if not offer.credential:
            return Admission(HAS_CREDENTIAL)
        if not hmac.compare_digest(secret_hash(offer.credential), stored_hash):
            return Admission(WRONG_CREDENTIAL)
        return Admission(None)
    # the id has no credential (a new agent, one from before credentials, or one an admin forgot): the
    # enrollment secret admits it, and it gets one
    if offer.secret:
        if _same(offer.secret, cluster_secret):
            return Admission(None, issue=True)
        if enrollment is None:
            return Admission(WRONG_TOKEN)
        if enrollment.consumed:
            return Admission(SECRET_USED)
        if enrollment.bound_to is None:
            return Admission(NOT_LAUNCHED)
        if agent_id not in (enrollment.bound_to, enrollment.fulfilled_by):
            return Admission(OTHER_INSTANCE)
        if enrollment.instance_ended:
            return Admission(INSTANCE_ENDED)
        return Admission(None, issue=True, consume=True)
    if offer.loopback_dev:
        return Admission(None, issue=True)
    return Admission(MISSING_TOKEN)


# -- the master's side ---------------------------------------------------------------------------


class Refused(Exception):
    """This connection may not be that agent; `reason` is the close reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _ended(s: Session, instance_id: str | None) -> bool:
    """Whether the instance (or spot request) a secret is bound to has ended. A spot request's own row ends
    when it is fulfilled ("fulfilled as i-..."): then the instance that fulfilled it decides."""
    if not instance_id:
        return False
    if instance_id.startswith(SPOT_REQUEST_PREFIX):
        states = list(
            s.scalars(
                select(models.Instance.state).where(
                    models.Instance.spot_request_id == instance_id, models.Instance.id != instance_id
                )
            )
        )
        if states:
            return all(state in ENDED for state in states)
    row = s.get(models.Instance, instance_id)
    return row is not None and row.state in ENDED


def _enrollment(s: Session, secret: str) -> models.InstanceEnrollment | None:
    return s.get(models.InstanceEnrollment, secret_hash(secret)) if secret else None


def _view(s: Session, agent_id: str, row: models.InstanceEnrollment, fulfilled_by: str | None) -> EnrollmentView:
    bound = row.instance_id
    if bound is not None and bound.startswith(SPOT_REQUEST_PREFIX) and fulfilled_by is None:
        instance = s.get(models.Instance, agent_id)
        if instance is not None and instance.spot_request_id == bound:
            fulfilled_by = agent_id
    ended = _ended(s, fulfilled_by) if fulfilled_by is not None else _ended(s, bound)
    return EnrollmentView(bound, row.consumed_at is not None, ended, fulfilled_by)


def known_secret(ctx: MasterContext, secret: str) -> bool:
    """Whether `secret` is an enrollment secret at all (the cluster's, or an instance's, used or not)."""
    if _same(secret, ctx.agent_token):
        return True
    with ctx.db.read_session() as s:
        return _enrollment(s, secret) is not None


def may_download(ctx: MasterContext, secret: str) -> bool:
    """The master's wheel goes to an instance's user data with its enrollment secret until it is used or
    the instance ends (after that the agent is installed), and to whoever has the cluster's."""
    if _same(secret, ctx.agent_token):
        return True
    with ctx.db.read_session() as s:
        row = _enrollment(s, secret)
        return row is not None and row.consumed_at is None and not _ended(s, row.instance_id)


def spot_instance(ctx: MasterContext, agent_id: str, offer: Offer) -> str | None:
    """When the offered secret is bound to a spot request, the instance that fulfilled it, as its pool's
    provider says (a call to the cloud, so outside the cluster lock); None otherwise."""
    if not offer.secret or _same(offer.secret, ctx.agent_token):
        return None
    with ctx.db.read_session() as s:
        row = _enrollment(s, offer.secret)
        if row is None or row.consumed_at is not None or not (row.instance_id or "").startswith(SPOT_REQUEST_PREFIX):
            return None
        instance = s.get(models.Instance, agent_id)
        if instance is not None and instance.spot_request_id == row.instance_id:
            return agent_id
        request_id, pool = row.instance_id, row.resource_pool
    provisioner = ctx.provisioners.get(pool)
    resolve = getattr(provisioner.provider, "spot_request_instance", None) if provisioner is not None else None
    if resolve is None or request_id is None:
        return None
    try:
        return resolve(request_id)
    except Exception as exc:  # a cloud error refuses this try; the agent tries again
        log.warning("cannot find the instance of spot request %s: %s", request_id, exc)
        return None


def register(
    ctx: MasterContext,
    reg: proto.Register,
    remote: str,
    offer: Offer,
    conn: AgentConnection,
    fulfilled_by: str | None = None,
) -> tuple[proto.Registered, AgentConnection | None]:
    """Admit the connection as agent `reg.agent_id` and register it, in one transaction under the cluster
    lock: the connection becomes the agent's in the hub only once admitted (so a refused one never
    displaces the agent), and a credential is issued in the same transaction that records the agent.
    Returns `registered` (with the new credential, if any) and the connection it displaced; raises
    Refused, having changed nothing."""
    ctl = ctx.controller
    displaced: list[AgentConnection | None] = []

    def change(s: Session) -> proto.Registered:
        agent = s.get(models.Agent, reg.agent_id)
        row = None if _same(offer.secret, ctx.agent_token) else _enrollment(s, offer.secret)
        view = _view(s, reg.agent_id, row, fulfilled_by) if row is not None else None
        decision = admit(
            reg.agent_id, agent.credential_hash if agent is not None else None, offer, ctx.agent_token, view
        )
        if decision.reason is not None:
            raise Refused(decision.reason)
        displaced.append(ctx.hub.attach(conn))
        registered = agent_events.registered(ctl, s, reg, remote)
        credential = None
        now = ctl.now
        if decision.issue:
            credential = new_secret()
            existing(s, models.Agent, reg.agent_id).credential_hash = secret_hash(credential)
            record_event(s, now, "agent", reg.agent_id, f"issued a credential of its own (from {remote})")
        if decision.consume and row is not None:
            row.consumed_at = now
            record_event(s, now, "agent", reg.agent_id, "enrolled with its instance's single-use secret")
        return registered.model_copy(update={"credential": credential})

    try:
        registered = ctl.run(change)
    except Refused:
        raise
    except BaseException:
        if displaced:
            ctx.hub.restore(conn, displaced[0])
        raise
    ctl.wake()
    return registered, displaced[0]


def forget(ctx: MasterContext, who: Caller, agent_id: str) -> None:
    """An admin clears an agent's credential (its file was lost): the enrollment secret then registers
    the id again and it gets a new one. Its connection, if any, is closed, so that whoever holds the id
    now must enroll again."""

    def change(s: Session) -> None:
        require_admin(who, "forget agents' credentials")
        agent = s.get(models.Agent, agent_id)
        if agent is None:
            raise NotFound(f"agentId: agent {agent_id!r} not found")
        agent.credential_hash = None
        record_event(
            s,
            ctx.clock.now(),
            "agent",
            agent_id,
            f"credential forgotten by {who.user.username}: the enrollment secret registers this id again",
            level="warning",
        )

    ctx.controller.run(change)
    ctx.hub.close(agent_id)


class InstanceSecrets:
    """The single-use enrollment secrets a pool's provider puts in its instances' user data (one per
    instance), stored as digests: issued before the launch call, bound to the instance after it."""

    def __init__(self, ctx: MasterContext, pool: str) -> None:
        self.ctx, self.pool = ctx, pool

    def issue(self, launch_token: str) -> str:
        secret = new_secret()
        with self.ctx.db.session() as s:
            s.add(
                models.InstanceEnrollment(
                    secret_hash=secret_hash(secret),
                    resource_pool=self.pool,
                    launch_token=launch_token[:64],
                    created_at=self.ctx.clock.now(),
                )
            )
        return secret

    def bind(self, secret: str, instance_id: str) -> None:
        with self.ctx.db.session() as s:
            row = _enrollment(s, secret)
            if row is not None:
                row.instance_id = instance_id

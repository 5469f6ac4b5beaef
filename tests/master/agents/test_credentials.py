"""Agents authenticate as themselves: the enrollment secret admits an id only until it has a credential
of its own, an instance's single-use secret admits that instance's agent once, and an admin can forget
a lost credential. The decision (`admit`) alone, then registration on both databases."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from pedl.clock import ManualClock
from pedl.common import agent_protocol as proto
from pedl.config.master_config import MasterConfig
from pedl.errors import Forbidden, NotFound
from pedl.master.agents import credentials as ac
from pedl.master.agents.credentials import Admission, EnrollmentView, Offer, Refused, admit, secret_hash
from pedl.master.caller_cache import Caller
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import InstanceState
from pedl.master.wiring import build_context
from pedl.version import __version__

CLUSTER = "the-clusters-enrollment-secret"


@pytest.fixture
def ctx(master_config: MasterConfig, database: Database) -> MasterContext:
    return build_context(master_config, database, ManualClock(5_000.0), cluster_id="c-1", agent_token=CLUSTER)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


# -- the decision -----------------------------------------------------------------------------


def enrollment(
    bound: str | None = "i-a", consumed: bool = False, ended: bool = False, fulfilled_by: str | None = None
) -> EnrollmentView:
    return EnrollmentView(bound, consumed, ended, fulfilled_by)


@pytest.mark.parametrize(
    ("agent_id", "stored", "offer", "view", "expected"),
    [
        # an id without a credential: the cluster's secret admits it, and it gets one
        ("a", None, Offer(secret=CLUSTER), None, Admission(None, issue=True)),
        ("a", None, Offer(secret="guess"), None, Admission(ac.WRONG_TOKEN)),
        ("a", None, Offer(), None, Admission(ac.MISSING_TOKEN)),
        ("a", None, Offer(loopback_dev=True), None, Admission(None, issue=True)),
        ("a", None, Offer(secret="guess", loopback_dev=True), None, Admission(ac.WRONG_TOKEN)),
        # a stale credential and the secret (its credential was forgotten): admitted, a new one issued
        ("a", None, Offer(credential="stale", secret=CLUSTER), None, Admission(None, issue=True)),
        # an id with a credential: only that credential, whatever else is offered
        ("a", secret_hash("mine"), Offer(credential="mine"), None, Admission(None)),
        ("a", secret_hash("mine"), Offer(secret=CLUSTER), None, Admission(ac.HAS_CREDENTIAL)),
        ("a", secret_hash("mine"), Offer(loopback_dev=True), None, Admission(ac.HAS_CREDENTIAL)),
        ("a", secret_hash("mine"), Offer(credential="theirs", secret=CLUSTER), None, Admission(ac.WRONG_CREDENTIAL)),
        # an instance's single-use secret: its own instance, once, while it lives
        ("i-a", None, Offer(secret="s"), enrollment(), Admission(None, issue=True, consume=True)),
        ("i-b", None, Offer(secret="s"), enrollment(), Admission(ac.OTHER_INSTANCE)),
        ("i-a", None, Offer(secret="s"), enrollment(consumed=True), Admission(ac.SECRET_USED)),
        ("i-a", None, Offer(secret="s"), enrollment(ended=True), Admission(ac.INSTANCE_ENDED)),
        ("i-a", None, Offer(secret="s"), enrollment(bound=None), Admission(ac.NOT_LAUNCHED)),
        (
            "i-c",
            None,
            Offer(secret="s"),
            enrollment(bound="sir-1", fulfilled_by="i-c"),
            Admission(None, issue=True, consume=True),
        ),
        ("i-d", None, Offer(secret="s"), enrollment(bound="sir-1", fulfilled_by="i-c"), Admission(ac.OTHER_INSTANCE)),
        ("i-a", secret_hash("mine"), Offer(secret="s"), enrollment(), Admission(ac.HAS_CREDENTIAL)),
    ],
)
def test_admit(
    agent_id: str, stored: str | None, offer: Offer, view: EnrollmentView | None, expected: Admission
) -> None:
    assert admit(agent_id, stored, offer, CLUSTER, view) == expected


def test_close_reasons_fit_a_websocket_close_frame() -> None:
    reasons = [
        ac.HAS_CREDENTIAL,
        ac.WRONG_CREDENTIAL,
        ac.WRONG_TOKEN,
        ac.MISSING_TOKEN,
        ac.SECRET_USED,
        ac.OTHER_INSTANCE,
        ac.INSTANCE_ENDED,
        ac.NOT_LAUNCHED,
    ]
    assert all(len(r.encode()) <= 123 for r in reasons)


# -- registration -----------------------------------------------------------------------------


def reg(agent_id: str) -> proto.Register:
    return proto.Register(
        agent_id=agent_id, hostname="h", address="10.0.0.9", slots=[proto.SlotInfo(id="0")], version=__version__
    )


def conn(loop: asyncio.AbstractEventLoop, agent_id: str) -> AgentConnection:
    return AgentConnection(agent_id=agent_id, master_url="http://m", remote_host="10.0.0.9", loop=loop)


def queued(c: AgentConnection) -> list:
    c.loop.run_until_complete(asyncio.sleep(0))
    out = []
    while not c.queue.empty():
        out.append(c.queue.get_nowait())
    return out


def test_the_first_registration_issues_a_credential_kept_as_its_digest(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    registered, old = ac.register(ctx, reg("a1"), "10.0.0.9", Offer(secret=CLUSTER), conn(loop, "a1"))
    assert old is None
    assert registered.credential and len(registered.credential) >= 40
    with ctx.db.session() as s:
        row = s.get(models.Agent, "a1")
        assert row.credential_hash == secret_hash(registered.credential)
        assert registered.credential not in repr([getattr(row, c.key) for c in models.Agent.__table__.columns])
    # with its credential it comes back, and gets none again
    again, _ = ac.register(ctx, reg("a1"), "10.0.0.9", Offer(credential=registered.credential), conn(loop, "a1"))
    assert again.credential is None


def test_the_enrollment_secret_cannot_take_a_registered_agents_id(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    """Before, any holder of the agent token registered under a connected agent's id: the master closed the
    real agent (4409) and sent the impostor its tasks."""
    real = conn(loop, "a1")
    registered, _ = ac.register(ctx, reg("a1"), "10.0.0.9", Offer(secret=CLUSTER), real)
    queued(real)
    for offer in (Offer(secret=CLUSTER), Offer(credential="guess", secret=CLUSTER), Offer(loopback_dev=True)):
        with pytest.raises(Refused) as info:
            ac.register(ctx, reg("a1"), "10.0.0.66", offer, conn(loop, "a1"))
        assert info.value.reason in (ac.HAS_CREDENTIAL, ac.WRONG_CREDENTIAL)
    assert ctx.hub.get("a1") is real
    assert queued(real) == []  # never told to close
    with ctx.db.session() as s:
        assert s.get(models.Agent, "a1").credential_hash == secret_hash(registered.credential)
    # the real agent, reconnecting with its credential, displaces its own old connection
    newer = conn(loop, "a1")
    _, old = ac.register(ctx, reg("a1"), "10.0.0.9", Offer(credential=registered.credential), newer)
    assert old is real and ctx.hub.get("a1") is newer


def test_forget_lets_the_enrollment_secret_register_the_id_again(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    first, _ = ac.register(ctx, reg("a1"), "10.0.0.9", Offer(secret=CLUSTER), conn(loop, "a1"))
    with ctx.db.session() as s:
        admin = models.User(username="root-admin", password_hash="", admin=True, created_at=1.0, modified_at=1.0)
        user = models.User(username="plain-user", password_hash="", admin=False, created_at=1.0, modified_at=1.0)
        s.add_all([admin, user])
        s.flush()
        s.expunge_all()
    with pytest.raises(Forbidden):
        ac.forget(ctx, Caller(user), "a1")
    with pytest.raises(NotFound):
        ac.forget(ctx, Caller(admin), "nobody")
    live = ctx.hub.get("a1")
    ac.forget(ctx, Caller(admin), "a1")
    assert queued(live) == [None]  # its connection is closed
    second, _ = ac.register(ctx, reg("a1"), "10.0.0.9", Offer(credential="lost", secret=CLUSTER), conn(loop, "a1"))
    assert second.credential and second.credential != first.credential
    with pytest.raises(Refused):
        ac.register(ctx, reg("a1"), "10.0.0.9", Offer(credential=first.credential), conn(loop, "a1"))


# -- instances' single-use secrets -------------------------------------------------------------


def instance(
    s,
    inst_id: str,
    state: InstanceState = InstanceState.STARTING,  # a Session
    spot_request_id: str | None = None,
) -> None:
    s.add(
        models.Instance(
            id=inst_id,
            resource_pool="default",
            provider="aws",
            instance_type="t3.micro",
            state=state,
            launched_at=1.0,
            spot_request_id=spot_request_id,
        )
    )


def test_an_instance_secret_admits_its_own_instance_once(ctx: MasterContext, loop: asyncio.AbstractEventLoop) -> None:
    secrets = ac.InstanceSecrets(ctx, "default")
    a, b = secrets.issue("launch-1"), secrets.issue("launch-1")
    secrets.bind(a, "i-a")
    secrets.bind(b, "i-b")
    with ctx.db.session() as s:
        instance(s, "i-a")
        instance(s, "i-b")
        stored = {r.secret_hash for r in s.scalars(select(models.InstanceEnrollment))}
    assert stored == {secret_hash(a), secret_hash(b)}  # digests only
    assert ac.may_download(ctx, a) and ac.may_download(ctx, b) and not ac.may_download(ctx, "guess")

    # instance A's secret cannot register instance B, nor any other id
    for other in ("i-b", "a-new-agent"):
        with pytest.raises(Refused) as info:
            ac.register(ctx, reg(other), "10.0.0.9", Offer(secret=a), conn(loop, other))
        assert info.value.reason == ac.OTHER_INSTANCE
    registered, _ = ac.register(ctx, reg("i-a"), "10.0.0.9", Offer(secret=a), conn(loop, "i-a"))
    assert registered.credential
    # used up: it neither registers again (after the credential is forgotten) nor downloads the wheel
    with ctx.db.session() as s:
        s.get(models.Agent, "i-a").credential_hash = None
    with pytest.raises(Refused) as info:
        ac.register(ctx, reg("i-a"), "10.0.0.9", Offer(secret=a), conn(loop, "i-a"))
    assert info.value.reason == ac.SECRET_USED
    assert not ac.may_download(ctx, a)
    # an instance that ended takes its unused secret with it
    with ctx.db.session() as s:
        s.get(models.Instance, "i-b").state = InstanceState.TERMINATED
    assert not ac.may_download(ctx, b)
    with pytest.raises(Refused) as info:
        ac.register(ctx, reg("i-b"), "10.0.0.9", Offer(secret=b), conn(loop, "i-b"))
    assert info.value.reason == ac.INSTANCE_ENDED


def test_a_spot_requests_secret_admits_the_instance_that_fulfilled_it(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    secrets = ac.InstanceSecrets(ctx, "default")
    secret = secrets.issue("launch-2")
    secrets.bind(secret, "sir-1")
    with ctx.db.session() as s:
        # the provisioner ends a fulfilled request's own row ("fulfilled as i-c"): i-c decides, not the request
        instance(s, "sir-1", state=InstanceState.TERMINATED)
        instance(s, "i-c", spot_request_id="sir-1")
        instance(s, "i-d", spot_request_id="sir-2")
    assert ac.may_download(ctx, secret)
    with pytest.raises(Refused):
        ac.register(ctx, reg("i-d"), "10.0.0.9", Offer(secret=secret), conn(loop, "i-d"))
    assert ac.spot_instance(ctx, "i-c", Offer(secret=secret)) == "i-c"
    registered, _ = ac.register(ctx, reg("i-c"), "10.0.0.9", Offer(secret=secret), conn(loop, "i-c"))
    assert registered.credential
    assert not ac.may_download(ctx, secret)  # used up


def test_a_spot_requests_secret_dies_with_the_instance_that_fulfilled_it(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    secrets = ac.InstanceSecrets(ctx, "default")
    secret = secrets.issue("launch-3")
    secrets.bind(secret, "sir-9")
    with ctx.db.session() as s:
        instance(s, "sir-9", state=InstanceState.TERMINATED)
        instance(s, "i-e", state=InstanceState.TERMINATED, spot_request_id="sir-9")
    assert not ac.may_download(ctx, secret)
    with pytest.raises(Refused) as info:
        ac.register(ctx, reg("i-e"), "10.0.0.9", Offer(secret=secret), conn(loop, "i-e"))
    assert info.value.reason == ac.INSTANCE_ENDED

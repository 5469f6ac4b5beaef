"""The provisioner's tables: instances it launched or adopted, the moves of consolidation and spot first,
and each pool's state that must survive a restart. Part of `models` (which imports them)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from pedl.master.db.base import Base, StateColumn
from pedl.master.lifecycle.states import InstanceState


class Instance(Base):
    """A cloud (or local) instance the master launched or adopted: what it cost and why it ended."""

    __tablename__ = "instances"
    id: Mapped[str] = mapped_column(String(255), primary_key=True)  # provider id (i-..., sir-..., local-...)
    resource_pool: Mapped[str] = mapped_column(String(255), index=True)
    provider: Mapped[str] = mapped_column(String(32))
    instance_type: Mapped[str] = mapped_column(String(64))
    spot: Mapped[bool] = mapped_column(Boolean, default=False)
    state: Mapped[InstanceState] = mapped_column(StateColumn(InstanceState), index=True)
    slots: Mapped[int] = mapped_column(Integer, default=0)
    price_per_hour: Mapped[float] = mapped_column(Float, default=0.0)
    launch_token: Mapped[str] = mapped_column(String(64), default="")
    spot_request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    launched_at: Mapped[float] = mapped_column(Float)
    registered_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    terminated_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    termination_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    interrupted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    adopted: Mapped[bool] = mapped_column(Boolean, default=False)
    # the provisioner's clocks (migration 0012), kept here so that a master restart does not reset them:
    # running with nothing held on it since when, and when its terminate was last sent to the cloud
    idle_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    terminate_sent_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the move planner empties it (migration 0013): no new work goes there; it ends once empty
    draining_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    drain_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # spot first: an on-demand instance takes no new work while spot capacity is available (its trials stay)
    cordoned_since: Mapped[float | None] = mapped_column(Float, nullable=True)


class TrialMove(Base):
    """A trial moved by consolidation, spot first or a yield to new work (migrations 0013, 0014): from
    which instances, to which (where it fitted when planned), and what it saves. The pool's disruption
    budget is counted from these rows."""

    __tablename__ = "trial_moves"
    __table_args__ = (Index("ix_trial_moves_resource_pool_planned_at", "resource_pool", "planned_at"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    resource_pool: Mapped[str] = mapped_column(String(255))
    allocation_id: Mapped[str] = mapped_column(String(160), index=True)
    trial_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    source: Mapped[str] = mapped_column(Text)  # instance ids, comma-separated
    target: Mapped[str] = mapped_column(Text)
    saving_per_hour: Mapped[float] = mapped_column(Float)
    saving: Mapped[float] = mapped_column(Float)
    reason: Mapped[str] = mapped_column(Text)
    planned_at: Mapped[float] = mapped_column(Float)
    # a yield (migration 0014): the waiting allocation the trial gave its slots to
    yield_to: Mapped[str | None] = mapped_column(String(160), nullable=True)


class PoolProvisioning(Base):
    """What a pool's provisioner must not forget over a master restart (migration 0012): its launch
    backoff, its last provider error, and the (instance type, spot) pairs it avoids after capacity
    failures, as a JSON list of [type, spot, until]. One row per pool with a provider, written when
    they change (provisioner/pool_provisioning.py)."""

    __tablename__ = "pool_provisioning"
    resource_pool: Mapped[str] = mapped_column(String(255), primary_key=True)
    consecutive_errors: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    backoff_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    last_error_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    unavailable: Mapped[list[Any]] = mapped_column(JSON, default=list)


class InstanceEnrollment(Base):
    """A single-use enrollment secret put in one launched instance's user data (migration 0021): the master
    keeps only its sha256. It admits one agent, with the id of the instance it was launched into (or of the
    instance that fulfilled that spot request), once; and until then the wheel download."""

    __tablename__ = "instance_enrollments"
    secret_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    resource_pool: Mapped[str] = mapped_column(String(255))
    launch_token: Mapped[str] = mapped_column(String(64), index=True)
    # the instance (or spot request) launched with it; None until the launch call returned
    instance_id: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    created_at: Mapped[float] = mapped_column(Float)
    consumed_at: Mapped[float | None] = mapped_column(Float, nullable=True)

"""SQLAlchemy models. The database is the source of truth: everything the master knows is a row.

Times are float seconds since the epoch (the injected clock's unit), rendered as RFC 3339 by the API.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from pedl.master.db.base import Base, Id, StateColumn  # the shared declarative base, as models.Base
from pedl.master.lifecycle.states import AgentState, AllocationState, CheckpointState, ExperimentState, TrialState


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(255), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    display_name: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    modified_at: Mapped[float] = mapped_column(Float)
    # Determined's agent user group (migration 0016): the uid/gid and names the user's tasks run as
    # on the agents; all four set, or none (then the agent's default)
    agent_uid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    agent_gid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    agent_user: Mapped[str | None] = mapped_column(String(255), nullable=True)
    agent_group: Mapped[str | None] = mapped_column(String(255), nullable=True)


class UserSession(Base):
    __tablename__ = "user_sessions"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)


class Workspace(Base):
    """Determined's workspace: a named set of projects (migration 0007). Workspace 1, Uncategorized,
    exists in every database and cannot take new projects (immutable, as in Determined)."""

    __tablename__ = "workspaces"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255))
    # the name case-folded: names are unique whatever their case (Determined's rule), the same on both databases
    name_key: Mapped[str] = mapped_column(String(1024), unique=True)
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)  # None: made by the migration
    immutable: Mapped[bool] = mapped_column(Boolean, default=False)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    # Determined's checkpointStorageConfig, as given (migration 0015): under the config of its experiments
    checkpoint_storage: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class WorkspacePin(Base):
    """A workspace a user pinned (migration 0015); Determined pins a new workspace for its creator."""

    __tablename__ = "workspace_pins"
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)


class Project(Base):
    """Determined's project: experiments belong to one (project 1, Uncategorized, by default). Names
    are unique within their workspace, whatever their case."""

    __tablename__ = "projects"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"))
    name: Mapped[str] = mapped_column(String(255))
    name_key: Mapped[str] = mapped_column(String(1024))
    description: Mapped[str] = mapped_column(Text, default="")
    key: Mapped[str] = mapped_column(String(16))
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    immutable: Mapped[bool] = mapped_column(Boolean, default=False)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    notes: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)  # [{name, contents}] (migration 0015)

    __table_args__ = (UniqueConstraint("workspace_id", "name_key"),)


class Template(Base):
    """A named config template (`det template set`): merged under the config of an experiment created
    with it. Its owner (creator) or an admin changes it."""

    __tablename__ = "templates"
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"))
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class Experiment(Base):
    __tablename__ = "experiments"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(512))
    description: Mapped[str] = mapped_column(Text, default="")
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    state: Mapped[ExperimentState] = mapped_column(StateColumn(ExperimentState), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # validated, fully defaulted
    original_config: Mapped[str] = mapped_column(Text)  # the text the user sent
    searcher_state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    resource_pool: Mapped[str] = mapped_column(String(255))
    start_time: Mapped[float] = mapped_column(Float)
    end_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    parent_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # a project (workspaces/projects.py checks it: no foreign key, see migration 0007)
    project_id: Mapped[int] = mapped_column(Integer, default=1, index=True)
    notes: Mapped[str] = mapped_column(Text, default="")
    end_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # between unit separators ("\x1fa\x1fb\x1f"), so that LIKE matches a whole label (labels.py)
    labels: Mapped[str] = mapped_column(Text, default="", server_default="")
    # its job's place in its pool's queue among equal priorities (det job update --ahead-of/--behind-of);
    # None: its submission time, start_time (cluster/job_queue.py)
    queue_position: Mapped[float | None] = mapped_column(Float, nullable=True)


class ModelDefinition(Base):
    __tablename__ = "model_definitions"
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True)
    archive: Mapped[bytes] = mapped_column(LargeBinary)  # a gzipped tar of the model directory
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    file_count: Mapped[int] = mapped_column(Integer)


class Trial(Base):
    __tablename__ = "trials"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"), index=True)
    request_id: Mapped[str] = mapped_column(String(64))  # the searcher's handle
    task_id: Mapped[str] = mapped_column(String(128), unique=True)
    hparams: Mapped[dict[str, Any]] = mapped_column(JSON)
    seed: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[TrialState] = mapped_column(StateColumn(TrialState), index=True)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    run_id: Mapped[int] = mapped_column(Integer, default=0)  # bumps on every (re)start
    start_time: Mapped[float] = mapped_column(Float)
    end_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    total_batches: Mapped[int] = mapped_column(BigInteger, default=0)
    latest_checkpoint: Mapped[str | None] = mapped_column(String(64), nullable=True)
    best_metric: Mapped[float | None] = mapped_column(Float, nullable=True)
    summary_metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    end_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    target_length: Mapped[int] = mapped_column(BigInteger, default=0)
    # searcher.source_trial_id / source_checkpoint_uuid, resolved at creation (experiments/warm_start.py)
    warm_start_checkpoint: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Allocation(Base):
    """One attempt to run a task on slots. A trial has one per (re)start."""

    __tablename__ = "allocations"
    id: Mapped[str] = mapped_column(String(160), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(128), index=True)
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), nullable=True, index=True)
    name: Mapped[str] = mapped_column(String(512))
    state: Mapped[AllocationState] = mapped_column(StateColumn(AllocationState), index=True)
    resource_pool: Mapped[str] = mapped_column(String(255))
    slots_needed: Mapped[int] = mapped_column(Integer)
    priority: Mapped[int] = mapped_column(Integer)
    assignment: Mapped[list[Any]] = mapped_column(JSON, default=list)  # [{agent_id, slot_ids}]
    session_token_hash: Mapped[str] = mapped_column(String(64), index=True)
    owner_id: Mapped[int] = mapped_column(Integer)
    queued_at: Mapped[float] = mapped_column(Float)
    assigned_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    exit_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    preempt_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    kill_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # first call the task made with its own token; None: it never reached the master (dummy mode)
    contacted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # why a PENDING allocation waits (cluster/wait_reasons.py), as the last scheduling pass saw it
    wait_kind: Mapped[str | None] = mapped_column(String(40), nullable=True)
    wait_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    wait_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the port the task's service listens on, on its (chief) agent: the target of /proxy/{task_id}/
    proxy_port: Mapped[int | None] = mapped_column(Integer, nullable=True)


class GenericTask(Base):
    """A command, notebook, shell or TensorBoard (Determined's NTSC tasks; migration 0020), owned by the
    user who started it and run by one allocation (Allocation.task_id is its id, trial_id is None):
    its state and times are that allocation's."""

    __tablename__ = "generic_tasks"
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # command | notebook | shell | tensorboard
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    workspace_id: Mapped[int] = mapped_column(Integer, index=True)  # deleting a workspace kills its tasks
    description: Mapped[str] = mapped_column(String(512))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # as it runs: the defaults and the template applied
    context: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)  # a gzipped tar of its files
    experiment_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)  # a TensorBoard's
    trial_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)
    secrets: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # a shell's key pair
    start_time: Mapped[float] = mapped_column(Float)
    # the last time its service was used (the proxy, or the task's own report): idle_timeout counts from it
    last_activity: Mapped[float | None] = mapped_column(Float, nullable=True)


class Agent(Base):
    __tablename__ = "agents"
    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(255))
    address: Mapped[str] = mapped_column(String(255))
    resource_pool: Mapped[str] = mapped_column(String(255))
    slots: Mapped[list[Any]] = mapped_column(JSON)  # [{id, type, brand, uuid}]
    state: Mapped[AgentState] = mapped_column(StateColumn(AgentState))
    version: Mapped[str] = mapped_column(String(64))
    registered_at: Mapped[float] = mapped_column(Float)
    last_heartbeat: Mapped[float] = mapped_column(Float)
    disconnected_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    draining: Mapped[bool] = mapped_column(Boolean, default=False)
    container_runtime: Mapped[str] = mapped_column(String(16), default="", server_default="")  # "docker" or ""
    # sha256 of the agent's own credential, issued at its first registration (migration 0021); None until
    # then, or after an admin forgot it: the enrollment secret then registers this id again
    credential_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Metric(Base):
    __tablename__ = "metrics"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    trial_run_id: Mapped[int] = mapped_column(Integer)
    group: Mapped[str] = mapped_column("metric_group", String(64))
    steps_completed: Mapped[int] = mapped_column(BigInteger)
    report_time: Mapped[float] = mapped_column(Float)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)

    __table_args__ = (Index("ix_metrics_trial_group_steps", "trial_id", "metric_group", "steps_completed"),)


class MetricDigestMark(Base):
    """How far a (trial, group)'s digests reach: every report of a step up to through_step is folded
    into them (metrics/digests.py). complete is false when names were left undigested (too
    many, or too long): a name with no digest is then read from the reports themselves."""

    __tablename__ = "metric_digest_marks"
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True)
    group: Mapped[str] = mapped_column("metric_group", String(64), primary_key=True)
    through_step: Mapped[int] = mapped_column(BigInteger)
    complete: Mapped[bool] = mapped_column(Boolean, default=True)


class MetricDigest(Base):
    """One metric series' digest (metrics/series_digest.py encodes it), valid with its mark."""

    __tablename__ = "metric_digests"
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True)
    group: Mapped[str] = mapped_column("metric_group", String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class MetricDigestReset(Base):
    """A report stored at or before a step already digested (a restarted trial replaying steps): the
    (trial, group)'s digests that reach from_step are stale until built again."""

    __tablename__ = "metric_digest_resets"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    group: Mapped[str] = mapped_column("metric_group", String(64))
    from_step: Mapped[int] = mapped_column(BigInteger)

    __table_args__ = (Index("ix_metric_digest_resets_trial_group", "trial_id", "metric_group"),)


class Checkpoint(Base):
    __tablename__ = "checkpoints"
    uuid: Mapped[str] = mapped_column(String(64), primary_key=True)
    trial_id: Mapped[int | None] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), nullable=True, index=True)
    experiment_id: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    task_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    allocation_id: Mapped[str | None] = mapped_column(String(160), nullable=True)
    state: Mapped[CheckpointState] = mapped_column(StateColumn(CheckpointState))
    report_time: Mapped[float] = mapped_column(Float)
    steps_completed: Mapped[int] = mapped_column(BigInteger, default=0)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    resources: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # relpath -> size
    storage: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # where it lives
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    # what is deleting its files now (migration 0022): a checkpoint GC task's id, or the master itself
    # (checkpoints/deletion.py); the checkpoint is PARTIALLY_DELETED and not served meanwhile
    deleting_by: Mapped[str | None] = mapped_column(String(128), nullable=True)


class TaskLog(Base):
    __tablename__ = "task_logs"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(128))
    trial_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    allocation_id: Mapped[str | None] = mapped_column(String(160), nullable=True)
    agent_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    timestamp: Mapped[float] = mapped_column(Float)
    level: Mapped[str] = mapped_column(String(32), default="LOG_LEVEL_INFO")
    stdtype: Mapped[str] = mapped_column(String(16), default="stdout")
    source: Mapped[str] = mapped_column(String(16), default="task")  # task | master | agent
    message: Mapped[str] = mapped_column(Text)

    __table_args__ = (
        Index("ix_task_logs_trial_id_id", "trial_id", "id"),
        Index("ix_task_logs_task_id_id", "task_id", "id"),
    )


class Event(Base):
    """Every lifecycle transition and notable happening, with time and reason."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    entity_type: Mapped[str] = mapped_column(String(32))  # experiment | trial | allocation | agent | pool
    entity_id: Mapped[str] = mapped_column(String(255))
    time: Mapped[float] = mapped_column(Float)
    from_state: Mapped[str | None] = mapped_column(String(40), nullable=True)
    to_state: Mapped[str | None] = mapped_column(String(40), nullable=True)
    level: Mapped[str] = mapped_column(String(16), default="info")
    message: Mapped[str] = mapped_column(Text, default="")

    __table_args__ = (Index("ix_events_entity", "entity_type", "entity_id", "id"),)


class ClusterInfo(Base):
    __tablename__ = "cluster_info"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    cluster_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)


# -- the model registry (migration 0008; model_registry/service.py) ------------------------------


class RegisteredModel(Base):
    """A named model of the registry (Determined's model): its versions are checkpoints. The owner
    (its creator) or an admin changes it; workspace_id is a plain integer (workspace 1 by default)."""

    __tablename__ = "registered_models"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    workspace_id: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class ModelLabel(Base):
    """One label of a model, at its place in the model's list (a row each, so that listings filter on
    labels and count them in SQL)."""

    __tablename__ = "model_labels"
    model_id: Mapped[int] = mapped_column(ForeignKey("registered_models.id", ondelete="CASCADE"), primary_key=True)
    label: Mapped[str] = mapped_column(String(255), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)

    __table_args__ = (Index("ix_model_labels_label", "label"),)


class ModelVersion(Base):
    """Version `version` (1, 2, 3... per model) of a registered model: a checkpoint, which checkpoint
    garbage collection then never deletes."""

    __tablename__ = "model_versions"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("registered_models.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    checkpoint_uuid: Mapped[str] = mapped_column(ForeignKey("checkpoints.uuid"), index=True)
    name: Mapped[str] = mapped_column(String(255), default="")
    comment: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[str] = mapped_column(Text, default="")
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, default=dict)
    labels: Mapped[list[Any]] = mapped_column(JSON, default=list)
    owner_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (UniqueConstraint("model_id", "version", name="uq_model_versions_model_version"),)


class TrialSourceInfo(Base):
    """A trial that reported using a checkpoint (or a model version: model_id and model_version set),
    Determined's trial source info; the SDK's get_metrics of that checkpoint or version reads its reports.
    type is INFERENCE or FINE_TUNING. Deleting the version clears model_id and model_version."""

    __tablename__ = "trial_source_infos"
    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"))
    checkpoint_uuid: Mapped[str] = mapped_column(ForeignKey("checkpoints.uuid", ondelete="CASCADE"), index=True)
    type: Mapped[str] = mapped_column(String(16))
    model_id: Mapped[int | None] = mapped_column(Id, nullable=True)
    model_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (
        UniqueConstraint("trial_id", "checkpoint_uuid", "type", name="uq_trial_source_infos_trial_checkpoint_type"),
        ForeignKeyConstraint(
            ["model_id", "model_version"], ["model_versions.model_id", "model_versions.version"], ondelete="SET NULL"
        ),
        Index("ix_trial_source_infos_model_version", "model_id", "model_version"),
    )


# the provisioner's tables live in their own module; imported here so that `models.Instance` and
# Base.metadata hold them as they hold every other table
from pedl.master.db.provisioning_models import (  # noqa: E402, F401
    Instance,
    InstanceEnrollment,
    PoolProvisioning,
    TrialMove,
)

"""master.yaml: port, data directory, database, agents, resource pools, checkpoint storage."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, Tag, field_validator, model_validator

from pedl.config.checkpoint_storage import S3Location, storage_discriminator
from pedl.config.durations import Duration
from pedl.config.loading import FieldProblems, StrictModel, load_yaml_file
from pedl.config.metrics_retention import MetricsRetentionConfig
from pedl.config.provider_config import ProviderConfig, legacy_provisioner
from pedl.config.proxy_config import ProxyConfig
from pedl.config.security_config import LimitsConfig, SecurityConfig
from pedl.config.server_config import ServerConfig
from pedl.config.task_container import TaskContainerDefaults

TLS_DEFAULT_PORT = 8443


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "pedl"


class DatabaseConfig(StrictModel):
    """PostgreSQL connection; without a `db:` section the master uses SQLite in the data dir."""

    host: str = Field(default="127.0.0.1", description="PostgreSQL host")
    port: int = Field(default=5432, ge=1, le=65535)
    user: str = Field(default="postgres")
    password: str = Field(default="")
    name: str = Field(default="pedl", description="database name")
    ssl_mode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = "prefer"


class SharedFSStorage(StrictModel):
    type: Literal["shared_fs"] = "shared_fs"
    host_path: str = Field(..., description="directory visible to the master and every agent")
    storage_path: str | None = Field(default=None, description="subdirectory of host_path for checkpoints")
    save_experiment_best: int = Field(default=0, ge=0)
    save_trial_best: int = Field(default=1, ge=0)
    save_trial_latest: int = Field(default=1, ge=0)


class S3Storage(S3Location):
    save_experiment_best: int = Field(default=0, ge=0)
    save_trial_best: int = Field(default=1, ge=0)
    save_trial_latest: int = Field(default=1, ge=0)


# master.yaml has no `directory`: the master's own storage is one it reaches itself
CheckpointStorageConfig = Annotated[
    Annotated[SharedFSStorage, Tag("shared_fs")] | Annotated[S3Storage, Tag("s3")],
    storage_discriminator("shared_fs", "s3"),
]


class SchedulerConfig(StrictModel):
    type: Literal["priority", "fair_share"] = "priority"
    fitting_policy: Literal["best", "worst"] = "best"
    preemption: bool = False
    default_priority: int = Field(default=42, ge=1, le=99)


class ResourcePoolConfig(StrictModel):
    pool_name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    max_slots_per_trial: int | None = Field(default=None, ge=1)
    provider: ProviderConfig | None = Field(
        default=None, description="dynamic agents for this pool (type: aws or local); none means static agents"
    )
    task_container_defaults: TaskContainerDefaults | None = Field(
        default=None,
        description="the master's task_container_defaults for this pool's tasks, with the fields set here "
        "in place of the master's",
    )


class MasterConfig(StrictModel):
    port: int = Field(
        default=8080,
        ge=0,
        le=65535,
        description="HTTP port (8443 when security.tls is set, as in the seeds); 0 picks a free one",
    )
    host: str = Field(default="0.0.0.0", description="address to bind")
    data_dir: Path = Field(default_factory=default_data_dir)
    db: DatabaseConfig | None = None
    cluster_name: str = ""
    agent_token: str | None = Field(
        default=None,
        description="the enrollment secret a new agent presents, after which the master issues it a "
        "credential of its own; without it the master generates one on first start and keeps "
        "it in data_dir/agent_token (mode 0600; a file others may read is refused)",
    )
    agent_heartbeat_interval: Duration = Field(default=5.0, description="how often agents send heartbeats")
    agent_heartbeat_timeout: Duration = Field(default=15.0, description="silence after which an agent is disconnected")
    agent_reconnect_wait: Duration = Field(default=25.0, description="how long a disconnected agent keeps its tasks")
    task_kill_grace_period: Duration = Field(default=10.0, description="SIGTERM to SIGKILL delay for killed tasks")
    rendezvous_port_range: str = Field(
        default="29400-29999",
        pattern=r"^\d{1,5}-\d{1,5}$",
        description="ports the chief of each trial offers torch.distributed (C10D_PORT, MASTER_PORT)",
    )
    session_ttl: Duration = Field(default=7 * 24 * 3600.0, description="lifetime of a login token")
    checkpoint_storage: CheckpointStorageConfig | None = Field(
        default=None, description="default storage; shared_fs under data_dir/checkpoints when unset"
    )
    resource_pools: list[ResourcePoolConfig] = Field(default_factory=lambda: [ResourcePoolConfig(pool_name="default")])
    checkpoint_gc_tasks: bool = Field(
        default=True,
        description="delete checkpoints on a filesystem (shared_fs, directory) in a checkpoint GC task on an "
        "agent of the experiment's pool when one is up, as Determined does; false: the master "
        "always deletes them itself",
    )
    default_compute_resource_pool: str = "default"
    default_aux_resource_pool: str = "default"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    task_container_defaults: TaskContainerDefaults = Field(
        default_factory=TaskContainerDefaults, description="image, mounts and variables every task gets"
    )
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    proxy: ProxyConfig = Field(default_factory=ProxyConfig, description="bounds on the proxy to tasks' services")
    server: ServerConfig = Field(
        default_factory=ServerConfig, description="read timeouts and connection caps of the master's HTTP server"
    )
    metrics_retention: MetricsRetentionConfig | None = Field(
        default=None, description="thin old training reports of every experiment (each may set its own); none: keep all"
    )

    @field_validator("data_dir", mode="after")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(os.path.expanduser(str(v)))

    @model_validator(mode="before")
    @classmethod
    def _legacy_provisioner(cls, data: Any) -> Any:
        """Seeds 000/001 configure dynamic agents with a top-level `provisioner:` section; it
        becomes the provider of the pool named `default`."""
        if not isinstance(data, dict) or "provisioner" not in data:
            return data
        data = dict(data)
        prov = data.pop("provisioner")
        if not isinstance(prov, dict):
            raise ValueError("provisioner: must be a mapping")
        pools = [
            dict(p) if isinstance(p, dict) else p for p in data.get("resource_pools") or [{"pool_name": "default"}]
        ]
        target: dict[str, Any] | None = next(
            (p for p in pools if isinstance(p, dict) and p.get("pool_name") == "default"), None
        )
        if target is None:
            target = {"pool_name": "default"}
            pools.append(target)
        if target.get("provider"):
            raise ValueError("provisioner: the pool 'default' already has a provider; use one form, not both")
        target["provider"] = legacy_provisioner(prov)
        data["resource_pools"] = pools
        return data

    @model_validator(mode="after")
    def _check_pools(self) -> MasterConfig:
        names = [p.pool_name for p in self.resource_pools]
        if not names:
            raise FieldProblems([("resource_pools", "at least one pool is required")])
        problems = [
            (f"resource_pools[{i}].pool_name", f"duplicate pool_name {name!r}")
            for i, name in enumerate(names)
            if name in names[:i]
        ]
        for key in ("default_compute_resource_pool", "default_aux_resource_pool"):
            if getattr(self, key) not in names:
                problems.append((key, f"no resource pool named {getattr(self, key)!r}"))
        if problems:
            raise FieldProblems(problems)
        return self

    @model_validator(mode="after")
    def _bind_mounts_allowed(self) -> MasterConfig:
        """The task_container_defaults' bind mounts lie in security.bind_mounts.allowed_roots."""
        policy = self.security.bind_mounts
        found = [
            policy.problem([m.model_dump() for m in defaults.bind_mounts], f"{where}.bind_mounts")
            for where, defaults in [
                ("task_container_defaults", self.task_container_defaults),
                *(
                    (f"resource_pools[{i}].task_container_defaults", p.task_container_defaults)
                    for i, p in enumerate(self.resource_pools)
                ),
            ]
            if defaults is not None
        ]
        if any(found):
            raise FieldProblems([problem for problem in found if problem is not None])
        return self

    @model_validator(mode="after")
    def _tls_port(self) -> MasterConfig:
        if self.security.tls.enabled and "port" not in self.model_fields_set:
            self.port = TLS_DEFAULT_PORT
        return self

    def port_range(self) -> range:
        lo, hi = (int(x) for x in self.rendezvous_port_range.split("-"))
        return range(lo, hi + 1)

    def effective_checkpoint_storage(self) -> SharedFSStorage | S3Storage:
        return self.checkpoint_storage or SharedFSStorage(host_path=str(self.data_dir / "checkpoints"))

    def pool(self, name: str) -> ResourcePoolConfig | None:
        return next((p for p in self.resource_pools if p.pool_name == name), None)

    def task_defaults(self, pool_name: str) -> TaskContainerDefaults:
        """The task_container_defaults of a pool's tasks: the master's, with the fields the pool's own
        section sets in their place (a pool not configured, or without a section: the master's)."""
        pool = self.pool(pool_name)
        own = pool.task_container_defaults if pool is not None else None
        if own is None:
            return self.task_container_defaults
        return self.task_container_defaults.model_copy(
            update={name: getattr(own, name) for name in own.model_fields_set}
        )

    def database_url(self) -> str:
        if self.db is None:
            return f"sqlite:///{self.data_dir / 'pedl.db'}"
        from sqlalchemy.engine import URL

        return URL.create(
            "postgresql+psycopg",
            username=self.db.user,
            password=self.db.password or None,
            host=self.db.host,
            port=self.db.port,
            database=self.db.name,
            query={"sslmode": self.db.ssl_mode},
        ).render_as_string(hide_password=False)


def load_master_config(path: str | Path | None) -> MasterConfig:
    if path is None:
        return MasterConfig()
    return load_yaml_file(MasterConfig, path)

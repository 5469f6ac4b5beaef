"""master.yaml's `security:` and `limits:` sections: who may connect and how, and the bounds that
keep every request's work small. Defaults are safe for a master others can reach."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from pedl.config.checkpoint_storage import parse_storage_root
from pedl.config.durations import Duration
from pedl.config.loading import DEFAULT_MAX_CONFIG_BYTES, DEFAULT_MAX_NESTING_DEPTH, FieldProblems, StrictModel

MiB = 1024 * 1024


class LoginRateLimit(StrictModel):
    """Failed logins slow down the next ones from the same place, never from elsewhere: past a bound a
    login answers 429 with Retry-After, before the password is checked. Successful logins are not
    counted; a login through the master's console socket (data_dir/console.sock) is never held up."""

    failures_per_user: int = Field(
        default=5,
        ge=1,
        le=1_000_000,
        description="failed logins of one user name from one client address before each further one waits: "
        "1 s, doubling with each failure up to max_delay. Another address is not held up",
    )
    max_delay: Duration = Field(
        default=300.0, gt=0, description="the longest wait between failed logins of one user name from one address"
    )
    forget_after: Duration = Field(
        default=3600.0,
        gt=0,
        description="the failures of a user name from an address are forgotten this long after the "
        "last one (or at once, by a successful login)",
    )
    failures_per_address: int = Field(
        default=20, ge=1, le=1_000_000, description="failed logins from one client address, any user names, per window"
    )
    window: Duration = Field(default=60.0, description="length of the sliding window of failures_per_address")


class TlsConfig(StrictModel):
    """The master serves HTTPS and WSS with this certificate and key (PEM files), on port 8443
    unless `port` is set. Both or neither."""

    cert: Path | None = Field(default=None, description="PEM certificate chain, the server's own first")
    key: Path | None = Field(default=None, description="PEM private key of that certificate, unencrypted (mode 0600)")

    @property
    def enabled(self) -> bool:
        return self.cert is not None

    @field_validator("cert", "key")
    @classmethod
    def _readable(cls, path: Path | None) -> Path | None:
        if path is None:
            return None
        path = path.expanduser()
        try:
            path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
        return path

    @model_validator(mode="after")
    def _pair(self) -> TlsConfig:
        if (self.cert is None) != (self.key is None):
            missing = "key" if self.key is None else "cert"
            raise FieldProblems([(f"security.tls.{missing}", "missing: give both cert and key, or neither")])
        if self.cert is not None and self.key is not None:
            from pedl.common.tls import PairError, check_server_pair  # cryptography, only with TLS

            try:
                check_server_pair(self.cert.read_bytes(), self.key.read_bytes())
            except PairError as exc:
                path = self.cert if exc.field == "cert" else self.key
                raise FieldProblems([(f"security.tls.{exc.field}", f"{path}: {exc.message}")]) from None
        return self


POSIX_NAME = r"^[A-Za-z0-9._][A-Za-z0-9._-]{0,253}\$?$"


class DefaultTaskUser(StrictModel):
    """Determined's security.default_task: who the tasks of users not linked with an agent user
    (`det user link-with-agent-user`) run as on the agents."""

    user: str = Field(..., pattern=POSIX_NAME, description="the user name tasks see (`id -u -n`)")
    uid: int = Field(..., ge=0, le=2**31 - 1)
    group: str = Field(..., pattern=POSIX_NAME, description="the group name tasks see (`id -g -n`)")
    gid: int = Field(..., ge=0, le=2**31 - 1)


# A user with no agent user group runs their tasks as uid (and gid) task_uid_base + their user id. The
# default is the start of 1879048192-2147483647, which systemd's UID allocation (UIDS-GIDS.md) leaves to no
# one: above container ranges, below the ids some tools read as negative.
TASK_UID_BASE = 0x70000000
TASK_UIDS = 2**24  # user ids below this have a uid of their own
ID_MAX = 2**31 - 1  # Determined's proto fields are int32


class BindMountPolicy(StrictModel):
    """Which host paths tasks may bind-mount (bind_mounts of experiments and tasks, and the pools'
    task_container_defaults): checked when a config is submitted, and again by the agent on the path
    resolved (links followed)."""

    allowed_roots: list[str] | None = Field(
        default=None,
        description="absolute directories a host_path must lie in; null: anywhere, []: no host bind mounts",
    )

    @field_validator("allowed_roots")
    @classmethod
    def _absolute(cls, roots: list[str] | None) -> list[str] | None:
        if roots is None:
            return None
        for root in roots:
            if not root.startswith("/") or "\x00" in root:
                raise ValueError(f"{root!r} must be an absolute path")
        return [os.path.normpath(root) for root in roots]

    def problem(self, mounts: Iterable[Mapping[str, Any]], field: str = "bind_mounts") -> tuple[str, str] | None:
        """(`field`[i].host_path, why) for the first mount outside every root, judged on the path as
        written (the agent judges it resolved); None when all are inside, or any path is allowed."""
        roots = self.allowed_roots
        if roots is None:
            return None
        for i, mount in enumerate(mounts):
            host = os.path.normpath(str(mount.get("host_path") or ""))
            if not any(host == root or host.startswith(root.rstrip("/") + "/") for root in roots):
                why = (
                    f"{host} is outside the host paths this cluster allows to mount "
                    f"(security.bind_mounts.allowed_roots: {', '.join(roots)})"
                    if roots
                    else "host bind mounts are not allowed on this cluster (security.bind_mounts.allowed_roots: [])"
                )
                return f"{field}[{i}].host_path", why
        return None


class PasswordHashing(StrictModel):
    """The argon2id costs of stored password hashes (each login verifies one). The defaults are
    argon2-cffi's (RFC 9106's low-memory choice); the floor is OWASP's minimum (19 MiB, two passes). A
    hash keeps the costs it was made with, so a change applies to passwords set from then on."""

    time_cost: int = Field(default=3, ge=2, le=10, description="passes over the memory")
    memory_kib: int = Field(default=65536, ge=19456, le=4 * 1024 * 1024, description="memory per hash, KiB")
    parallelism: int = Field(default=4, ge=1, le=16, description="lanes (threads)")


def _network(entry: str) -> str:
    """An entry of security.trusted_proxies: an address or a CIDR network."""
    try:
        ipaddress.ip_network(entry, strict=False)
    except ValueError:
        raise ValueError(f"{entry!r} is not an IP address or CIDR network") from None
    return entry


class SecurityConfig(StrictModel):
    allow_unauthenticated_loopback_agents: bool = Field(
        default=False, description="accept agents on loopback addresses without the agent token (development only)"
    )
    metrics_access: Literal["public", "authenticated", "admin"] = Field(
        default="authenticated", description="who may read /metrics: anyone, any logged-in user, or admins"
    )
    login_rate_limit: LoginRateLimit = Field(default_factory=LoginRateLimit)
    tls: TlsConfig = Field(default_factory=TlsConfig, description="serve HTTPS and WSS: {cert, key}")
    task_uid_base: int | None = Field(
        default=TASK_UID_BASE,
        ge=1000,
        le=ID_MAX - TASK_UIDS + 1,
        description="a user with no agent user group runs their tasks, on agents that run as root, as uid and gid "
        "task_uid_base + their user id (named pedl-user-<username> in the task), so no two users' tasks "
        "share a uid; null: as default_task, else as the agent's own user (Determined's behaviour)",
    )
    default_task: DefaultTaskUser | None = Field(
        default=None,
        description="Determined's key, used only with task_uid_base: null: who the tasks of users without an "
        "agent user group run as, all of them as one user: {user, uid, group, gid}",
    )
    bind_mounts: BindMountPolicy = Field(
        default_factory=BindMountPolicy, description="which host paths tasks may bind-mount: {allowed_roots}"
    )
    password_hashing: PasswordHashing = Field(
        default_factory=PasswordHashing,
        description="argon2id costs of password hashes: {time_cost, memory_kib, parallelism}",
    )
    fresh_login_window: Duration = Field(
        default=300.0,
        description="a user may change their own password without the old one only with a "
        "token issued this recently (Determined's clients send no old password)",
    )
    checkpoint_storage_roots: list[str] = Field(
        default_factory=list,
        description="where experiments may store checkpoints besides the master's own checkpoint_storage: "
        "absolute directories (shared_fs) and s3://bucket[/prefix] (s3)",
    )

    s3_endpoint_urls: list[str] = Field(
        default_factory=list,
        description="S3-compatible endpoints (MinIO, moto) an experiment's s3 storage may name besides the "
        "master's own checkpoint_storage.endpoint_url; an experiment naming another is refused, "
        "so the master never sends signed requests to a host a user chose",
    )

    trusted_proxies: list[Annotated[str, AfterValidator(_network)]] = Field(
        default_factory=list,
        description="addresses or CIDR networks of reverse proxies in front of the master; only a connection from "
        "one of them may name its client in X-Forwarded-For (and its scheme in X-Forwarded-Proto). "
        "None by default: the client is the connection's peer, whatever the headers say",
    )

    @model_validator(mode="after")
    def _task_uids_apart(self) -> SecurityConfig:
        """No uid of default_task among the users' own: its tasks would share one with a user's."""
        base, task = self.task_uid_base, self.default_task
        if (
            base is not None
            and task is not None
            and (base <= task.uid < base + TASK_UIDS or base <= task.gid < base + TASK_UIDS)
        ):
            raise FieldProblems(
                [
                    (
                        "security.default_task.uid",
                        f"uid and gid {base} to {base + TASK_UIDS - 1} are the users' own (security.task_uid_base)",
                    )
                ]
            )
        return self

    @field_validator("checkpoint_storage_roots")
    @classmethod
    def _roots(cls, roots: list[str]) -> list[str]:
        for root in roots:
            parse_storage_root(root)  # a ValueError names the entry
        return roots


class LimitsConfig(StrictModel):
    """Bounds on what one request may ask of the master."""

    max_trials_per_experiment: int = Field(
        default=10_000, ge=1, le=10_000_000, description="searcher.max_trials and the size of a grid"
    )
    min_live_trials_per_experiment: int = Field(
        default=16,
        ge=1,
        le=10_000,
        description="trials are created as the pool has room for them (its capacity in trials, and "
        "max_concurrent_trials); an experiment may still have this many live, queued where the pool is "
        "smaller (Determined's default max_concurrent_trials is 16)",
    )
    max_request_body_bytes: int = Field(
        default=4 * MiB, ge=1024, description="any request body except an experiment's model definition upload"
    )
    max_anonymous_body_bytes: int = Field(
        default=4096,
        ge=512,
        le=1024 * 1024,
        description="the body of a route anyone may call without logging in (a login is a few hundred bytes)",
    )
    max_model_definition_bytes: int = Field(
        default=96 * MiB, ge=1024, description="an experiment create request with its model definition"
    )
    max_config_bytes: int = Field(
        default=DEFAULT_MAX_CONFIG_BYTES,
        ge=1024,
        description="an experiment config after YAML anchors and aliases are expanded",
    )
    max_nesting_depth: int = Field(
        default=DEFAULT_MAX_NESTING_DEPTH, ge=4, le=1000, description="nesting of JSON bodies and YAML configs"
    )
    max_string_length: int = Field(
        default=64 * 1024, ge=256, description="any single string in a request (names are held to 255 characters)"
    )
    max_metric_names_per_trial: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description="distinct metric names one trial may report, over all its groups (Determined has no such "
        "limit); a report that would take a trial past it is refused",
    )
    max_listing_bytes: int = Field(
        default=4 * MiB,
        ge=64 * 1024,
        description="what a listing that grows with the metrics reported carries: a project's columns and metric "
        "ranges (past it the list is cut and says so: truncated) and a page of trials (cut short: "
        "its pagination's endIndex says where the next starts)",
    )
    max_concurrent_uploads_per_user: int = Field(
        default=2, ge=1, le=1000, description="experiment creates with a model definition one user may send at once"
    )
    max_concurrent_uploads: int = Field(
        default=8, ge=1, le=10_000, description="experiment creates with a model definition being read at once, in all"
    )
    max_model_definition_bytes_per_user: int = Field(
        default=2 * 1024 * MiB,
        ge=1024,
        description="the model definitions the master stores of one user's experiments (compressed); an "
        "experiment create past it is refused, and deleting experiments frees it",
    )
    max_zero_slot_tasks_per_user: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="live commands, notebooks, shells and TensorBoards of no slots one user may have",
    )
    max_zero_slot_tasks_per_agent: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="zero-slot allocations the scheduler places on one agent (Determined: 100)",
    )
    max_log_follows_per_user: int = Field(
        default=16, ge=1, le=10_000, description="log streams one user may follow at once (follow=true)"
    )

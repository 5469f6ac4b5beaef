"""master.yaml's `security:` and `limits:` sections: who may connect and how, and the bounds that
keep every request's work small. Defaults are safe for a master others can reach."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from pedl.config.checkpoint_storage import parse_storage_root
from pedl.config.durations import Duration
from pedl.config.loading import DEFAULT_MAX_CONFIG_BYTES, DEFAULT_MAX_NESTING_DEPTH, FieldProblems, StrictModel

MiB = 1024 * 1024


class LoginRateLimit(StrictModel):
    """Failed logins counted over a sliding window; past a bound, logins answer 429 with
    Retry-After until the window has room again. Successful logins are not counted."""

    failures_per_user: int = Field(5, ge=1, le=1_000_000, description="failed logins per user name per window")
    failures_per_address: int = Field(
        20, ge=1, le=1_000_000, description="failed logins per client address per window")
    window: Duration = Field(60.0, description="length of the sliding window")


class TlsConfig(StrictModel):
    """The master serves HTTPS and WSS with this certificate and key (PEM files), on port 8443
    unless `port` is set. Both or neither."""

    cert: Path | None = Field(None, description="PEM certificate chain, the server's own first")
    key: Path | None = Field(None, description="PEM private key of that certificate, unencrypted (mode 0600)")

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


class PasswordHashing(StrictModel):
    """The argon2id costs of stored password hashes (each login verifies one). The defaults are
    argon2-cffi's (RFC 9106's low-memory choice); the floor is OWASP's minimum (19 MiB, two passes). A
    hash keeps the costs it was made with, so a change applies to passwords set from then on."""

    time_cost: int = Field(3, ge=2, le=10, description="passes over the memory")
    memory_kib: int = Field(65536, ge=19456, le=4 * 1024 * 1024, description="memory per hash, KiB")
    parallelism: int = Field(4, ge=1, le=16, description="lanes (threads)")


class SecurityConfig(StrictModel):
    allow_unauthenticated_loopback_agents: bool = Field(
        False, description="accept agents on loopback addresses without the agent token (development only)")
    metrics_access: Literal["public", "authenticated", "admin"] = Field(
        "authenticated", description="who may read /metrics: anyone, any logged-in user, or admins")
    login_rate_limit: LoginRateLimit = Field(default_factory=LoginRateLimit)
    tls: TlsConfig = Field(default_factory=TlsConfig, description="serve HTTPS and WSS: {cert, key}")
    default_task: DefaultTaskUser | None = Field(
        None, description="who the tasks of users without an agent user group run as: {user, uid, group, gid}; "
                          "unset, they run as the agent's own user (root for an agent running as root, "
                          "which is Determined's default)")
    password_hashing: PasswordHashing = Field(
        default_factory=PasswordHashing, description="argon2id costs of password hashes: {time_cost, memory_kib, "
                                                     "parallelism}")
    fresh_login_window: Duration = Field(
        300.0, description="a user may change their own password without the old one only with a "
                           "token issued this recently (Determined's clients send no old password)")
    checkpoint_storage_roots: list[str] = Field(
        default_factory=list,
        description="where experiments may store checkpoints besides the master's own checkpoint_storage: "
                    "absolute directories (shared_fs) and s3://bucket[/prefix] (s3)")

    s3_endpoint_urls: list[str] = Field(
        default_factory=list,
        description="S3-compatible endpoints (MinIO, moto) an experiment's s3 storage may name besides the "
                    "master's own checkpoint_storage.endpoint_url; an experiment naming another is refused, "
                    "so the master never sends signed requests to a host a user chose")

    @field_validator("checkpoint_storage_roots")
    @classmethod
    def _roots(cls, roots: list[str]) -> list[str]:
        for root in roots:
            parse_storage_root(root)  # a ValueError names the entry
        return roots


class LimitsConfig(StrictModel):
    """Bounds on what one request may ask of the master."""

    max_trials_per_experiment: int = Field(
        10_000, ge=1, le=10_000_000, description="searcher.max_trials and the size of a grid")
    min_live_trials_per_experiment: int = Field(
        16, ge=1, le=10_000,
        description="trials are created as the pool has room for them (its capacity in trials, and "
                    "max_concurrent_trials); an experiment may still have this many live, queued where the pool is "
                    "smaller (Determined's default max_concurrent_trials is 16)")
    max_request_body_bytes: int = Field(
        4 * MiB, ge=1024, description="any request body except an experiment's model definition upload")
    max_model_definition_bytes: int = Field(
        96 * MiB, ge=1024, description="an experiment create request with its model definition")
    max_config_bytes: int = Field(
        DEFAULT_MAX_CONFIG_BYTES, ge=1024,
        description="an experiment config after YAML anchors and aliases are expanded")
    max_nesting_depth: int = Field(
        DEFAULT_MAX_NESTING_DEPTH, ge=4, le=1000, description="nesting of JSON bodies and YAML configs")
    max_string_length: int = Field(
        64 * 1024, ge=256, description="any single string in a request (names are held to 255 characters)")

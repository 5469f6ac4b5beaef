"""The provider contract. Every provider manages exactly the instances that carry its pool's tags
and never touches anything else.

- `list_instances()` returns every non-terminated instance and open spot request that carries the
  pool's tags. It is a single cloud call (or two, with spot) and returns fast.
- `launch(request)` starts `count` instances of one type. It is idempotent by `request.token`:
  calling it again with the same token returns the same instances instead of new ones. It returns
  as soon as the cloud accepted the request (instances are still booting).
- `terminate(ids)` ends instances (or cancels spot requests, ids starting with "sir-"). An id that
  is already gone is success. Ids without the pool's tags are refused, never touched.
- Errors are `CloudError`s, classified once, here in the provider layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


class CloudState(StrEnum):
    REQUESTED = "requested"  # an open spot request, not yet an instance
    PENDING = "pending"  # launched, booting
    RUNNING = "running"
    TERMINATING = "terminating"


@dataclass(frozen=True)
class CloudInstance:
    id: str
    instance_type: str
    state: CloudState
    launched_at: float
    spot: bool = False
    spot_request_id: str | None = None
    address: str = ""


@dataclass(frozen=True)
class LaunchRequest:
    instance_type: str
    count: int
    spot: bool
    token: str  # idempotency key
    slots: int = 0  # the agent's slot count for this type


class CloudErrorKind(StrEnum):
    CAPACITY = "capacity"  # InsufficientInstanceCapacity, spot capacity not available
    QUOTA = "quota"  # instance limits, vCPU limits
    THROTTLED = "throttled"  # RequestLimitExceeded
    INVALID_CONFIG = "invalid_config"  # bad AMI, subnet, key pair, ...
    UNAVAILABLE = "unavailable"  # endpoint unreachable, 5xx
    UNKNOWN = "unknown"


@dataclass
class CloudError(Exception):
    kind: CloudErrorKind
    message: str
    code: str = ""
    details: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" + (f" ({self.code})" if self.code else "")


class ForeignInstance(Exception):
    """Raised when asked to touch an instance that does not carry the pool's tags."""


class InstanceSecrets(Protocol):
    """Single-use enrollment secrets for providers whose instances boot from user data (which every process
    on the instance can read): one per instance, stored as a digest before the launch call that carries
    it (`issue`), tied to the instance (or spot request) once the call returned it (`bind`)."""

    def issue(self, launch_token: str) -> str: ...

    def bind(self, secret: str, instance_id: str) -> None: ...


class Provider(Protocol):
    name: str

    def list_instances(self) -> list[CloudInstance]: ...

    def launch(self, request: LaunchRequest) -> list[CloudInstance]: ...

    def terminate(self, ids: list[str]) -> None: ...

    def close(self) -> None: ...

"""A pool provisioner's status that must survive a master restart: its launch backoff, its last
provider error and the (type, spot) pairs it avoids after capacity failures, one row per pool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from pedl.master.db import models

Unavailable = dict[tuple[str, bool], float]  # (instance type, spot) -> avoided until


@dataclass
class PoolStatus:
    """What `pedl resource-pool describe` shows about provisioning. The first four fields are stored
    (pool_provisioning); pending_slots and last_decision_at are the running master's own."""

    last_error: str | None = None
    last_error_at: float | None = None
    backoff_until: float | None = None
    consecutive_errors: int = 0
    pending_slots: int = 0
    last_decision_at: float | None = None


def load(s: Session, pool_name: str, now: float) -> tuple[PoolStatus, Unavailable]:
    """The pool's stored status and the pairs still avoided at `now` (none stored: a fresh pool)."""
    row = s.get(models.PoolProvisioning, pool_name)
    if row is None:
        return PoolStatus(), {}
    status = PoolStatus(
        last_error=row.last_error,
        last_error_at=row.last_error_at,
        backoff_until=row.backoff_until,
        consecutive_errors=row.consecutive_errors,
    )
    unavailable = {
        (str(itype), bool(spot)): float(until) for itype, spot, until in row.unavailable if float(until) > now
    }
    return status, unavailable


def save(s: Session, pool_name: str, status: PoolStatus, unavailable: Unavailable) -> None:
    """Store the pool's status in the session's transaction; a field that did not change is not written."""
    values: dict[str, Any] = {
        "consecutive_errors": status.consecutive_errors,
        "backoff_until": status.backoff_until,
        "last_error": status.last_error,
        "last_error_at": status.last_error_at,
        "unavailable": [[itype, spot, until] for (itype, spot), until in sorted(unavailable.items())],
    }
    row = s.get(models.PoolProvisioning, pool_name)
    if row is None:
        s.add(models.PoolProvisioning(resource_pool=pool_name, **values))
        return
    for name, value in values.items():
        if getattr(row, name) != value:
            setattr(row, name, value)

"""What every part of the running master shares: config, database, clock, agent hub, controller.

Built whole, in one place (master/wiring.py): a context never exists half-wired."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pedl.clock import Clock
from pedl.config.master_config import MasterConfig
from pedl.master.caller_cache import CallerCache
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.controller import Controller
from pedl.master.db.engine import Database
from pedl.master.identity.login_limiter import LoginLimiter
from pedl.master.identity.user_slots import UserSlots
from pedl.master.lifecycle.task_contact import TaskContact
from pedl.master.metrics.digest_queue import DigestQueue
from pedl.master.observability.master_metrics import MasterMetrics

if TYPE_CHECKING:
    from pedl.master.provisioner.provisioner import PoolProvisioner


@dataclass
class MasterContext:
    config: MasterConfig
    db: Database
    clock: Clock
    hub: AgentHub
    controller: Controller
    login_limiter: LoginLimiter
    caller_cache: CallerCache
    cluster_id: str = ""
    master_id: str = ""
    agent_token: str = ""  # what agents must present (master/agent_token.py); "" admits none
    # pool name -> its provisioner, for the pools with a provider (filled as the master starts them)
    provisioners: dict[str, PoolProvisioner] = field(default_factory=dict)
    # this master's Prometheus registry and metrics (the controller's own: master/wiring.py passes it to both)
    metrics: MasterMetrics = field(default_factory=MasterMetrics)
    # the (trial, group) pairs with metric reports not yet in their digests (metrics/digests.py)
    digest_queue: DigestQueue = field(default_factory=DigestQueue)
    # which allocations have called the master with their own token (lifecycle/task_contact.py)
    task_contact: TaskContact = field(default_factory=TaskContact)
    # model uploads being read and log streams followed, per user (identity/user_slots.py; limits: in master.yaml)
    uploads: UserSlots = field(default_factory=lambda: UserSlots("model uploads in progress"))
    log_follows: UserSlots = field(default_factory=lambda: UserSlots("followed log streams"))
    # metric streams open (api/metrics_streams.py), per user: bounded by limits.max_log_follows_per_user too
    metric_streams: UserSlots = field(default_factory=lambda: UserSlots("open metric streams"))

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
from pedl.master.observability.master_metrics import MasterMetrics
from pedl.master.services.login_limiter import LoginLimiter
from pedl.master.services.metric_digests import DigestQueue
from pedl.master.services.task_contact import TaskContact

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
    # the (trial, group) pairs with metric reports not yet in their digests (services/metric_digests.py)
    digest_queue: DigestQueue = field(default_factory=DigestQueue)
    # which allocations have called the master with their own token (services/task_contact.py)
    task_contact: TaskContact = field(default_factory=TaskContact)

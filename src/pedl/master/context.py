"""What every part of the running master shares: config, database, clock, agent hub, controller."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pedl.clock import Clock
from pedl.config.master_config import MasterConfig
from pedl.master.caller_cache import CallerCache
from pedl.master.db.engine import Database

if TYPE_CHECKING:
    from pedl.master.cluster.agent_hub import AgentHub
    from pedl.master.cluster.controller import Controller
    from pedl.master.services.login_limiter import LoginLimiter


@dataclass
class MasterContext:
    config: MasterConfig
    db: Database
    clock: Clock
    cluster_id: str = ""
    master_id: str = ""
    caller_cache: CallerCache = field(default_factory=CallerCache)
    agent_token: str = ""  # what agents must present (master/agent_token.py); "" admits none
    hub: AgentHub = field(init=False)
    controller: Controller = field(init=False)
    login_limiter: LoginLimiter = field(init=False)

"""Settings of one agent daemon, as given by `pedl agent run` or a test.

Defaults that depend on the machine (hostname, home directory, environment) resolve here, once.
"""

from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from pedl.common.master_trust import MASTER_CERT_ENV, client_ssl_context

TOKEN_ENV = "PEDL_AGENT_TOKEN"
# where an operator finds the token a master expects (said by `pedl agent run` and by refusals)
TOKEN_WHERE = ("the master's agent token is `agent_token` in its master.yaml when set, else the file "
               "<data_dir>/agent_token on the master's host (data_dir defaults to ~/.local/share/pedl)")
IMDS_ENV = "PEDL_IMDS_URL"
DEFAULT_IMDS_URL = "http://169.254.169.254"


def default_work_dir(agent_id: str) -> Path:
    return Path.home() / ".local" / "share" / "pedl" / "agent" / agent_id


@dataclass
class AgentOptions:
    master_url: str  # http(s)://host:port of the master; the socket URL is derived from it
    agent_id: str | None = None  # None: the hostname
    resource_pool: str = "default"
    slots: int | None = None  # CPU slots when no GPU is found; None: 1, 0: none
    # None: $PEDL_AGENT_TOKEN, if set; no token at all is accepted only by a master with
    # security.allow_unauthenticated_loopback_agents (development), from its own host
    token: str | None = None
    work_dir: Path | str | None = None  # None: ~/.local/share/pedl/agent/<agent_id>
    heartbeat_interval: float | None = None  # None: what the master says in `registered`
    hostname: str = field(default_factory=socket.gethostname)
    spot_watch: bool = False  # poll the metadata service for the spot interruption notice
    imds_url: str | None = None  # None: $PEDL_IMDS_URL, else the link-local address
    spot_poll_interval: float = 5.0
    # a CA file to verify an https:// master against instead of the system's CAs; None:
    # $PEDL_MASTER_CERT, if set. Tasks are given it too (PEDL_MASTER_CERT, DET_MASTER_CERT_FILE).
    cert: Path | str | None = None
    ssl_context: ssl.SSLContext | None = field(default=None, init=False, repr=False)  # https:// masters only
    # "docker": tasks that name an image run in containers (the daemon must answer); "none": such
    # tasks are not for this agent; None: docker when a daemon answers at start
    container_runtime: str | None = None

    def __post_init__(self) -> None:
        self.master_url = self.master_url.rstrip("/")
        if self.agent_id is None:
            self.agent_id = self.hostname
        if self.token is None:
            self.token = os.environ.get(TOKEN_ENV) or None
        if self.imds_url is None:
            self.imds_url = os.environ.get(IMDS_ENV) or DEFAULT_IMDS_URL
        if self.work_dir is None:
            self.work_dir = default_work_dir(self.agent_id)
        self.work_dir = Path(self.work_dir).expanduser()
        if self.slots is not None and self.slots < 0:
            raise ValueError(f"slots must be >= 0, got {self.slots}")
        if self.cert is None:
            self.cert = os.environ.get(MASTER_CERT_ENV) or None
        if self.cert is not None:
            # absolute: tasks, which run in their own directories, read the same file
            self.cert = Path(self.cert).expanduser().absolute()
        if self.container_runtime not in (None, "docker", "none"):
            raise ValueError(f"--container-runtime must be docker or none, got {self.container_runtime!r}")
        if self.master_url.startswith("https://"):
            self.ssl_context = client_ssl_context(self.cert)  # MasterCertError is a ValueError

    @property
    def id(self) -> str:
        assert self.agent_id is not None  # set in __post_init__
        return self.agent_id

    @property
    def work_path(self) -> Path:
        assert isinstance(self.work_dir, Path)  # normalised in __post_init__
        return self.work_dir

    @property
    def cert_path(self) -> Path | None:
        assert self.cert is None or isinstance(self.cert, Path)  # normalised in __post_init__
        return self.cert

    @property
    def work_dir_is_default(self) -> bool:
        """The work dir is the one derived from the id: another --id gives another directory."""
        return self.work_path == default_work_dir(self.id)

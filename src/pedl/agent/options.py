"""Settings of one agent daemon, as given by `pedl agent run` or a test.

Defaults that depend on the machine (hostname, home directory, environment) resolve here, once. The
enrollment secret taken from PEDL_AGENT_TOKEN leaves the process's environment as it is read.
"""

from __future__ import annotations

import ctypes
import os
import socket
import ssl
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pedl.common.master_trust import MASTER_CERT_ENV, client_ssl_context

TOKEN_ENV = "PEDL_AGENT_TOKEN"
CREDENTIAL_FILE = "agent.credential"  # in the work dir: the credential the master issued this agent
# where an operator finds the token a master expects (said by `pedl agent run` and by refusals)
TOKEN_WHERE = (
    "the master's agent token is `agent_token` in its master.yaml when set, else the file "
    "<data_dir>/agent_token on the master's host (data_dir defaults to ~/.local/share/pedl)"
)


def take_env_token() -> str | None:
    """$PEDL_AGENT_TOKEN, removed from this process's environment as it is read, so that no child (a
    task, the docker client) inherits it; its bytes are overwritten first, so that /proc/<pid>/environ,
    which shows the environment the process started with, no longer holds it either."""
    value = os.environ.get(TOKEN_ENV)
    if value is None:
        return None
    _scrub_environ(TOKEN_ENV)
    os.environ.pop(TOKEN_ENV, None)
    return value or None


def _scrub_environ(name: str) -> None:
    try:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        address = libc.getenv(name.encode())
        if address:
            ctypes.memset(address, 0, len(ctypes.string_at(address)))
    except (OSError, AttributeError):  # no C library to reach: the variable still leaves os.environ
        pass


def hide_in_cmdline(secret: str) -> bool:
    """Overwrite `secret` in this process's original argv, which /proc/<pid>/cmdline shows to every user
    of the host (`pedl agent run --token X`): True when it was there. It was visible from the exec until
    now, so a token given so should be treated as seen."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start and arg_end, fields 48 and 49
        needle = secret.encode()
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            block = mem.read(end - start)
            at = block.find(needle)
            found = at >= 0
            while at >= 0:
                mem.seek(start + at)
                mem.write(b"*" * len(needle))
                at = block.find(needle, at + len(needle))
        return found
    except (OSError, ValueError, IndexError):
        return False


def read_token_file(path: Path) -> str:
    """The enrollment secret in a file only its owner may read (`pedl agent run --token-file`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise ValueError(f"--token-file: cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd) as f:
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        if mode & 0o077:
            raise ValueError(
                f"--token-file: {path} has mode {mode:03o}: other users may read the agent token; `chmod 600 {path}`"
            )
        token = f.read().strip()
    if not token:
        raise ValueError(f"--token-file: {path} is empty")
    return token


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
    # the enrollment secret; None: the contents of token_file, else $PEDL_AGENT_TOKEN, if set (and then
    # removed from the environment). Once the master has issued this agent its own credential (kept in
    # the work dir), none is needed; no token at all is accepted only by a master with
    # security.allow_unauthenticated_loopback_agents (development), from its own host
    token: str | None = None
    token_file: Path | str | None = None  # a file of mode 0600 holding the enrollment secret
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
        from_env = take_env_token()  # out of the environment whichever token is used
        if self.token is not None and self.token_file is not None:
            raise ValueError("--token and --token-file contradict each other; give one")
        if self.token is None and self.token_file is not None:
            self.token = read_token_file(Path(self.token_file).expanduser())
        if self.token is None:
            self.token = from_env
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
    def credential_path(self) -> Path:
        """Where the agent keeps the credential the master issued it (mode 0600)."""
        return self.work_path / CREDENTIAL_FILE

    @property
    def cert_path(self) -> Path | None:
        assert self.cert is None or isinstance(self.cert, Path)  # normalised in __post_init__
        return self.cert

    @property
    def work_dir_is_default(self) -> bool:
        """The work dir is the one derived from the id: another --id gives another directory."""
        return self.work_path == default_work_dir(self.id)

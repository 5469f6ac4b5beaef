"""Live agent connections. `send` is thread-safe: the controller runs in worker threads and
queues messages that each connection's writer task delivers on the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field

from pydantic import BaseModel

from pedl.common.agent_protocol import dump


@dataclass
class AgentConnection:
    agent_id: str
    master_url: str  # the master's base URL as this agent reaches it
    remote_host: str
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    last_heartbeat: float = 0.0
    running: list[str] = field(default_factory=list)
    closed: bool = False

    def send(self, msg: BaseModel | None) -> None:
        """Queue a message (None closes the writer). Safe from any thread."""
        payload = dump(msg) if msg is not None else None
        with contextlib.suppress(RuntimeError):  # loop closed: the connection is gone anyway
            self.loop.call_soon_threadsafe(self.queue.put_nowait, payload)


class AgentHub:
    def __init__(self) -> None:
        self._conns: dict[str, AgentConnection] = {}
        self._lock = threading.Lock()

    def attach(self, conn: AgentConnection) -> AgentConnection | None:
        with self._lock:
            old = self._conns.get(conn.agent_id)
            self._conns[conn.agent_id] = conn
            return old

    def detach(self, conn: AgentConnection) -> bool:
        """Remove this connection if it is still the agent's current one."""
        with self._lock:
            if self._conns.get(conn.agent_id) is conn:
                del self._conns[conn.agent_id]
                return True
            return False

    def get(self, agent_id: str) -> AgentConnection | None:
        with self._lock:
            return self._conns.get(agent_id)

    def connected_ids(self) -> set[str]:
        with self._lock:
            return set(self._conns)

    def send(self, agent_id: str, msg: BaseModel) -> bool:
        conn = self.get(agent_id)
        if conn is None:
            return False
        conn.send(msg)
        return True

    def close(self, agent_id: str) -> None:
        conn = self.get(agent_id)
        if conn is not None:
            conn.send(None)

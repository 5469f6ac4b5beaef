"""Live agent connections. `send` is thread-safe: the controller runs in worker threads and
queues messages that each connection's writer task delivers on the event loop. `ask` sends a
question (check_port) and returns a future of the agent's answer."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from concurrent.futures import Future
from dataclasses import dataclass, field

from pydantic import BaseModel

from pedl.common.agent_protocol import CheckPort, PortChecked, dump


class AgentGone(Exception):
    """The agent's connection closed before it answered."""


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
    # questions sent and not yet answered, by request id
    pending: dict[str, Future[PortChecked]] = field(default_factory=dict)
    _pending_lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, msg: BaseModel | None) -> None:
        """Queue a message (None closes the writer). Safe from any thread."""
        payload = dump(msg) if msg is not None else None
        with contextlib.suppress(RuntimeError):  # loop closed: the connection is gone anyway
            self.loop.call_soon_threadsafe(self.queue.put_nowait, payload)

    def ask_port(self, allocation_id: str, port: int) -> Future[PortChecked]:
        """Ask the agent whether a process of this allocation listens on `port`. Safe from any thread;
        the future fails with AgentGone when the connection ends first."""
        question = CheckPort(request_id=uuid.uuid4().hex, allocation_id=allocation_id, port=port)
        answer: Future[PortChecked] = Future()
        with self._pending_lock:
            if self.closed:
                answer.set_exception(AgentGone(f"agent {self.agent_id} is not connected"))
                return answer
            self.pending[question.request_id] = answer
        self.send(question)
        return answer

    def answered(self, reply: PortChecked) -> None:
        with self._pending_lock:
            answer = self.pending.pop(reply.request_id, None)
        if answer is not None and not answer.done():
            answer.set_result(reply)

    def forget_question(self, request: Future[PortChecked]) -> None:
        """Drop a question whose asker stopped waiting."""
        with self._pending_lock:
            for key, answer in list(self.pending.items()):
                if answer is request:
                    del self.pending[key]

    def ended(self) -> None:
        """The connection is closed: unanswered questions fail."""
        with self._pending_lock:
            self.closed = True
            pending, self.pending = self.pending, {}
        for answer in pending.values():
            if not answer.done():
                answer.set_exception(AgentGone(f"agent {self.agent_id} disconnected before it answered"))


class AgentHub:
    def __init__(self) -> None:
        self._conns: dict[str, AgentConnection] = {}
        self._lock = threading.Lock()

    def attach(self, conn: AgentConnection) -> AgentConnection | None:
        with self._lock:
            old = self._conns.get(conn.agent_id)
            self._conns[conn.agent_id] = conn
            return old

    def restore(self, conn: AgentConnection, old: AgentConnection | None) -> None:
        """Undo `attach(conn)`, which displaced `old` (None: none), if conn is still the current one."""
        with self._lock:
            if self._conns.get(conn.agent_id) is conn:
                if old is None:
                    del self._conns[conn.agent_id]
                else:
                    self._conns[conn.agent_id] = old

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

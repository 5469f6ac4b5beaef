"""A master served for real by uvicorn in a thread, on a loopback socket bound before it starts:
for tests that need HTTP from other threads (fuzzing, schemathesis) rather than a TestClient."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app


class LiveMaster:
    def __init__(self, config: MasterConfig) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(config), log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> LiveMaster:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the master's server thread ended before it started serving")
            time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join()
        self.sock.close()

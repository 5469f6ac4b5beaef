"""The spot watcher reads the interruption notice through IMDSv2 and reports it once."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from pedl.agent.spot_watch import watch_spot
from tests.support.quiet_http import QuietHTTPServer


class FakeIMDS:
    def __init__(self) -> None:
        self.notice: dict | None = None
        self.untokened = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a) -> None:
                pass

            def do_PUT(self) -> None:
                self._send(200, "tok-123")

            def do_GET(self) -> None:
                if self.headers.get("X-aws-ec2-metadata-token") != "tok-123":
                    outer.untokened += 1
                    self._send(401, "")
                elif outer.notice is None:
                    self._send(404, "")
                else:
                    self._send(200, json.dumps(outer.notice))

            def _send(self, code: int, body: str) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def imds():
    fake = FakeIMDS()
    yield fake
    fake.server.shutdown()


async def test_reports_the_notice_once_it_appears(imds: FakeIMDS) -> None:
    seen: list[dict] = []
    task = asyncio.create_task(watch_spot(imds.url, 0.05, seen.append))
    await asyncio.sleep(0.3)
    assert seen == []  # 404: no notice yet
    imds.notice = {"action": "terminate", "time": "2026-11-22T03:30:00Z"}
    await asyncio.wait_for(task, 10)
    assert seen == [{"action": "terminate", "time": "2026-11-22T03:30:00Z"}]
    assert imds.untokened == 0  # every read carried the IMDSv2 token


async def test_metadata_errors_do_not_stop_the_watch() -> None:
    seen: list[dict] = []
    task = asyncio.create_task(watch_spot("http://127.0.0.1:9", 0.05, seen.append))
    await asyncio.sleep(0.3)
    assert not task.done() and seen == []
    task.cancel()

"""A small fake master (http.server in a thread) that records what pedl.core sends it, and the
DET_* environment the real master gives a trial task."""

from __future__ import annotations

import json
import re
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pedl.common.ports import free_port  # noqa: F401  (tests import it from here)
from tests.support.quiet_http import QuietHTTPServer

TOKEN = "task-session-token"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    status: int


class FakeMaster:
    """Answers the endpoints pedl.core uses, like the real master, and records every request.

    `fail(method, path, *statuses)` makes the next requests to that path get those statuses first.
    The preemption endpoint long-polls: it waits (up to timeout_seconds) for `preempt()`.
    """

    def __init__(self, port: int = 0) -> None:
        self.requests: list[Recorded] = []
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self._failures: dict[tuple[str, str], deque[int]] = defaultdict(deque)
        self._cond = threading.Condition()
        self._preempt = False
        self._stopping = False
        master = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                master._handle(self, "GET")

            def do_POST(self) -> None:
                master._handle(self, "POST")

        self._server = QuietHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeMaster:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def fail(self, method: str, path: str, *statuses: int) -> None:
        with self._cond:
            self._failures[(method, path)].extend(statuses)

    def preempt(self) -> None:
        with self._cond:
            self._preempt = True
            self._cond.notify_all()

    def calls(self, method: str | None = None, path: str | None = None, *, ok: bool = True) -> list[Recorded]:
        """Recorded requests, optionally filtered; only the ones answered 200 unless ok=False."""
        with self._cond:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method)
                and (path is None or re.fullmatch(path, r.path))
                and (not ok or r.status == 200)
            ]

    def metric_reports(self, trial_id: int = 3) -> list[dict[str, Any]]:
        """The trial's metric reports the master took, in order: single reports, and each entry of a
        batch in Determined's single-report shape."""
        out: list[dict[str, Any]] = []
        for c in self.calls("POST", rf"/api/v1/trials/{trial_id}/metrics(/batch)?"):
            if c.path.endswith("/batch"):
                out += [
                    {
                        "group": e["group"],
                        "metrics": {"trialId": trial_id, **{k: v for k, v in e.items() if k != "group"}},
                    }
                    for e in c.body["reports"]
                ]
            else:
                out.append(c.body)
        return out

    def wait_for_request(self, method: str, path: str) -> None:
        with self._cond:
            while not any(r.method == method and re.fullmatch(path, r.path) for r in self.requests):
                self._cond.wait()

    # -- request handling --------------------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        split = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        query = parse_qs(split.query)
        with self._cond:
            queued = self._failures.get((method, split.path))
            forced = queued.popleft() if queued else None
        if forced is not None:
            status, answer = forced, {"message": f"injected {forced}"}
        else:
            status, answer = self._route(method, split.path, query, body)
        with self._cond:
            self.requests.append(
                Recorded(method, split.path, query, {k.lower(): v for k, v in h.headers.items()}, body, status)
            )
            self._cond.notify_all()
        data = json.dumps(answer).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        if method == "GET" and re.fullmatch(r"/api/v1/allocations/[^/]+/signals/preemption", path):
            timeout = float(query.get("timeout_seconds", ["0"])[0])
            with self._cond:
                self._cond.wait_for(lambda: self._preempt or self._stopping, timeout=timeout)
                return 200, {"preempt": self._preempt}
        if method == "POST" and path == "/api/v1/checkpoints":
            checkpoint = dict(body["checkpoint"])
            with self._cond:
                self.checkpoints[checkpoint["uuid"]] = checkpoint
            return 200, {"checkpoint": checkpoint}
        if method == "GET" and (m := re.fullmatch(r"/api/v1/checkpoints/([^/]+)", path)):
            with self._cond:
                checkpoint = self.checkpoints.get(m.group(1))
            if checkpoint is None:
                return 404, {"code": "not_found", "message": f"checkpoint {m.group(1)} not found"}
            return 200, {"checkpoint": checkpoint}
        if method == "POST" and re.fullmatch(
            r"/api/v1/trials/\d+/(metrics|progress|searcher/completed_operation)", path
        ):
            return 200, {}
        if method == "POST" and re.fullmatch(r"/api/v1/trials/\d+/metrics/batch", path):
            return 200, {"stored": len(body["reports"])}
        if method == "POST" and re.fullmatch(r"/api/v1/allocations/[^/]+/signals/ack_preemption", path):
            return 200, {}
        return 404, {"code": "not_found", "message": f"no route {method} {path}"}


def experiment_config(host_path: Path, *, max_length: int = 30) -> dict[str, Any]:
    """A fully defaulted experiment config the way the master puts it in DET_EXPERIMENT_CONFIG."""
    return {
        "name": "test",
        "entrypoint": "python3 train.py",
        "hyperparameters": {"learning_rate": {"type": "const", "val": 0.05}},
        "searcher": {
            "name": "single",
            "metric": "validation_loss",
            "smaller_is_better": True,
            "max_length": {"batches": max_length, "epochs": None, "records": None},
        },
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": str(host_path),
            "storage_path": "exp",
            "save_trial_latest": 1,
        },
        "min_validation_period": {"batches": 10, "epochs": None, "records": None},
        "min_checkpoint_period": {"batches": 20, "epochs": None, "records": None},
        "resources": {"slots_per_trial": 1},
        "max_restarts": 1,
    }


def task_env(
    master_url: str,
    host_path: Path,
    *,
    max_length: int = 30,
    latest_checkpoint: str = "",
    hparams: dict[str, Any] | None = None,
) -> dict[str, str]:
    return {
        "DET_MASTER": master_url,
        "DET_CLUSTER_ID": "cluster-1",
        "DET_AGENT_ID": "agent-1",
        "DET_SLOT_IDS": "[0]",
        "DET_TASK_ID": "3.1",
        "DET_ALLOCATION_ID": "3.1.0",
        "DET_SESSION_TOKEN": TOKEN,
        "DET_TASK_TYPE": "TRIAL",
        "DET_TRIAL_ID": "3",
        "DET_EXPERIMENT_ID": "2",
        "DET_TRIAL_SEED": "42",
        "DET_HPARAMS": json.dumps(hparams or {"learning_rate": 0.05}),
        "DET_EXPERIMENT_CONFIG": json.dumps(experiment_config(host_path, max_length=max_length)),
        "DET_STEPS_COMPLETED": "0",
        "DET_TRIAL_RUN_ID": "1",
        "DET_LATEST_CHECKPOINT": latest_checkpoint,
        "DET_USER": "determined",
        "DET_RESOURCES_ID": "res-1",
        "PEDL_REPORT_RETRY_SECONDS": "30",
    }

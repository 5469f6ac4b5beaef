"""Starts a notebook's JupyterLab through the service launcher and, when the notebook has an
idle_timeout, tells the master whenever Jupyter is in use, so that the master's idle clock restarts.

The standard library only (it runs with the task's python3); it travels in the task's context as
.pedl/notebook_launcher.py, next to .pedl/service_launcher.py, and takes that one's arguments:

    python3 .pedl/notebook_launcher.py --http PATH -- ARGV...

Its environment (the master sets it): JUPYTER_TOKEN, the token Jupyter is started with, which the
readiness probe and the watcher send too; with an idle_timeout, PEDL_NOTEBOOK_IDLE_TYPE (what counts
as in use: kernels_or_terminals, kernel_connections or activity, as Determined's notebook_idle_type)
and PEDL_ACTIVITY_REPORT_SECONDS (how often Jupyter is asked). In use is reported with the task's own
token: POST /api/v1/allocations/{id}/activity.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

IDLE_TYPES = ("kernels_or_terminals", "kernel_connections", "activity")


def in_use(
    idle_type: str,
    kernels: list[dict[str, Any]],
    terminals: list[dict[str, Any]],
    sessions: list[dict[str, Any]],
    seen: str | None,
) -> tuple[bool, str | None]:
    """Whether Jupyter counts as in use now, and the newest activity it shows (pass it as `seen`
    next time). kernels_or_terminals: any kernel, terminal or session is open; kernel_connections:
    some kernel has a client connected; activity: a kernel is busy, or a kernel or terminal did
    something since the last look (Jupyter's last_activity moved)."""
    stamps = [str(x["last_activity"]) for x in (*kernels, *terminals) if x.get("last_activity")]
    newest = max(stamps) if stamps else seen  # ISO 8601 in UTC: they sort as strings
    if idle_type == "kernel_connections":
        return any(int(k.get("connections") or 0) > 0 for k in kernels), newest
    if idle_type == "activity":
        busy = any(k.get("execution_state") == "busy" for k in kernels)
        return busy or (newest is not None and newest != seen), newest
    return bool(kernels or terminals or sessions), newest


def _get_json(port: int, path: str, token: str | None) -> list[dict[str, Any]]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"token {token}"} if token else {}
    )
    with urllib.request.urlopen(req, timeout=5) as resp:  # Jupyter on loopback
        out = json.loads(resp.read(4 << 20))
    return out if isinstance(out, list) else []


def report_activity(context: Any) -> None:
    """Tell the master the notebook is in use (with the task's token); a failure is only logged: the
    next look reports again."""
    master = os.environ["DET_MASTER"].rstrip("/")
    req = urllib.request.Request(
        f"{master}/api/v1/allocations/{os.environ['DET_ALLOCATION_ID']}/activity",
        method="POST",
        data=b"{}",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {os.environ['DET_SESSION_TOKEN']}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10, context=context):  # the master's URL
            pass
    except (OSError, urllib.error.HTTPError) as exc:
        print(f"pedl: could not report the notebook's activity to the master: {exc}", file=sys.stderr, flush=True)


def watch(
    port: int,
    base: str,
    token: str | None,
    idle_type: str,
    every: float,
    report: Callable[[], None],
    stop: threading.Event,
) -> None:
    """Every `every` seconds ask Jupyter for its kernels, terminals and sessions; report when in use.
    While Jupyter does not answer (starting, or gone) nothing is reported."""
    seen: str | None = None
    while not stop.wait(every):
        try:
            kernels, terminals, sessions = (
                _get_json(port, f"{base}api/{name}", token) for name in ("kernels", "terminals", "sessions")
            )
        except (OSError, ValueError, urllib.error.HTTPError):
            continue
        used, seen = in_use(idle_type, kernels, terminals, sessions, seen)
        if used:
            report()


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import service_launcher  # the file beside this one in the task's context

    token = os.environ.get("JUPYTER_TOKEN") or None
    if token:
        os.environ["PEDL_SERVICE_AUTHORIZATION"] = f"token {token}"
    # the port is chosen here, so that the watcher knows it; the service launcher takes it from the environment
    port = int(os.environ.get("PEDL_SERVICE_PORT") or 0) or service_launcher.free_port()
    os.environ["PEDL_SERVICE_PORT"] = str(port)
    every = float(os.environ.get("PEDL_ACTIVITY_REPORT_SECONDS") or 0)
    stop = threading.Event()
    if every > 0:
        idle_type = os.environ.get("PEDL_NOTEBOOK_IDLE_TYPE") or IDLE_TYPES[0]
        base = f"/proxy/{os.environ['DET_TASK_ID']}/"
        master = os.environ.get("DET_MASTER", "")
        context = service_launcher._ssl_context() if master.startswith("https") else None
        threading.Thread(
            target=watch,
            args=(port, base, token, idle_type, every, lambda: report_activity(context), stop),
            name="notebook-activity",
            daemon=True,
        ).start()
    try:
        return service_launcher.main(argv)
    finally:
        stop.set()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

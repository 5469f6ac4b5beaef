"""Starts a task's service (a notebook, a TensorBoard, a shell's sshd) on a free port of its agent and
tells the master where it listens once it answers, so that /proxy/{task_id}/ goes there and the
task reads as ready.

The standard library only: it runs with whatever python3 the task has (a container image, the
agent's PATH), and travels in the task's context as .pedl/service_launcher.py, beside .pedl/pedl_ports.py.

    python3 .pedl/service_launcher.py [--http PATH] -- ARGV...

Every "{port}" in ARGV is the port chosen. With --http the service is ready when GET PATH on it
answers (any status below 500), asked with the Authorization header PEDL_SERVICE_AUTHORIZATION
names (if set: a service that takes a token, as Jupyter does); else when its port accepts a
connection. The launcher passes
SIGTERM and SIGINT on to the service and exits with its exit code; if the service exits before it
is ready, the reason is in the task's log.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

POLL_SECONDS = 0.2
REGISTER_ATTEMPTS = 30


def free_port() -> int:
    """A port below the kernel's ephemeral range, so that no outgoing connection takes it in the seconds
    before the service binds it (pedl/common/ports.py: the master ships it beside this file as
    .pedl/pedl_ports.py; inside pedl itself it is imported from its package)."""
    try:
        import pedl_ports  # pyright: ignore[reportMissingImports]  # beside this file in the task's context only
    except ImportError:
        from pedl.common import ports as pedl_ports
    return pedl_ports.free_port("0.0.0.0")


def answers(port: int, http_path: str | None) -> bool:
    if http_path is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False
    auth = os.environ.get("PEDL_SERVICE_AUTHORIZATION")
    probe = urllib.request.Request(
        f"http://127.0.0.1:{port}{http_path}", headers={"Authorization": auth} if auth else {}
    )
    try:
        with urllib.request.urlopen(probe, timeout=2) as resp:
            return resp.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (OSError, ValueError):
        return False


def _ssl_context() -> ssl.SSLContext | None:
    cert = os.environ.get("DET_MASTER_CERT_FILE") or os.environ.get("PEDL_MASTER_CERT")
    if not cert or cert == "noverify":
        return ssl._create_unverified_context() if cert == "noverify" else None
    return ssl.create_default_context(cafile=cert)


def register(port: int) -> None:
    """POST the port to the master with the task's own token; retried while the master is away."""
    master = os.environ["DET_MASTER"].rstrip("/")
    allocation = os.environ["DET_ALLOCATION_ID"]
    req = urllib.request.Request(
        f"{master}/api/v1/allocations/{allocation}/proxy_port",
        method="POST",
        data=json.dumps({"port": port}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {os.environ['DET_SESSION_TOKEN']}"},
    )
    context = _ssl_context() if master.startswith("https") else None
    for attempt in range(REGISTER_ATTEMPTS):
        try:
            with urllib.request.urlopen(req, timeout=10, context=context):  # the master's URL
                return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise SystemExit(
                    f"pedl: the master refused the service's port {port}: {exc.code} "
                    f"{exc.read()[:500].decode(errors='replace')}"
                ) from exc
        except OSError as exc:
            print(f"pedl: cannot reach the master to register port {port} ({exc}); retrying", file=sys.stderr)
        time.sleep(min(5.0, 0.5 * (attempt + 1)))
    raise SystemExit(f"pedl: gave up registering the service's port {port} with the master")


def main(argv: list[str]) -> int:
    http_path = None
    if argv[:1] == ["--http"]:
        http_path, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: service_launcher.py [--http PATH] -- ARGV...", file=sys.stderr)
        return 2
    port = int(os.environ.get("PEDL_SERVICE_PORT") or 0) or free_port()
    command = [a.replace("{port}", str(port)) for a in argv]
    print(f"pedl: starting the service on port {port}: {' '.join(command)}", flush=True)
    proc = subprocess.Popen(command)  # the master's argv for this task kind
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
    while proc.poll() is None and not answers(port, http_path):
        time.sleep(POLL_SECONDS)
    if proc.poll() is not None:
        print(
            f"pedl: the service exited with code {proc.returncode} before it answered on port {port}",
            file=sys.stderr,
            flush=True,
        )
        return proc.returncode or 1
    register(port)
    print(f"pedl: the service answers on port {port}; it is reachable through the master's proxy", flush=True)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

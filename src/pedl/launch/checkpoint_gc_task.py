"""A checkpoint GC task: deletes what the master decided (whole checkpoint directories, or exact entries
of them), then reports what each checkpoint has left to the master, which marks the rows.

The standard library only: it runs with the task's python3 as the owner's agent user (so file
permissions hold), and travels in the task's context as .pedl/checkpoint_gc.py beside
.pedl/pedl_local_removal.py and .pedl/pedl_checkpoint_files.py (pedl/common's), with its spec:

    python3 .pedl/checkpoint_gc.py .pedl/checkpoint_gc.json

The spec: {"checkpoints": [{"uuid", "dir", "delete": bool, "entries": [...]}]}. `dir` is the path the
master resolved and checked; nothing else is touched. One line per checkpoint goes to the log. Exits 1
when any checkpoint failed (those done are reported all the same)."""

from __future__ import annotations

import json
import os
import ssl
import stat
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

try:  # the files beside this one in the task's context
    import pedl_checkpoint_files as checkpoint_files  # pyright: ignore[reportMissingImports]  # task context only
    import pedl_local_removal as local_removal  # pyright: ignore[reportMissingImports]  # task context only
except ImportError:  # inside pedl itself
    from pedl.common import checkpoint_files, local_removal

REPORT_ATTEMPTS = 30


def listing(directory: str) -> dict[str, int]:
    """What is left of a checkpoint: its listing (links never followed); nothing when it is gone."""
    try:
        if not stat.S_ISDIR(os.lstat(directory).st_mode):
            return {}
    except FileNotFoundError:
        return {}
    return checkpoint_files.list_directory(Path(directory))


def collect(item: dict[str, Any]) -> dict[str, int]:
    """Delete one checkpoint's share and return what it has left."""
    directory = item["dir"]
    if item.get("delete"):
        local_removal.remove_directory(directory)
        return listing(directory)
    entries = list(item.get("entries") or [])
    local_removal.remove_entries(directory, entries)
    left = listing(directory)
    if not left:  # an empty directory: gone, as Determined's storage managers leave it
        local_removal.remove_directory(directory)
    return left


def run(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """(the report's checkpoints, how many failed)."""
    done, failed = [], 0
    for item in spec.get("checkpoints") or []:
        try:
            left = collect(item)
        except (OSError, ValueError) as exc:
            failed += 1
            print(f"checkpoint {item['uuid']}: FAILED: {exc}", flush=True)
            continue
        what = "deleted" if item.get("delete") else f"{len(item.get('entries') or [])} entries removed"
        print(f"checkpoint {item['uuid']}: {what}; {len(left)} entries ({sum(left.values())} bytes) left", flush=True)
        done.append({"uuid": item["uuid"], "resources": left})
    return done, failed


def _ssl_context() -> ssl.SSLContext | None:
    cert = os.environ.get("DET_MASTER_CERT_FILE") or os.environ.get("PEDL_MASTER_CERT")
    if not cert or cert == "noverify":
        return ssl._create_unverified_context() if cert == "noverify" else None
    return ssl.create_default_context(cafile=cert)


def report(checkpoints: list[dict[str, Any]]) -> None:
    """POST what is left to the master with the task's own token; retried while the master is away."""
    master = os.environ["DET_MASTER"].rstrip("/")
    allocation = os.environ["DET_ALLOCATION_ID"]
    req = urllib.request.Request(
        f"{master}/api/v1/allocations/{allocation}/checkpoint_gc",
        method="POST",
        data=json.dumps({"checkpoints": checkpoints}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {os.environ['DET_SESSION_TOKEN']}"},
    )
    context = _ssl_context() if master.startswith("https") else None
    for attempt in range(REPORT_ATTEMPTS):
        try:
            with urllib.request.urlopen(req, timeout=30, context=context):  # the master's URL
                return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                raise SystemExit(
                    f"pedl: the master refused the report: {exc.code} {exc.read()[:500].decode(errors='replace')}"
                ) from exc
        except OSError as exc:
            print(f"pedl: cannot reach the master ({exc}); retrying", file=sys.stderr, flush=True)
        time.sleep(min(5.0, 0.5 * (attempt + 1)))
    raise SystemExit("pedl: gave up reporting to the master")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: checkpoint_gc.py SPEC.json", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        spec = json.load(f)
    done, failed = run(spec)
    report(done)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What large bodies from others cost a logged-in user: a real master, senders posting 4 MB JSON bodies
in a loop (anonymously to the login route, then logged in to a route that parses its body), and the
latency of a monitor's GET /api/v1/me meanwhile (worst and p99; the goal is under 200 ms)."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

from benchmarks.harness import Figure, add_common_args, percentile, run_main, work_dir
from pedl.devcluster import Master

NAME = "front_door_stall"
MONITOR_INTERVAL = 0.02
MONITOR_TIMEOUT = 60.0


@dataclass
class Round:
    latencies: list[float]  # the monitor's, seconds
    statuses: Counter  # the senders' answers: a status code, or the transport error's name
    sent: int
    timeouts: int  # monitor calls unanswered after MONITOR_TIMEOUT


def body_of(megabytes: float) -> bytes:
    """A JSON array of ones, `megabytes` million bytes long: the cheapest text to send, a costly one to parse."""
    n = max(1, int(megabytes * 1_000_000) // 2)
    return b"[" + b"1," * (n - 1) + b"1]"


def sender(
    method: str, url: str, megabytes: float, headers: dict[str, str], stop: Any, statuses: Any, answered: Any
) -> None:
    """One sender's loop, in a process of its own: the monitor's process shares no GIL with it, and it
    runs at the lowest CPU priority, as if on a machine of its own (the master's CPU is what is measured)."""
    os.nice(19)
    body = body_of(megabytes)
    counts: Counter = Counter()
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            try:
                outcome: int | str = client.request(method, url, content=body, headers=headers).status_code
            except httpx.TransportError as exc:  # a master that answers before the body ends may close early
                outcome = type(exc).__name__
            counts[outcome] += 1
            with answered.get_lock():
                answered.value += 1
    statuses.put(counts)


def one_round(master: Master, method: str, path: str, headers: dict[str, str], args: argparse.Namespace) -> Round:
    spawn = multiprocessing.get_context("spawn")
    stop, statuses, answered = spawn.Event(), spawn.Queue(), spawn.Value("i", 0)
    senders = [
        spawn.Process(
            target=sender,
            daemon=True,
            args=(method, f"{master.url}{path}", args.body_mb, headers, stop, statuses, answered),
        )
        for _ in range(args.senders)
    ]
    latencies: list[float] = []
    timeouts = 0
    with httpx.Client(
        base_url=master.url, headers={"Authorization": f"Bearer {master.token()}"}, timeout=MONITOR_TIMEOUT
    ) as monitor:
        monitor.get("/api/v1/me").raise_for_status()
        for p in senders:
            p.start()
        while answered.value < 2 * args.senders:  # every sender has started (its interpreter, its body) and sends
            time.sleep(0.1)
        deadline = time.monotonic() + args.seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                monitor.get("/api/v1/me").raise_for_status()
            except httpx.TimeoutException:  # counted as what it waited; the table's worst says "at least"
                timeouts += 1
            latencies.append(time.monotonic() - started)
            time.sleep(MONITOR_INTERVAL)
        stop.set()
        total: Counter = Counter()
        for _ in senders:
            total.update(statuses.get(timeout=120))
        for p in senders:
            p.join(timeout=120)
    return Round(latencies, total, sum(total.values()), timeouts)


def figures_of(label: str, r: Round, args: argparse.Namespace) -> list[Figure]:
    answers = ", ".join(f"{k}: {v}" for k, v in sorted(r.statuses.items(), key=str)) or "none"
    detail = (
        f"{args.senders} senders of {args.body_mb:g} MB bodies for {args.seconds:g} s, "
        f"{len(r.latencies)} monitor calls"
        + (f" ({r.timeouts} unanswered after {MONITOR_TIMEOUT:g} s)" if r.timeouts else "")
        + f"; senders' answers {answers}"
    )
    return [
        Figure(NAME, f"{label}: worst GET /api/v1/me", max(r.latencies) * 1000, "ms", detail),
        Figure(NAME, f"{label}: p99 GET /api/v1/me", percentile(r.latencies, 99) * 1000, "ms", detail),
        Figure(NAME, f"{label}: median GET /api/v1/me", percentile(r.latencies, 50) * 1000, "ms", detail),
    ]


def measure(args: argparse.Namespace) -> list[Figure]:
    with work_dir("front-door", args.keep) as work:
        master = Master(work).start()
        try:
            quiet = one_round(master, "GET", "/info", {}, argparse.Namespace(**{**vars(args), "senders": 0}))
            out = figures_of("no senders", quiet, args)[:2]
            out += figures_of(
                "anonymous POST /api/v1/auth/login", one_round(master, "POST", "/api/v1/auth/login", {}, args), args
            )
            me = httpx.get(f"{master.url}/api/v1/me", headers={"Authorization": f"Bearer {master.token()}"}).json()
            # logged in: a body the route parses whole (under limits.max_request_body_bytes) and then refuses
            out += figures_of(
                "logged-in PATCH /api/v1/users/{id}",
                one_round(
                    master,
                    "PATCH",
                    f"/api/v1/users/{me['user']['id']}",
                    {"Authorization": f"Bearer {master.token()}"},
                    args,
                ),
                args,
            )
        finally:
            master.stop()
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{NAME}", description=__doc__)
    p.add_argument("--senders", type=int, default=8, help="concurrent senders of large bodies")
    p.add_argument("--body-mb", type=float, default=4.0, help="each body's size, in millions of bytes")
    p.add_argument("--seconds", type=float, default=20.0, help="how long each round lasts")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

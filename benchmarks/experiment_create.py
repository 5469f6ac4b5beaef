"""How long `POST /api/v1/experiments` takes, whatever the config asks for, against a real master
(uvicorn on a loopback port, SQLite or PostgreSQL), with a concurrent `GET /api/v1/me` timed
meanwhile. Trials are created as the pool has room for them (creating them all at once took seconds
for `max_trials: 20000` and never answered for `max_trials: 100000000`), and
configs past `limits.max_trials_per_experiment` are refused before any trial exists."""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import httpx

from benchmarks.harness import Figure, add_common_args, median, percentile, run_main, work_dir
from pedl.config.master_config import DatabaseConfig, MasterConfig

NAME = "experiment_create"
SEARCHERS = {
    "random, max_trials 10,000 (the limit)": "searcher: {name: random, metric: loss, max_trials: 10000, "
    "max_length: 10}",
    "random, max_trials 100,000,000 (refused)": "searcher: {name: random, metric: loss, max_trials: 100000000, "
    "max_length: 10}",
    "grid 100x100 (the limit)": "searcher: {name: grid, metric: loss, max_length: 10}\nhyperparameters:\n"
    "  a: {type: int, minval: 0, maxval: 99, count: 100}\n"
    "  b: {type: int, minval: 0, maxval: 99, count: 100}",
    "grid 200x200 (refused)": "searcher: {name: grid, metric: loss, max_length: 10}\nhyperparameters:\n"
    "  a: {type: int, minval: 0, maxval: 199, count: 200}\n"
    "  b: {type: int, minval: 0, maxval: 199, count: 200}",
}


def _body(searcher: str) -> str:
    return json.dumps(
        {"activate": True, "config": f"entrypoint: python3 train.py\n{searcher}\n", "modelDefinition": []}
    )


def measure_one(kind: str, db: dict | None, work: Path, repeat: int) -> list[Figure]:
    from tests.support.live_master import LiveMaster

    config = MasterConfig(data_dir=work / kind, port=0, db=DatabaseConfig(**db) if db else None)
    figures = []
    with LiveMaster(config) as master, httpx.Client(base_url=master.url, timeout=120) as http:
        token = http.post("/api/v1/auth/login", content=json.dumps({"username": "determined", "password": ""})).json()[
            "token"
        ]
        http.headers["Authorization"] = f"Bearer {token}"
        for label, searcher in SEARCHERS.items():
            times, statuses, me_waits = [], set(), []
            for _ in range(repeat):
                stop = threading.Event()

                def probe(stop: threading.Event = stop, me_waits: list[float] = me_waits) -> None:
                    with httpx.Client(base_url=master.url, headers=http.headers, timeout=120) as other:
                        while True:  # at least one call, even beside a create refused at once
                            started = time.perf_counter()
                            other.get("/api/v1/me")
                            me_waits.append(time.perf_counter() - started)
                            if stop.wait(0.01):
                                break

                prober = threading.Thread(target=probe)
                prober.start()
                started = time.perf_counter()
                r = http.post("/api/v1/experiments", content=_body(searcher))
                times.append(time.perf_counter() - started)
                stop.set()
                prober.join()
                statuses.add(r.status_code)
                if r.status_code == 200:
                    http.post(f"/api/v1/experiments/{r.json()['experiment']['id']}/kill")
            db_name = "SQLite" if kind == "sqlite" else "PostgreSQL"
            figures.append(
                Figure(
                    NAME,
                    f"{db_name}: {label}",
                    1000 * median(times),
                    "ms",
                    f"median of {repeat}, HTTP {sorted(statuses)}; concurrent /me p95 "
                    f"{1000 * percentile(me_waits, 95):.0f} ms over {len(me_waits)} calls",
                )
            )
    return figures


def measure(args: argparse.Namespace) -> list[Figure]:
    figures = []
    with work_dir("create", args.keep) as work:
        figures += measure_one("sqlite", None, work, args.repeat)
        if not args.sqlite_only:
            from tests.support.databases import fresh_postgres_db, postgres_error

            if postgres_error() is None:
                with fresh_postgres_db() as db:
                    figures += measure_one("postgres", db, work, args.repeat)
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.experiment_create", description=__doc__)
    p.add_argument("--repeat", type=int, default=5, help="creates per config")
    p.add_argument("--sqlite-only", action="store_true")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

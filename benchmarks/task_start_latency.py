"""Task start latency: from just before the experiment-create POST to the first line of the user's
process, on a real master (SQLite) with idle local agents; experiments are submitted one at a time."""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from pathlib import Path

import httpx
import yaml

from benchmarks.harness import (
    MODELS,
    Figure,
    add_common_args,
    percentile,
    run_main,
    work_dir,
)
from pedl.cli.model_upload import pack_model_dir
from pedl.devcluster import LocalAgent, Master, agent_connected, wait_for

NAME = "task_start_latency"


def experiment_config(stamp_file: Path) -> str:
    return yaml.safe_dump(
        {
            "name": "start-latency",
            "entrypoint": "python3 train.py",
            "max_restarts": 0,
            "hyperparameters": {"stamp_file": str(stamp_file)},
            "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
            "resources": {"slots_per_trial": 1},
        }
    )


def wait_file(path: Path, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the trial never wrote {path}")
        time.sleep(0.002)
    return float(path.read_text())


def allocation_times(db_path: Path) -> dict[int, tuple[float, float, float]]:
    """experiment id -> (queued_at, assigned_at, started_at) of its first allocation."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT t.experiment_id, a.queued_at, a.assigned_at, a.started_at FROM allocations a "
            "JOIN trials t ON t.id = a.trial_id ORDER BY a.queued_at"
        ).fetchall()
    finally:
        con.close()
    out: dict[int, tuple[float, float, float]] = {}
    for exp_id, queued, assigned, started in rows:
        out.setdefault(exp_id, (queued, assigned, started))
    return out


def measure(args: argparse.Namespace) -> list[Figure]:
    files = pack_model_dir(MODELS / "stamp")
    with work_dir("start", args.keep) as work:
        master = Master(work, {"checkpoint_storage": {"type": "shared_fs", "host_path": str(work / "ckpts")}})
        master.start()
        agents = [
            LocalAgent(work, master.url, f"agent-{i}", token=master.agent_token).start() for i in range(args.agents)
        ]
        try:
            for agent in agents:
                wait_for(lambda a=agent: agent_connected(master, a.agent_id), 60, what=f"{agent.agent_id} to connect")
            client = httpx.Client(
                base_url=master.url, headers={"Authorization": f"Bearer {master.token()}"}, timeout=60
            )
            samples: list[tuple[int, float, float, float]] = []  # exp id, t_post, t_answer, t_user_code
            for i in range(args.warmup + args.experiments):
                stamp = work / "stamps" / f"{i}"
                stamp.parent.mkdir(exist_ok=True)
                body = json.dumps({"config": experiment_config(stamp), "modelDefinition": files, "activate": True})
                t_post = time.time()
                r = client.post("/api/v1/experiments", content=body)
                t_answer = time.time()
                r.raise_for_status()
                exp_id = r.json()["experiment"]["id"]
                t_user = wait_file(stamp, 60)
                if i >= args.warmup:
                    samples.append((exp_id, t_post, t_answer, t_user))

                def done(exp_id: int = exp_id) -> bool:
                    state = client.get(f"/api/v1/experiments/{exp_id}").json()["experiment"]["state"]
                    if state in ("STATE_ERROR", "STATE_CANCELED"):
                        raise RuntimeError(f"experiment {exp_id} ended {state}: see {master.log_path}")
                    return state == "STATE_COMPLETED"

                wait_for(done, 60, interval=0.05, what=f"experiment {exp_id} to complete")  # the agent is idle again
            client.close()
            times = allocation_times(Path(work / "master-data" / "pedl.db"))
        finally:
            for agent in agents:
                agent.stop()
            master.stop()

    total, post, queued_assigned, assigned_spawned, spawned_user = [], [], [], [], []
    for exp_id, t_post, t_answer, t_user in samples:
        queued, assigned, started = times[exp_id]
        total.append(t_user - t_post)
        post.append(t_answer - t_post)
        queued_assigned.append(assigned - queued)
        assigned_spawned.append(started - assigned)
        spawned_user.append(t_user - started)
    n = len(samples)
    how = f"{n} experiments one at a time, {args.agents} idle agent(s), SQLite"
    figures = []
    for label, values, detail in (
        ("POST → user code runs", total, how),
        ("create POST round trip", post, "validate config, store model dir, create trial + allocation"),
        ("queued → assigned", queued_assigned, "the control loop's reaction (woken by the create)"),
        (
            "assigned → process spawned",
            assigned_spawned,
            "start_task to agent, context download + unpack, spawn; as the master records task_started",
        ),
        (
            "spawned → user code runs",
            spawned_user,
            "/bin/sh + python3 start-up (includes task_started's trip to the master)",
        ),
    ):
        ms = [v * 1000 for v in values]
        for p_name, value in (("p50", percentile(ms, 50)), ("p95", percentile(ms, 95)), ("max", max(ms))):
            figures.append(Figure(NAME, f"{label} {p_name}", value, "ms", detail if p_name == "p50" else ""))
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.task_start_latency", description=__doc__)
    p.add_argument("--experiments", type=int, default=50, help="experiments measured (default 50)")
    p.add_argument("--warmup", type=int, default=1, help="experiments run first and not counted (default 1)")
    p.add_argument("--agents", type=int, default=1, help="idle one-slot agents (default 1)")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

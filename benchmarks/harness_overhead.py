"""Harness overhead: the throughput of a training loop that reports its metrics every step through
pedl.core (core.train.report_training_metrics, one report per step, over HTTP to a real master),
against the same loop without reporting, as a ratio. The loop runs as a real trial on a master
(SQLite, optionally PostgreSQL) with one local agent; the trial script runs the loop both ways for a
small (~1 ms) and a larger (~10 ms) numpy step, prints steps/s, and the benchmark reads them from the
trial logs. The same script also runs off-cluster (local mode: metrics are printed, not sent)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

from benchmarks.harness import Figure, add_common_args, run_main, work_dir
from pedl.cli.model_upload import pack_model_dir
from pedl.devcluster import LocalAgent, Master, agent_connected, wait_experiment, wait_for

NAME = "harness_overhead"
RESULT = "HARNESS_OVERHEAD_RESULT "

# The trial script. Each round runs the bare loop, then the reporting loop, per step size; a reporting loop
# ends when the master has its reports (the sender's flush, timed with it: else its last request would be sent
# during the next bare loop). The figure is the median of the rounds' ratios: a pair of loops a second or
# two apart sees the same machine, where the best loops of each kind could
# come from minutes apart, and on a machine whose speed wandered gave ratios from 0.94 to 1.15 for the same code.
TRAIN_PY = """\
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # a steady single-threaded step
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

import pedl
import pedl.core

info = pedl.get_cluster_info()
hp = info.trial.hparams if info is not None else json.loads(os.environ["HARNESS_OVERHEAD_HPARAMS"])
rng = np.random.default_rng(0)
w = rng.standard_normal((128, 128)) / 12


def work(reps):
    x = rng.standard_normal((64, 128))
    for _ in range(reps):
        x = np.tanh(x @ w)
    return float(x[0, 0])


def calibrate(target_ms):
    reps = 1
    while True:
        started = time.perf_counter()
        for _ in range(20):
            work(reps)
        per_step = (time.perf_counter() - started) / 20
        if per_step > 0.05 * target_ms / 1000 and reps >= 4:
            return max(1, round(reps * target_ms / 1000 / per_step))
        reps *= 2


step_no = 0
with pedl.core.init(hparams=hp if info is None else None, max_length=int(hp["max_length"])) as core:
    for label, target_ms, steps in (("small", float(hp["small_ms"]), int(hp["small_steps"])),
                                    ("large", float(hp["large_ms"]), int(hp["large_steps"]))):
        reps = calibrate(target_ms)
        for rnd in range(int(hp["rounds"])):
            for mode in ("bare", "reported"):
                started = time.perf_counter()
                for _ in range(steps):
                    loss = work(reps)
                    if mode == "reported":
                        step_no += 1
                        core.train.report_training_metrics(steps_completed=step_no,
                                                           metrics={"loss": loss, "lr": 0.01})
                if mode == "reported" and info is not None:
                    core.train._session.flush()  # (pedl.core has no public flush: any call that needs an answer does)
                seconds = time.perf_counter() - started
                print("HARNESS_OVERHEAD_RESULT " + json.dumps(
                    {"size": label, "mode": mode, "round": rnd, "steps": steps, "seconds": seconds,
                     "steps_per_s": steps / seconds, "step_ms": 1000 * seconds / steps}), flush=True)
print("done", flush=True)
"""


def hparams(args: argparse.Namespace) -> dict:
    hp = {
        "small_ms": args.small_ms,
        "small_steps": args.small_steps,
        "large_ms": args.large_ms,
        "large_steps": args.large_steps,
        "rounds": args.rounds,
    }
    hp["max_length"] = args.rounds * (args.small_steps + args.large_steps)
    return hp


def experiment_config(hp: dict) -> str:
    return yaml.safe_dump(
        {
            "name": "harness-overhead",
            "entrypoint": "python3 train.py",
            "max_restarts": 0,
            "hyperparameters": hp,
            "searcher": {
                "name": "single",
                "metric": "loss",
                "smaller_is_better": True,
                "max_length": {"batches": hp["max_length"]},
            },
            "resources": {"slots_per_trial": 1},
        }
    )


def parse_results(text: str) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for line in text.splitlines():
        if RESULT in line:
            r = json.loads(line.split(RESULT, 1)[1])
            out.setdefault((r["size"], r["mode"]), []).append(r)
    return out


def trial_logs(master: Master, trial_id: int) -> str:
    text = master.api("GET", f"/api/v1/trials/{trial_id}/logs", follow="false")
    return "".join(json.loads(line)["result"]["message"] for line in text.splitlines() if line)


def on_cluster(args: argparse.Namespace, work: Path, model_dir: Path, kind: str, db: dict | None) -> str:
    cfg: dict = {"checkpoint_storage": {"type": "shared_fs", "host_path": str(work / "ckpts")}}
    if db:
        cfg["db"] = db
    master = Master(work / kind, cfg)
    master.start()
    agent = LocalAgent(work / kind, master.url, "bench-agent", token=master.agent_token).start()
    try:
        wait_for(lambda: agent_connected(master, agent.agent_id), 60, what="the agent to connect")
        body = {
            "config": experiment_config(hparams(args)),
            "modelDefinition": pack_model_dir(model_dir),
            "activate": True,
        }
        exp_id = master.api("POST", "/api/v1/experiments", body)["experiment"]["id"]
        exp = wait_experiment(master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=600)
        (trial,) = master.api("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
        logs = trial_logs(master, trial["id"])
        if exp["state"] != "STATE_COMPLETED":
            raise RuntimeError(f"experiment {exp_id} ended {exp['state']}:\n{logs[-3000:]}")
        return logs
    finally:
        agent.stop()
        master.stop()


def off_cluster(args: argparse.Namespace, model_dir: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PEDL_", "DET_"))}
    env["HARNESS_OVERHEAD_HPARAMS"] = json.dumps(hparams(args))
    # stdout is a pipe, as it is under a job runner; local mode prints one line per report
    done = subprocess.run(
        [sys.executable, "train.py"], cwd=model_dir, env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"the off-cluster run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def figures_from(logs: str, where: str, args: argparse.Namespace) -> list[Figure]:
    results = parse_results(logs)
    figures = []
    for size, target in (("small", args.small_ms), ("large", args.large_ms)):
        bare_loops = {r["round"]: r for r in results[(size, "bare")]}
        ratios = sorted(bare_loops[r["round"]]["seconds"] / r["seconds"] for r in results[(size, "reported")])
        bare = max(r["steps_per_s"] for r in results[(size, "bare")])
        rep = max(r["steps_per_s"] for r in results[(size, "reported")])
        steps = results[(size, "bare")][0]["steps"]
        detail = (
            f"{where}; ~{target:g} ms numpy step, {steps} steps per loop, median of {len(ratios)} rounds' "
            f"ratios (from {ratios[0]:.3f} to {ratios[-1]:.3f}); the best loops: {rep:,.0f} steps/s reporting "
            f"vs {bare:,.0f} bare"
        )
        figures.append(
            Figure(
                NAME,
                f"{where.split(',')[0]}: reported/bare throughput, ~{target:g} ms step",
                statistics.median(ratios),
                "ratio",
                detail,
            )
        )
    return figures


def measure(args: argparse.Namespace) -> list[Figure]:
    figures: list[Figure] = []
    with work_dir("overhead", args.keep) as work:
        model_dir = work / "model"
        model_dir.mkdir()
        (model_dir / "train.py").write_text(TRAIN_PY)
        for kind in args.db:
            if kind == "postgres":
                from tests.support.databases import fresh_postgres_db, postgres_error

                problem = postgres_error()
                if problem:
                    print(f"skipping PostgreSQL: {problem}", file=sys.stderr)
                    continue
                with fresh_postgres_db() as db:
                    logs = on_cluster(args, work, model_dir, kind, db)
            else:
                logs = on_cluster(args, work, model_dir, kind, None)
            figures += figures_from(
                logs,
                f"on-cluster {'SQLite' if kind == 'sqlite' else 'PostgreSQL'}, reports over HTTP to the master",
                args,
            )
        if not args.no_local:
            figures += figures_from(
                off_cluster(args, model_dir), "off-cluster, local mode (metrics printed to a pipe)", args
            )
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.harness_overhead", description=__doc__)
    p.add_argument(
        "--db",
        nargs="+",
        choices=["sqlite", "postgres"],
        default=["sqlite"],
        help="the master's database(s) (default sqlite)",
    )
    p.add_argument("--small-ms", type=float, default=1.0, help="work per step of the small variant (default 1 ms)")
    p.add_argument("--small-steps", type=int, default=2000, help="steps per loop, small variant (default 2000)")
    p.add_argument("--large-ms", type=float, default=10.0, help="work per step of the large variant (default 10 ms)")
    p.add_argument("--large-steps", type=int, default=300, help="steps per loop, large variant (default 300)")
    p.add_argument("--rounds", type=int, default=9, help="rounds of bare + reported loops (default 9)")
    p.add_argument("--no-local", action="store_true", help="skip the off-cluster (local mode) run")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

"""`make demo`: a master on SQLite whose default pool has dynamic local agents (the master starts
agent processes when trials wait and ends them once idle), the numpy example experiment created with
`pedl experiment create --follow`, a summary, and a clean shutdown."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pedl.cli.output import fmt_state
from pedl.devcluster import Master, pedl_command, wait_experiment, wait_for

EXAMPLE = Path("examples/numpy_mlp")
IDLE_SECONDS = 5


def main() -> int:
    root = Path.cwd()
    if not (root / EXAMPLE / "grid.yaml").exists():
        print(f"run the demo from the repository root ({EXAMPLE}/grid.yaml not found)", file=sys.stderr)
        return 2
    work = root / ".demo"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    master = Master(
        work,
        {
            "checkpoint_storage": {"type": "shared_fs", "host_path": str(work / "checkpoints")},
            "resource_pools": [
                {
                    "pool_name": "default",
                    "provider": {
                        "type": "local",
                        "slots_per_instance": 1,
                        "max_instances": 2,
                        "boot_delay": "1s",
                        "max_idle_agent_period": f"{IDLE_SECONDS}s",
                    },
                }
            ],
        },
    )
    print(
        f"==> starting the master on {master.url} (SQLite in {work / 'master-data'}); its pool launches up "
        "to two local agents when trials wait",
        flush=True,
    )
    try:
        master.start()
        env = {**os.environ, "PEDL_MASTER": master.url, "PEDL_CONFIG_DIR": str(work / "cli")}
        cmd = [*pedl_command(), "experiment", "create", str(EXAMPLE / "grid.yaml"), str(EXAMPLE), "--follow"]
        print("==> " + " ".join(["pedl", *cmd[len(pedl_command()) :]]), flush=True)
        rc = subprocess.call(cmd, env=env)
        exps = master.api("GET", "/api/v1/experiments", limit=1, orderBy="ORDER_BY_DESC")["experiments"]
        if not exps:
            print("no experiment was created", file=sys.stderr)
            return 1
        exp = wait_experiment(master, exps[0]["id"], {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"})
        summarize(master, exp, work)
        show_instances(master)
        return 0 if rc == 0 and exp["state"] == "STATE_COMPLETED" else 1
    finally:
        master.stop()
        print("==> master stopped (and any local agent still running)", flush=True)


def show_instances(master: Master) -> None:
    print(f"\n==> waiting for the idle agents to be terminated ({IDLE_SECONDS}s grace period)", flush=True)
    try:
        wait_for(
            lambda: not master.api("GET", "/api/v1/instances")["instances"],
            IDLE_SECONDS + 30,
            what="idle instances to be terminated",
        )
    except TimeoutError as exc:
        print(f"  {exc}")
    for inst in master.api("GET", "/api/v1/instances", all="true")["instances"]:
        print(
            f"  {inst['id']}: {inst['state']} after {inst['instanceHours'] * 3600:.0f}s "
            f"({inst.get('terminationReason') or 'running'})"
        )


def summarize(master: Master, exp: dict, work: Path) -> None:
    trials = master.api("GET", f"/api/v1/experiments/{exp['id']}/trials")["trials"]
    metric = exp["config"]["searcher"]["metric"]
    print(f"\nExperiment {exp['id']} ({exp['name']}): {fmt_state(exp['state'])}")
    best = None
    for t in trials:
        value = t.get("searcherMetricValue")
        shown = "none" if value is None else f"{value:.4f}"
        print(
            f"  trial {t['id']}: {fmt_state(t['state']):<10} hparams={t['hparams']} best {metric}={shown} "
            f"batches={t['totalBatchesProcessed']} restarts={t['restarts']}"
        )
        if value is not None and (best is None or value < best[1]):
            best = (t["id"], value)
    if best:
        print(f"Best {metric}: {best[1]:.4f} (trial {best[0]})")
    storage = exp["config"]["checkpoint_storage"]
    ckpts = master.api("GET", f"/api/v1/experiments/{exp['id']}/checkpoints")["checkpoints"]
    for line in checkpoint_lines(ckpts, Path(storage["host_path"]) / (storage.get("storage_path") or "")):
        print(line)
    print("\nWhere to look next:")
    print(f"  master log: {work / 'master.log'}; agent logs: {work / 'master-data' / 'local-instances'}/*.log")
    print(
        "  start your own: pedl master run, then pedl agent run --master http://localhost:8080 --token "
        '"$(cat ~/.local/share/pedl/agent_token)" (the token the master created in its data_dir), then'
    )
    print("  pedl experiment create examples/numpy_mlp/grid.yaml examples/numpy_mlp --follow")


def checkpoint_lines(ckpts: list[dict], base: Path) -> list[str]:
    """Each checkpoint with its state; the path only of those whose files are still there (garbage
    collection deletes all but the ones the experiment's checkpoint_storage keeps)."""
    deleted = sum(1 for c in ckpts if c.get("state") == "STATE_DELETED")
    lines = [f"Checkpoints ({len(ckpts)}, {len(ckpts) - deleted} kept, {deleted} deleted by garbage collection):"]
    for c in sorted(
        ckpts, key=lambda c: (c["training"].get("trialId") or 0, c["metadata"].get("steps_completed") or 0)
    ):
        where = "files deleted" if c.get("state") == "STATE_DELETED" else str(base / c["uuid"])
        lines.append(
            f"  {fmt_state(c.get('state')):<9} trial {c['training'].get('trialId')}, "
            f"batch {c['metadata'].get('steps_completed')}: {where}"
        )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())

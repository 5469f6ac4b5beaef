"""One provisioner pass (PoolProvisioner.step()) for a pool with 1,000 instances and 10,000 waiting
allocations, on a fresh SQLite database, with an in-memory provider (no cloud latency): what the
master's own bookkeeping and decision cost. Then the pure scaling decider, decide(), on the same
snapshot.

The pool: p4d.24xlarge instances (8 slots), each a RUNNING Instance row with a CONNECTED Agent row
and a fake hub connection; a share of them (--busy, default half) runs one 8-slot allocation, the
rest are idle. The waiting allocations need 1, 2, 4 and 8 slots in turn. max_instances is
instances + 100, so the pass packs what fits onto the idle instances, launches 100 new ones (the
fake provider answers at once) and leaves the rest waiting."""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import insert, select

from benchmarks.harness import Figure, add_common_args, median, run_main, work_dir
from benchmarks.scheduling_pass import StatementCounter, _NoLoop
from pedl.clock import SystemClock
from pedl.config.master_config import MasterConfig
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.cluster.controller import Controller
from pedl.master.db import migrate, models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import AgentState, AllocationState, InstanceState
from pedl.master.provisioner import provisioner as provisioner_module
from pedl.master.provisioner.providers.base import CloudInstance, CloudState, LaunchRequest
from pedl.master.provisioner.provisioner import PoolProvisioner
from pedl.master.wiring import build_context
from pedl.scheduling.scaling_decider import decide

NAME = "provisioner_pass"
POOL = "default"
INSTANCE_TYPE = "p4d.24xlarge"  # 8 GPUs
SIZES = (1, 2, 4, 8)


class FakeProvider:
    """In memory: list_instances returns the given instances; launch makes new ids at once."""

    name = "fake"

    def __init__(self, instances: list[CloudInstance]) -> None:
        self.instances = instances
        self.launched: list[CloudInstance] = []
        self.terminated: list[str] = []

    def list_instances(self) -> list[CloudInstance]:
        return list(self.instances)

    def launch(self, request: LaunchRequest) -> list[CloudInstance]:
        now = time.time()
        out = [
            CloudInstance(
                f"i-new{len(self.launched) + n:05d}", request.instance_type, CloudState.PENDING, now, spot=request.spot
            )
            for n in range(request.count)
        ]
        self.launched += out
        return out

    def terminate(self, ids: list[str]) -> None:
        self.terminated += ids

    def close(self) -> None:
        pass


class TimedProvisioner(PoolProvisioner):
    """The real provisioner, timing the parts of its pass."""

    phase: dict[str, float]

    def _timed(self, name: str, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kw)
        finally:
            self.phase[name] = self.phase.get(name, 0.0) + time.perf_counter() - started

    def _plan(self, s, cloud):
        def timed_decide(*a: Any, **kw: Any) -> Any:
            return self._timed("decide", decide, *a, **kw)

        provisioner_module.decide = timed_decide  # the name _plan calls
        try:
            return self._timed("plan", super()._plan, s, cloud)
        finally:
            provisioner_module.decide = decide

    def _sync(self, s, cloud):
        return self._timed("sync", super()._sync, s, cloud)

    def _snapshot(self, s):
        return self._timed("snapshot", super()._snapshot, s)

    def _launch(self, decision):
        return self._timed("launch", super()._launch, decision)

    def _terminate(self, decision):
        return self._timed("terminate", super()._terminate, decision)


def pool_config(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "pool_name": POOL,
        "provider": {
            "type": "aws",
            "image_id": "ami-bench",
            "ssh_key_name": "bench",
            "instance_type": INSTANCE_TYPE,
            "region": "us-east-1",
            "max_instances": args.instances + args.room,
            "max_idle_agent_period": "5m",
        },
    }


def populate(ctl: Controller, args: argparse.Namespace, loop: _NoLoop) -> list[CloudInstance]:
    """Instances with their agents (connected), held allocations on the busy ones, pending ones."""
    now = ctl.now
    slots = 8
    busy = int(args.instances * args.busy)
    ids = [f"i-{n:017x}" for n in range(args.instances)]
    with ctl.db.session() as s:
        s.execute(
            insert(models.Instance),
            [
                {
                    "id": i,
                    "resource_pool": POOL,
                    "provider": "fake",
                    "instance_type": INSTANCE_TYPE,
                    "spot": False,
                    "state": InstanceState.RUNNING.value,
                    "slots": slots,
                    "price_per_hour": 32.773,
                    "launch_token": "",
                    "launched_at": now - 3600,
                    "registered_at": now - 3500,
                    "adopted": False,
                }
                for i in ids
            ],
        )
        s.execute(
            insert(models.Agent),
            [
                {
                    "id": i,
                    "hostname": i,
                    "address": "10.0.0.1",
                    "resource_pool": POOL,
                    "slots": [
                        {"id": str(j), "type": "cuda", "brand": "A100", "uuid": f"GPU-{i}-{j}", "memory_mib": 40960}
                        for j in range(slots)
                    ],
                    "state": AgentState.CONNECTED.value,
                    "version": "bench",
                    "registered_at": now - 3500,
                    "last_heartbeat": now,
                    "enabled": True,
                    "draining": False,
                }
                for i in ids
            ],
        )
        held = [
            {
                "id": f"held.{n}.1",
                "task_id": f"held.{n}",
                "trial_id": None,
                "name": f"held {n}",
                "state": AllocationState.RUNNING.value,
                "resource_pool": POOL,
                "slots_needed": slots,
                "priority": 42,
                "assignment": [{"agent_id": ids[n], "slot_ids": [str(j) for j in range(slots)]}],
                "session_token_hash": "",
                "owner_id": 1,
                "queued_at": now - 3000,
                "assigned_at": now - 2900,
                "started_at": now - 2900,
            }
            for n in range(busy)
        ]
        pending = [
            {
                "id": f"wait.{n}.1",
                "task_id": f"wait.{n}",
                "trial_id": None,
                "name": f"waiting {n}",
                "state": AllocationState.PENDING.value,
                "resource_pool": POOL,
                "slots_needed": SIZES[n % len(SIZES)],
                "priority": 42,
                "assignment": [],
                "session_token_hash": "",
                "owner_id": 1,
                "queued_at": now - args.allocations + n,
            }
            for n in range(args.allocations)
        ]
        for rows in (held, pending):
            if rows:
                s.execute(insert(models.Allocation), rows)
    for i in ids:
        ctl.hub.attach(
            AgentConnection(
                i,
                "http://master:8080",
                "10.0.0.1",
                loop,  # type: ignore[arg-type]
                last_heartbeat=time.time(),
            )
        )
    return [CloudInstance(i, INSTANCE_TYPE, CloudState.RUNNING, now - 3600, address="10.0.0.1") for i in ids]


def one_pass(args: argparse.Namespace, work: Any, profile: bool = False) -> dict[str, Any]:
    config = MasterConfig.model_validate({"data_dir": str(work / "data"), "resource_pools": [pool_config(args)]})
    db = Database(config.database_url())
    try:
        migrate.upgrade(db.engine)
        ctx = build_context(config, db, SystemClock(), cluster_id="bench", master_id="bench")
        ctl = ctx.controller
        loop = _NoLoop()
        cloud = populate(ctl, args, loop)
        provider = FakeProvider(cloud)
        prov = TimedProvisioner(ctl, config.resource_pools[0], provider)  # type: ignore[arg-type]
        prov.phase = {}
        ctx.provisioners[POOL] = prov
        statements = StatementCounter(db.engine)
        statements.enable()
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        prov.step()
        if profiler:
            profiler.disable()
        elapsed = time.perf_counter() - started
        statements.enable(False)
        if profiler:
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(30)
            print(f"--- cProfile of one pass ---\n{out.getvalue()}")
        phase = dict(prov.phase)

        # the pure decider on the snapshot this pass started from (re-read: the pass changed nothing
        # it reads except the 100 new rows, which are left out here)
        with db.session() as s:
            views, pending = PoolProvisioner._snapshot(prov, s)
        views = [v for v in views if not v.id.startswith("i-new")]
        decide_times, decision = [], None
        for _ in range(args.repeat_decide):
            t = time.perf_counter()
            decision = decide(ctl.now, prov.policy, views, pending)
            decide_times.append(time.perf_counter() - t)
        with db.session() as s:
            rows = s.scalar(select(models.Instance.id).where(models.Instance.id.like("i-new%")).limit(1))
        return {
            "elapsed": elapsed,
            "phase": phase,
            "statements": statements.summary(),
            "statement_count": sum(statements.counts.values()),
            "launched": len(provider.launched),
            "recorded": rows is not None,
            "views": len(views),
            "pending": len(pending),
            "decide": decide_times,
            "decision": decision,
        }
    finally:
        db.dispose()
        for p in (work / "data").glob("pedl.db*"):
            p.unlink()


def measure(args: argparse.Namespace) -> list[Figure]:
    runs = []
    with work_dir("provpass", args.keep) as work:
        for i in range(args.repeat):
            runs.append(one_pass(args, work, args.profile and i == 0))
    total = median([r["elapsed"] for r in runs])

    def part(name: str) -> float:
        return median([r["phase"].get(name, 0.0) for r in runs])

    plan, sync, snap, dec = part("plan"), part("sync"), part("snapshot"), part("decide")
    launch, terminate = part("launch"), part("terminate")
    decide_all = [t for r in runs for t in r["decide"]]
    d = runs[0]["decision"]
    busy = int(args.instances * args.busy)
    shape = (
        f"{args.instances:,} instances×8 slots ({busy:,} busy, {args.instances - busy:,} idle), "
        f"{args.allocations:,} pending allocations of {'/'.join(map(str, SIZES))} slots, "
        f"max_instances {args.instances + args.room:,}"
    )
    launched = sum(launch_.count for launch_ in d.launch) if d else 0
    return [
        Figure(
            NAME,
            "PoolProvisioner.step(), SQLite",
            1000 * total,
            "ms",
            f"median of {args.repeat} (fresh database each); {shape}; {runs[0]['launched']} launched through "
            f"the in-memory provider",
        ),
        Figure(NAME, "… of which _sync (reconcile rows with the cloud list)", 1000 * sync, "ms", ""),
        Figure(
            NAME,
            "… of which _snapshot (rows → decider input)",
            1000 * snap,
            "ms",
            f"{runs[0]['views']:,} instance views, {runs[0]['pending']:,} pending tasks",
        ),
        Figure(NAME, "… of which decide()", 1000 * dec, "ms", "inside the pass"),
        Figure(
            NAME,
            "… of which the rest of the plan",
            1000 * (plan - sync - snap - dec),
            "ms",
            "the terminate re-send check (a session.get per listed instance) and recording the intent",
        ),
        Figure(
            NAME,
            "… of which commit",
            1000 * (total - plan - launch - terminate),
            "ms",
            "flush/commit of the pass's transaction, lock, provider list (in memory)",
        ),
        Figure(
            NAME,
            "… of which launch + record the new rows",
            1000 * (launch + terminate),
            "ms",
            "in-memory provider; a second short transaction",
        ),
        Figure(NAME, "SQL statements in one pass", runs[0]["statement_count"], "statements", runs[0]["statements"]),
        Figure(
            NAME,
            "pure decide() on the same snapshot",
            1000 * median(decide_all),
            "ms",
            f"median of {len(decide_all)}; decision: launch {launched}, terminate {len(d.terminate) if d else 0}, "
            f"never-fit {len(d.never_fit) if d else 0}",
        ),
    ]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.provisioner_pass",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--instances", type=int, default=1000, help="instances in the pool (default 1000)")
    p.add_argument("--allocations", type=int, default=10000, help="waiting allocations (default 10000)")
    p.add_argument("--busy", type=float, default=0.5, help="share of instances running a task (default 0.5)")
    p.add_argument("--room", type=int, default=100, help="max_instances above the instances (default 100)")
    p.add_argument("--repeat", type=int, default=3, help="passes, each on a fresh database (default 3)")
    p.add_argument("--repeat-decide", type=int, default=5, help="decide() runs per pass (default 5)")
    p.add_argument("--profile", action="store_true", help="print a cProfile of the first pass")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

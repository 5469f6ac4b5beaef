"""Move cost: what moving a running trial costs, measured on a real master and one local agent, with
defaults for the simulator's --checkpoint-cost and --restore-cost (consolidation's checkpoint_cost and
restore_cost).

The trial is examples/torch_mlp run as it is, with a wide hidden layer (--hidden-size 2560: 26 MB of
parameters, a ~79 MB checkpoint with Adam's state), validation reported every batch and no periodic
checkpoints, so the only checkpoint of each round is the one the preemption asks for. Each round:

- checkpoint cost: pause the experiment, which preempts the trial's allocation as a move does (the
  trial sees the signal, checkpoints and exits). From the master's "preemption requested" event to
  the later of the checkpoint being recorded and the allocation ending (its slots released).
- restore cost: activate the experiment, which queues a new allocation for the trial. From that
  allocation's queued_at to the first metric report of the new process, which resumed from the
  checkpoint (start the process, import torch, load the checkpoint, train and validate one batch).

Every time is one the master or agent recorded (the allocation, checkpoint, metric and event rows,
the trial's log line); the benchmark reads them from the master's SQLite database, so its own
polling adds nothing."""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks.harness import Figure, add_common_args, median, run_main, work_dir
from pedl.cli.model_upload import pack_model_dir
from pedl.devcluster import LocalAgent, Master, agent_connected, wait_for

NAME = "move_cost"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "torch_mlp"
RESUMED_LINE = "resumed from checkpoint"  # what examples/torch_mlp prints after loading a checkpoint
EXITING_LINE = "checkpoint saved, exiting"  # ... and after its preemption checkpoint, before returning
ENDED_TRIAL = {"STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR"}


def experiment_config(args: argparse.Namespace) -> str:
    """The example's own const.yaml, with a model of some size, a report every batch and no
    checkpoints but the ones preemption asks for."""
    config = yaml.safe_load((EXAMPLE / "const.yaml").read_text())
    config["name"] = "move-cost"
    config["hyperparameters"]["hidden_size"] = args.hidden_size
    config["searcher"]["max_length"] = {"batches": 10_000_000}  # runs until killed
    config["min_validation_period"] = {"batches": 1}
    config["min_checkpoint_period"] = {"batches": 10_000_000}
    config["max_restarts"] = 0  # a failure ends the benchmark instead of hiding in a restart
    return yaml.safe_dump(config)


@dataclass(frozen=True)
class Alloc:
    id: str
    queued_at: float
    assigned_at: float | None
    started_at: float | None
    ended_at: float | None
    exit_reason: str | None


class Records:
    """Read-only queries on the master's SQLite database (WAL: reading never blocks the master)."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path

    def _rows(self, sql: str, *params: object) -> list[tuple]:
        with closing(sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=30)) as con:
            return con.execute(sql, params).fetchall()

    def trial_state(self, trial_id: int) -> str:
        return self._rows("SELECT state FROM trials WHERE id = ?", trial_id)[0][0]

    def allocations(self, trial_id: int) -> list[Alloc]:
        rows = self._rows(
            "SELECT id, queued_at, assigned_at, started_at, ended_at, exit_reason FROM allocations "
            "WHERE trial_id = ? ORDER BY queued_at",
            trial_id,
        )
        return [Alloc(*row) for row in rows]

    def checkpoint_of(self, allocation_id: str) -> tuple[float, int, int] | None:
        """(report_time, steps_completed, size_bytes) of the allocation's latest checkpoint."""
        rows = self._rows(
            "SELECT report_time, steps_completed, size_bytes FROM checkpoints "
            "WHERE allocation_id = ? ORDER BY report_time DESC LIMIT 1",
            allocation_id,
        )
        return rows[0] if rows else None

    def validations_since(self, trial_id: int, since: float) -> list[tuple[float, int]]:
        """(report_time, steps_completed) of the trial's validation reports received at or after `since`."""
        return self._rows(
            "SELECT report_time, steps_completed FROM metrics WHERE trial_id = ? AND "
            "metric_group = 'validation' AND report_time >= ? ORDER BY report_time",
            trial_id,
            since,
        )

    def preemption_asked(self, allocation_id: str) -> float | None:
        rows = self._rows(
            "SELECT time FROM events WHERE entity_type = 'allocation' AND entity_id = ? AND "
            "message LIKE 'preemption requested%' ORDER BY id LIMIT 1",
            allocation_id,
        )
        return rows[0][0] if rows else None

    def log_time(self, allocation_id: str, text: str) -> float | None:
        rows = self._rows(
            "SELECT timestamp FROM task_logs WHERE allocation_id = ? AND message LIKE ? ORDER BY id LIMIT 1",
            allocation_id,
            f"%{text}%",
        )
        return rows[0][0] if rows else None


@dataclass(frozen=True)
class Round:
    asked: float  # the master asks the trial to leave
    checkpointed: float  # its checkpoint is recorded
    exiting: float  # the trial printed that it returns from training
    released: float  # its allocation ended: the slots are free
    queued: float  # activate: the trial's new allocation is queued
    assigned: float
    spawned: float  # the agent started the process
    resumed: float  # the process printed that it loaded the checkpoint
    reported: float  # its first metric report reached the master
    checkpoint_mb: float

    @property
    def checkpoint_cost(self) -> float:
        return max(self.checkpointed, self.released) - self.asked

    @property
    def restore_cost(self) -> float:
        return self.reported - self.queued


class Mover:
    """Drives one trial through pause/activate rounds and reads what each cost."""

    def __init__(self, master: Master, records: Records, exp_id: int, trial_id: int, timeout: float) -> None:
        self.master, self.records, self.exp_id, self.trial_id, self.timeout = (
            master,
            records,
            exp_id,
            trial_id,
            timeout,
        )

    def _check_alive(self) -> None:
        state = self.records.trial_state(self.trial_id)
        if state in ENDED_TRIAL:
            raise RuntimeError(f"trial {self.trial_id} ended {state}: see {self.master.log_path}")

    def running(self, settle: int) -> Alloc:
        """The trial's live allocation, once its process has reported `settle` validations."""

        def ready() -> Alloc | None:
            self._check_alive()
            allocs = self.records.allocations(self.trial_id)
            live = allocs[-1] if allocs and allocs[-1].ended_at is None else None
            if live is None or live.started_at is None:
                return None
            return live if len(self.records.validations_since(self.trial_id, live.started_at)) >= settle else None

        return wait_for(ready, self.timeout, interval=0.1, what=f"trial {self.trial_id} to report {settle} steps")

    def leave(self, alloc: Alloc) -> tuple[Alloc, float, tuple[float, int, int], float]:
        """Pause; wait until the allocation ended with a checkpoint and the trial is PAUSED. Returns the
        ended allocation, when preemption was asked, the checkpoint, and the trial's 'exiting' line's time."""
        self.master.api("POST", f"/api/v1/experiments/{self.exp_id}/pause", expect=None)

        def left() -> tuple[Alloc, float, tuple[float, int, int]] | None:
            self._check_alive()
            ended = next(a for a in self.records.allocations(self.trial_id) if a.id == alloc.id)
            if ended.ended_at is None or self.records.trial_state(self.trial_id) != "STATE_PAUSED":
                return None
            ckpt = self.records.checkpoint_of(alloc.id)
            if ckpt is None:
                raise RuntimeError(f"allocation {alloc.id} ended ({ended.exit_reason!r}) without a checkpoint")
            asked = self.records.preemption_asked(alloc.id)
            if asked is None:
                raise RuntimeError(f"allocation {alloc.id} ended with no 'preemption requested' event")
            return ended, asked, ckpt

        ended, asked, ckpt = wait_for(
            left, self.timeout, interval=0.05, what=f"allocation {alloc.id} to checkpoint and end"
        )
        exiting = wait_for(
            lambda: self.records.log_time(alloc.id, EXITING_LINE),
            self.timeout,
            interval=0.1,
            what=f"the '{EXITING_LINE}' log line of allocation {alloc.id}",
        )
        return ended, asked, ckpt, exiting

    def come_back(self, before: Alloc, checkpoint_steps: int) -> tuple[Alloc, float, float]:
        """Activate; wait for the new allocation's first report (after the checkpoint's step) and for
        its 'resumed' log line. Returns the allocation, the report's and the line's times."""
        self.master.api("POST", f"/api/v1/experiments/{self.exp_id}/activate", expect=None)

        def reported() -> tuple[Alloc, float] | None:
            self._check_alive()
            allocs = self.records.allocations(self.trial_id)
            new = allocs[-1]
            if new.id == before.id or new.started_at is None:
                return None
            reports = self.records.validations_since(self.trial_id, new.queued_at)
            if not reports:
                return None
            at, steps = reports[0]
            if steps != checkpoint_steps + 1:
                raise RuntimeError(
                    f"the resumed trial's first report is for batch {steps}, not "
                    f"{checkpoint_steps + 1}: it did not resume from its checkpoint"
                )
            return new, at

        new, at = wait_for(reported, self.timeout, interval=0.05, what="the trial's first report after resuming")
        resumed = wait_for(
            lambda: self.records.log_time(new.id, RESUMED_LINE),
            self.timeout,
            interval=0.1,
            what=f"the '{RESUMED_LINE}' log line of allocation {new.id}",
        )
        return new, at, resumed

    def round(self, settle: int) -> Round:
        alloc = self.running(settle)
        ended, asked, (checkpointed, steps, size), exiting = self.leave(alloc)
        new, reported, resumed = self.come_back(ended, steps)
        assert ended.ended_at is not None and new.assigned_at is not None and new.started_at is not None
        return Round(
            asked=asked,
            checkpointed=checkpointed,
            exiting=exiting,
            released=ended.ended_at,
            queued=new.queued_at,
            assigned=new.assigned_at,
            spawned=new.started_at,
            resumed=resumed,
            reported=reported,
            checkpoint_mb=size / 1e6,
        )


def run_rounds(args: argparse.Namespace, work: Path) -> tuple[list[Round], float]:
    """The rounds, and how long the trial's first (fresh, checkpoint-less) start took to report."""
    master = Master(work, {"checkpoint_storage": {"type": "shared_fs", "host_path": str(work / "ckpts")}})
    master.start()
    agent = LocalAgent(work, master.url, "agent-0", token=master.agent_token).start()
    try:
        wait_for(lambda: agent_connected(master, agent.agent_id), 60, what="the agent to connect")
        body = {"config": experiment_config(args), "modelDefinition": pack_model_dir(EXAMPLE), "activate": True}
        exp_id = master.api("POST", "/api/v1/experiments", body)["experiment"]["id"]
        trial_id = wait_for(
            lambda: master.api("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"], 60, what="the trial"
        )[0]["id"]
        mover = Mover(master, Records(work / "master-data" / "pedl.db"), exp_id, trial_id, args.timeout)
        first = mover.running(1)
        fresh = mover.records.validations_since(trial_id, first.queued_at)[0][0] - first.queued_at
        rounds: list[Round] = []
        for i in range(args.rounds):
            r = mover.round(args.settle)
            rounds.append(r)
            print(
                f"  round {i + 1}: checkpoint {r.checkpoint_cost:.2f}s ({r.checkpoint_mb:.0f} MB), "
                f"restore {r.restore_cost:.2f}s",
                flush=True,
            )
        master.api("POST", f"/api/v1/experiments/{exp_id}/kill", expect=None)
        return rounds, fresh
    finally:
        agent.stop()
        master.stop()


def figures(args: argparse.Namespace, rounds: list[Round], fresh: float) -> list[Figure]:
    mb = median([r.checkpoint_mb for r in rounds])
    how = (
        f"{len(rounds)} pause/activate rounds of examples/torch_mlp (hidden_size {args.hidden_size}, "
        f"{mb:.0f} MB checkpoint, shared_fs on local disk), one local agent, SQLite"
    )

    def p50(f: Callable[[Round], float]) -> float:
        return median([f(r) for r in rounds])

    ckpt = [r.checkpoint_cost for r in rounds]
    restore = [r.restore_cost for r in rounds]
    return [
        Figure(
            NAME,
            "checkpoint cost, p50",
            median(ckpt),
            "s",
            f"{how}; preemption requested → checkpoint recorded and allocation ended (slots free)",
        ),
        Figure(NAME, "checkpoint cost, max", max(ckpt), "s", ""),
        Figure(
            NAME,
            "restore cost, p50",
            median(restore),
            "s",
            "new allocation queued (activate) → first metric report of the process resumed from the checkpoint",
        ),
        Figure(NAME, "restore cost, max", max(restore), "s", ""),
        Figure(
            NAME,
            "  preemption requested → checkpoint recorded, p50",
            p50(lambda r: r.checkpointed - r.asked),
            "s",
            "the trial's long poll sees the signal, finishes its batch, torch.save, reports",
        ),
        Figure(
            NAME,
            "  checkpoint recorded → allocation ended, p50",
            p50(lambda r: r.released - r.checkpointed),
            "s",
            "the process exits (reports flushed, Python and torch torn down), the agent reports it, the master "
            f"frees the slots; {p50(lambda r: r.released - r.exiting):.2f}s of it after the trial's "
            "last line ('checkpoint saved, exiting')",
        ),
        Figure(
            NAME,
            "  queued → process spawned, p50",
            p50(lambda r: r.spawned - r.queued),
            "s",
            f"scheduling, start to the agent, spawn (assigned after {p50(lambda r: r.assigned - r.queued):.3f}s)",
        ),
        Figure(
            NAME,
            "  spawned → checkpoint loaded, p50",
            p50(lambda r: r.resumed - r.spawned),
            "s",
            "python + import torch, pedl.core.init, torch.load of the checkpoint (its log line's time)",
        ),
        Figure(
            NAME,
            "  checkpoint loaded → first report, p50",
            p50(lambda r: r.reported - r.resumed),
            "s",
            "one training batch, one validation, the report's trip",
        ),
        Figure(
            NAME,
            "fresh start → first report",
            fresh,
            "s",
            "the trial's first start, no checkpoint, for comparison with the restore cost",
        ),
    ]


def measure(args: argparse.Namespace) -> list[Figure]:
    with work_dir("move", args.keep) as work:
        rounds, fresh = run_rounds(args, work)
    return figures(args, rounds, fresh)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.move_cost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rounds", type=int, default=3, help="pause/activate rounds measured (default 3)")
    p.add_argument(
        "--hidden-size",
        type=int,
        default=2560,
        help="the MLP's hidden width; 2560 gives 26 MB of parameters (default 2560)",
    )
    p.add_argument("--settle", type=int, default=3, help="batches the trial reports before each pause (default 3)")
    p.add_argument("--timeout", type=float, default=120.0, help="give up on one step of a round after this (s)")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

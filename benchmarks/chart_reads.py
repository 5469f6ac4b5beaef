"""Chart reads: a trial's and an experiment's downsampled metric series (what the WebUI's charts ask
for), read by the master's service on SQLite and on PostgreSQL, from the digests and from the reports
themselves, and how fast the digester builds the digests of reports already stored.

Sizes (the defaults; --quick divides them by 10): one trial of 1,000,000 training reports; an
experiment of 200 trials × 20,000 training reports and 2,000 validation reports each."""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from sqlalchemy import insert, text

from benchmarks.harness import Figure, add_common_args, median, percentile, run_main, work_dir
from pedl.master.db import migrate, models
from pedl.master.db.engine import Database
from pedl.master.metrics import digest_queue
from pedl.master.metrics import digests as metric_digests
from pedl.master.metrics import series as metric_series

NAME = "chart_reads"
BATCH = 20_000


@contextmanager
def database(kind: str, work: Path) -> Iterator[Database]:
    if kind == "sqlite":
        db = Database(f"sqlite:///{work / 'pedl.db'}")
        migrate.upgrade(db.engine)
        yield db
        db.dispose()
        return
    from tests.support.databases import fresh_postgres_db

    from pedl.config.master_config import DatabaseConfig, MasterConfig

    with fresh_postgres_db() as fields:
        db = Database(MasterConfig(data_dir=work, db=DatabaseConfig(**fields)).database_url())
        migrate.upgrade(db.engine)
        yield db
        db.dispose()


def seed_trials(db: Database, experiment_id: int, trials: int) -> list[int]:
    with db.session() as s:
        if s.get(models.User, 1) is None:
            s.add(models.User(id=1, username="bench", password_hash="", created_at=0.0, modified_at=0.0))
            s.flush()
        s.add(
            models.Experiment(
                id=experiment_id,
                name=f"e{experiment_id}",
                owner_id=1,
                state="STATE_ACTIVE",
                config={},
                original_config="",
                resource_pool="default",
                start_time=0.0,
            )
        )
        s.flush()
        rows = [
            models.Trial(
                experiment_id=experiment_id,
                request_id=str(i),
                task_id=f"{experiment_id}.{i}",
                hparams={},
                seed=0,
                state="STATE_COMPLETED",
                start_time=0.0,
                summary_metrics={},
            )
            for i in range(trials)
        ]
        s.add_all(rows)
        s.flush()
        return [t.id for t in rows]


def store(db: Database, trial_id: int, group: str, steps: range, rng: random.Random) -> None:
    """The reports (loss and accuracy, noisy) and the summary metrics.record would have left."""
    rows = []
    last: dict = {}
    for step in steps:
        last = {"loss": 1.0 / (1 + step / 1000) + rng.gauss(0, 0.05), "accuracy": rng.random()}
        rows.append(
            {
                "trial_id": trial_id,
                "trial_run_id": 1,
                "group": group,
                "steps_completed": step,
                "report_time": 0.0,
                "metrics": last,
            }
        )
        if len(rows) == BATCH:
            with db.session() as s:
                s.execute(insert(models.Metric), rows)
            rows = []
    with db.session() as s:
        if rows:
            s.execute(insert(models.Metric), rows)
        trial = s.get(models.Trial, trial_id)
        trial.summary_metrics = {
            **trial.summary_metrics,
            f"latest_{group}": {"steps_completed": steps[-1], "metrics": last},
        }


def digest_everything(db: Database) -> tuple[float, int]:
    queue = digest_queue.DigestQueue()
    started = time.perf_counter()
    metric_digests.sweep(db, queue)
    while metric_digests.digest_pass(db, queue):
        pass
    with db.read_session() as s:
        marks = s.scalar(text("SELECT count(*) FROM metric_digest_marks"))
    return time.perf_counter() - started, marks


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def plans(db: Database, trial_ids: list[int]) -> list[str]:
    """The query plans of the two reads a digested chart makes: the digests, and the reports after them."""
    with db.read_session() as s:
        dialect = s.get_bind().dialect.name
        statements = {
            "digests": metric_digests.load_statement(trial_ids, "training", ["loss"]),
            "tail": metric_series.tail_query(dialect, trial_ids, "training", ["loss"]),
        }
        out = []
        for name, stmt in statements.items():
            compiled = stmt.compile(dialect=s.get_bind().dialect, compile_kwargs={"literal_binds": True})
            prefix = "EXPLAIN QUERY PLAN " if dialect == "sqlite" else "EXPLAIN "
            rows = s.execute(text(prefix + str(compiled))).all()
            out.append(f"{dialect} {name}: " + " | ".join(str(r[-1]) for r in rows))
        return out


def measure_one(kind: str, args: argparse.Namespace) -> list[Figure]:
    scale = 10 if args.quick else 1
    one_trial, trials = 1_000_000 // scale, args.trials // scale
    training, validation = 20_000 // scale, 2_000 // scale
    rng = random.Random(1)
    figures = []
    with work_dir(f"{NAME}-{kind}", keep=args.keep) as work, database(kind, work) as db:
        started = time.perf_counter()
        [big] = seed_trials(db, 1, 1)
        store(db, big, "training", range(1, one_trial + 1), rng)
        ids = seed_trials(db, 2, trials)
        for trial_id in ids:
            store(db, trial_id, "training", range(1, training + 1), rng)
            store(db, trial_id, "validation", range(10, 10 * validation + 1, 10), rng)
        seeded = time.perf_counter() - started
        rows = one_trial + trials * (training + validation)
        ctx = SimpleNamespace(db=db)
        reads = {
            f"trial of {one_trial:,} training reports": lambda: metric_series.for_trial(
                ctx, big, group="training", names=["loss"], max_points=1000
            ),
            f"experiment of {trials} trials × {training:,} training reports": lambda: metric_series.for_experiment(
                ctx, 2, group="training", names=["loss"], max_points=500
            ),
            f"experiment of {trials} trials × {validation:,} validation reports": lambda: metric_series.for_experiment(
                ctx, 2, group="validation", names=["loss"], max_points=500
            ),
        }
        raw = {what: median(timed(read, 2)) for what, read in reads.items()}
        took, marks = digest_everything(db)
        figures.append(
            Figure(
                NAME,
                f"{kind}: digests built for reports already stored",
                rows / took,
                "reports/s",
                f"{rows:,} reports, {marks} (trial, group) digested in {took:.1f} s; seeding took {seeded:.0f} s",
            )
        )
        for what, read in reads.items():
            times = timed(read, args.repeat)
            figures.append(
                Figure(
                    NAME,
                    f"{kind}: {what}, p95",
                    percentile(times, 95) * 1000,
                    "ms",
                    f"p50 {median(times) * 1000:.1f} ms over {args.repeat}, the first (no answer "
                    f"kept yet) {times[0] * 1000:.1f} ms; from the reports themselves "
                    f"{raw[what] * 1000:.0f} ms",
                )
            )
        if args.plans:
            for line in plans(db, ids[:3]):
                print(line)
    return figures


def measure(args: argparse.Namespace) -> list[Figure]:
    figures = []
    for kind in args.db:
        figures += measure_one(kind, args)
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.chart_reads", description=__doc__)
    add_common_args(p)
    p.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    p.add_argument("--plans", action="store_true", help="print the query plans of a digested read")
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

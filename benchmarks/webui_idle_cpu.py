"""What an idle open WebUI page costs the master: its CPU seconds (user + system, /proc) per open page
per minute over the 0-page baseline, and the requests each page makes per minute (counted in the
browser), for the experiments list, an experiment page and the cluster page, with 1 and 5 pages open.
A small cluster: a few experiments, one of them with trials and reports, and one connected agent."""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from benchmarks.harness import Figure, add_common_args, run_main, work_dir
from benchmarks.metric_ingestion import cpu_seconds
from benchmarks.webui_common import (
    AGENT_ROWS,
    CURVES_DRAWN,
    LIST_ROWS,
    READY_SCRIPT,
    ExperimentSpec,
    add_experiments,
    add_reports,
    add_trials,
    chromium,
    database,
    db_name,
    logged_in_context,
    master_config,
    migrated_master,
    on_each_database,
    sessions,
    wait_for_digests,
)
from pedl.devcluster import LocalAgent, Master, agent_connected, wait_for
from pedl.master.lifecycle.states import ExperimentState

NAME = "webui_idle_cpu"


@dataclass
class Window:
    """One measuring window: the master's CPU seconds and the browser's requests during it."""

    seconds: float
    cpu: float
    responses: Counter  # (status, path) -> count, all pages together

    @property
    def cpu_per_minute(self) -> float:
        return 60 * self.cpu / self.seconds


def master_window(master: Master, seconds: float, wait: Callable[[float], None]) -> Window:
    before = cpu_seconds(master.pid)
    started = time.monotonic()
    wait(seconds)
    elapsed = time.monotonic() - started
    after = cpu_seconds(master.pid)
    if before is None or after is None:
        raise RuntimeError("no /proc/<pid>/stat: this benchmark needs Linux")
    return Window(elapsed, after - before, Counter())


def status_counts(w: Window) -> Counter:
    out: Counter = Counter()
    for (status, _), n in w.responses.items():
        out[status] += n
    return out


def full_answers(w: Window) -> str:
    """Which requests the master answered in full (not 304), most first: what an idle page costs."""
    full = Counter({path: n for (status, path), n in w.responses.items() if status != 304})
    return ", ".join(f"{path} {n}" for path, n in full.most_common(5)) or "none"


def seed(master: Master, args: argparse.Namespace) -> int:
    """A few ended experiments (two trials each) and one with `args.trials` trials and reports; its id."""
    rnd = random.Random(3)
    engine, make_session = sessions(master)
    try:
        with make_session() as s:
            specs = [
                ExperimentSpec(f"idle-{i}", rnd.choice([ExperimentState.COMPLETED, ExperimentState.CANCELED]))
                for i in range(args.experiments - 1)
            ]
            specs.append(ExperimentSpec("idle: the one with curves", ExperimentState.COMPLETED))
            exps = add_experiments(s, master_config(master), specs, start=time.time() - 86400)
            trials = add_trials(s, [(e, args.trials if e is exps[-1] else 2) for e in exps], rnd, length=1000)
            watched = [t.id for t in trials if t.experiment_id == exps[-1].id]
            s.commit()
    finally:
        engine.dispose()
    add_reports(master, watched, 1000, 10, exps[-1].config["searcher"]["metric"], exps[-1].start_time)
    return exps[-1].id


def open_pages(browser: Any, master: Master, path: str, ready: str, n: int, timeout_s: float) -> tuple[Any, list[Any]]:
    """A logged-in context with `n` pages on `path`, each loaded until `ready` holds."""
    context = logged_in_context(browser, master.url, READY_SCRIPT % ready)
    pages = [context.new_page() for _ in range(n)]
    for page in pages:
        page.goto(f"{master.url}{path}")
    for page in pages:
        page.wait_for_function(
            "() => window.__bench && window.__bench.paintedAt !== undefined", timeout=timeout_s * 1000
        )
    return context, pages


def pages_window(master: Master, pages: list[Any], seconds: float) -> Window:
    """The master's CPU and every page's responses while the pages sit open; the sync API delivers
    the browser's events while the first page waits."""
    statuses: Counter = Counter()

    def count(r: Any) -> None:
        statuses[(r.status, urlsplit(r.url).path)] += 1

    for page in pages:
        page.on("response", count)
    try:
        window = master_window(master, seconds, lambda s: pages[0].wait_for_timeout(s * 1000))
    finally:
        for page in pages:
            page.remove_listener("response", count)
    window.responses = statuses
    return window


def measure_one(kind: str, args: argparse.Namespace) -> list[Figure]:
    label = db_name(kind)
    with work_dir(f"webui-idle-{kind}", args.keep) as work, database(kind) as db:
        master = migrated_master(work, db)
        exp_id = seed(master, args)
        master.start()
        agent = LocalAgent(work, master.url, "agent-0", token=master.agent_token) if args.agent else None
        try:
            if agent:
                agent.start()
                wait_for(lambda: agent_connected(master, "agent-0"), 60, what="the agent to connect")
            # the seeded reports are digested in the background after the start: wait, or the baseline holds it
            wait_for_digests(master, {"training": 1000, "validation": 1000}, args.trials, args.timeout)
            time.sleep(args.settle)
            baseline = [master_window(master, args.window, time.sleep)]
            kinds = {
                "experiments list": ("/experiments", LIST_ROWS),
                "experiment page": (f"/experiments/{exp_id}", CURVES_DRAWN % args.trials),
                "cluster page": ("/cluster", AGENT_ROWS if agent else "(doc) => doc.querySelector('h1')"),
            }
            measured: list[tuple[str, int, Window, int]] = []
            with chromium() as browser:
                for (what, (path, ready)), n in itertools.product(kinds.items(), args.pages):
                    context, pages = open_pages(browser, master, path, ready, n, args.timeout)
                    hidden = sum(p.evaluate("() => document.visibilityState") != "visible" for p in pages)
                    pages[0].wait_for_timeout(args.settle * 1000)
                    measured.append((what, n, pages_window(master, pages, args.window), hidden))
                    context.close()
            time.sleep(args.settle)
            baseline.append(master_window(master, args.window, time.sleep))
        finally:
            if agent:
                agent.stop()
            master.stop()
    return figures_of(label, args, agent is not None, baseline, measured)


def figures_of(
    label: str,
    args: argparse.Namespace,
    agent: bool,
    baseline: list[Window],
    measured: list[tuple[str, int, Window, int]],
) -> list[Figure]:
    base = sum(w.cpu_per_minute for w in baseline) / len(baseline)
    figures = [
        Figure(
            NAME,
            f"{label}: master CPU with no page open",
            base,
            "CPU s/min",
            f"mean of a {args.window:g} s window before and after the pages "
            f"({', '.join(f'{w.cpu_per_minute:.3f}' for w in baseline)}); "
            f"{'one agent connected' if agent else 'no agent'}",
        )
    ]
    for what, n, w, hidden in measured:
        per_page = (w.cpu_per_minute - base) / n
        requests = sum(w.responses.values())
        statuses = ", ".join(f"{s}: {c}" for s, c in sorted(status_counts(w).items()))
        figures.append(
            Figure(
                NAME,
                f"{label}: {what}, {n} open, master CPU per page",
                per_page,
                "CPU s/min/page",
                f"master at {100 * w.cpu / w.seconds:.1f}% of a core over {w.seconds:.0f} s (baseline "
                f"{100 * base / 60:.1f}%); {60 * requests / w.seconds / n:.0f} requests/min/page ({statuses}); "
                f"answered in full over the window: {full_answers(w)}"
                + (f"; {hidden} page(s) hidden" if hidden else ""),
            )
        )
    return figures


def measure(args: argparse.Namespace) -> list[Figure]:
    return on_each_database(args.db, lambda kind: measure_one(kind, args))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.webui_idle_cpu", description=__doc__)
    p.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite"])
    p.add_argument("--window", type=float, default=60, help="seconds each measurement lasts (default 60)")
    p.add_argument("--pages", type=int, nargs="+", default=[1, 5], help="pages open at once (default 1 5)")
    p.add_argument("--settle", type=float, default=3, help="seconds after loading before measuring (default 3)")
    p.add_argument("--experiments", type=int, default=20, help="experiments in the database (default 20)")
    p.add_argument("--trials", type=int, default=10, help="trials of the experiment shown (default 10)")
    p.add_argument("--no-agent", dest="agent", action="store_false", help="no agent (the cluster page is empty)")
    p.add_argument("--timeout", type=float, default=120, help="seconds a page may take to load (default 120)")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

"""The WebUI's experiment page for an experiment of 200 trials, each with 20,000 training and 2,000
validation reports: the time from page.goto to the learning curves drawn for every trial (Debian's
chromium through Playwright, a real master), the bytes the page loaded meanwhile, and the
metric-series request alone. The goal: under 1 s.

The seeded reports reach the master's metric digests through its background digester after it
starts (metrics/digests.py); the page is measured once they have caught up, the steady
state (--no-wait-digests: at once, while the digester works and charts read the reports)."""

from __future__ import annotations

import argparse
import contextlib
import random
import time

from benchmarks.harness import Figure, add_common_args, run_main, work_dir
from benchmarks.webui_common import (
    CURVES_DRAWN,
    READY_SCRIPT,
    ApiTiming,
    ExperimentSpec,
    Navigation,
    add_experiments,
    add_reports,
    add_trials,
    api_figure_detail,
    capture_console,
    chromium,
    database,
    db_name,
    logged_in_context,
    master_config,
    migrated_master,
    navigate,
    on_each_database,
    p50,
    p50_max,
    page_text,
    sessions,
    time_api,
    wait_for_digests,
)
from pedl.devcluster import Master
from pedl.master.lifecycle.states import ExperimentState

NAME = "webui_experiment_page"
GOAL_MS = 1000
POINTS_NOW = (
    "() => { const el = document.querySelector('[data-testid=learning-curves]');"
    " return el ? el.getAttribute('data-points') : 'no learning-curves element'; }"
)


def seed(master: Master, args: argparse.Namespace) -> tuple[int, int, float]:
    """(experiment id, metric rows, seconds the rows took): one completed experiment, its trials
    through the ORM, their reports in bulk."""
    rnd = random.Random(12)
    engine, make_session = sessions(master)
    try:
        with make_session() as s:
            [exp] = add_experiments(
                s,
                master_config(master),
                [ExperimentSpec(f"webui bench: {args.trials} trials", ExperimentState.COMPLETED, labels=["bench"])],
                start=time.time() - 86400,
            )
            trial_ids = [t.id for t in add_trials(s, [(exp, args.trials)], rnd, args.training)]
            s.commit()
    finally:
        engine.dispose()
    count, seconds = add_reports(
        master,
        trial_ids,
        args.training,
        args.validation_every,
        exp.config["searcher"]["metric"],
        exp.start_time,
        batch=args.batch,
    )
    return exp.id, count, seconds


def navigations(master: Master, exp_id: int, args: argparse.Namespace) -> tuple[list[Navigation], list[str], str]:
    """The page loaded `args.navigations` times in one logged-in context (the first cold: nothing
    cached); (navigations, what went wrong, the page's text when it went wrong)."""
    problems: list[str] = []
    shown = ""
    with chromium() as browser:
        context = logged_in_context(browser, master.url, READY_SCRIPT % (CURVES_DRAWN % args.trials))
        page = context.new_page()
        console = capture_console(page)
        done: list[Navigation] = []
        for _ in range(args.navigations):
            try:
                done.append(navigate(page, f"{master.url}/experiments/{exp_id}", args.timeout))
            except Exception as exc:  # a timeout or a crashed page is a result to report
                problems.append(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
                shown = page_text(page)
                with contextlib.suppress(Exception):  # a crashed page answers nothing
                    problems.append(f"data-points at the end: {str(page.evaluate(POINTS_NOW))[:300]}")
                break
        problems += list(dict.fromkeys(console))[-20:] if problems else []
        context.close()
    return done, problems, shown


def series_path(navs: list[Navigation]) -> str | None:
    for nav in navs:
        for path in nav.api_ms:
            if "/metric-series" in path:
                return "/" + path
    return None


def drawn(nav: Navigation) -> str:
    d = nav.detail or {}
    return f"{d.get('trials', 0)} trials, {d.get('points', 0):,} points drawn"


def settle_digests(master: Master, args: argparse.Namespace) -> tuple[str, float | None]:
    """(how the metric digests stood when measuring began, seconds waited for them)."""
    if not args.wait_digests:
        return "not waited for", None
    last_validation = args.training // args.validation_every * args.validation_every
    steps = {"training": args.training, **({"validation": last_validation} if last_validation else {})}
    try:
        took = wait_for_digests(master, steps, args.trials, args.digest_timeout)
    except TimeoutError:
        return f"not caught up after {args.digest_timeout:g} s", None
    return ("caught up", took) if took is not None else ("not kept by this master", None)


def figures_of(
    label: str, args: argparse.Namespace, rows: int, seed_s: float, navs: list[Navigation], api: ApiTiming, digests: str
) -> list[Figure]:
    size = f"{args.trials} trials x {args.training:,} training + {args.training // args.validation_every:,} validation"
    figures = [
        Figure(
            NAME,
            f"{label}: seeding the metrics table",
            rows / seed_s,
            "rows/s",
            f"{rows:,} rows ({size}) in {seed_s:.1f} s, batches of {args.batch:,}",
        )
    ]
    if navs:
        cold = navs[0]
        figures.append(
            Figure(
                NAME,
                f"{label}: cold navigation to curves drawn",
                cold.painted_ms,
                "ms",
                f"first load, nothing cached; condition held at {cold.ready_ms:,.0f} ms, seen by the benchmark at "
                f"{cold.wall_ms:,.0f} ms; {cold.requests} responses, {cold.body_bytes / 1e6:.2f} MB transferred; "
                f"{drawn(cold)}; goal < {GOAL_MS} ms",
            )
        )
    warm = navs[1:]
    if warm:
        painted = [n.painted_ms for n in warm]
        figures.append(
            Figure(
                NAME,
                f"{label}: warm navigation to curves drawn, p50",
                p50(painted),
                "ms",
                f"{p50_max(painted)}; {drawn(warm[-1])}; data-points complete at p50 "
                f"{p50([n.ready_ms for n in warm]):,.0f} ms (then the chart's draw and a frame); "
                f"wall (goto to seen) {p50_max([n.wall_ms for n in warm])}; "
                f"digests {digests}; goal < {GOAL_MS} ms",
            )
        )
        encoding = "compressed" if any(n.compressed for n in warm) else "no Content-Encoding: uncompressed"
        figures.append(
            Figure(
                NAME,
                f"{label}: bytes transferred per warm navigation",
                p50([n.body_bytes for n in warm]) / 1e6,
                "MB",
                f"response bodies as sent ({encoding}); decoded {p50([n.decoded_bytes for n in warm]) / 1e6:.2f} MB; "
                f"{p50([n.requests for n in warm]):.0f} responses, assets from the browser cache",
            )
        )
        in_browser = [ms for n in warm for path, ms in n.api_ms.items() if "/metric-series" in path]
        sizes = [size for n in warm for path, size in n.api_bytes.items() if "/metric-series" in path]
        if in_browser:
            figures.append(
                Figure(
                    NAME,
                    f"{label}: metric-series request in the browser, p50",
                    p50(in_browser),
                    "ms",
                    f"request start to response end; {p50_max(in_browser)}; body "
                    f"{sizes[-1][0] / 1e3:,.0f} kB as sent, {sizes[-1][1] / 1e3:,.0f} kB decoded",
                )
            )
    figures.append(
        Figure(
            NAME,
            f"{label}: metric-series API alone (httpx), p50 after the first",
            api.repeated_p50_ms,
            "ms",
            api_figure_detail(api, "the master just restarted"),
        )
    )
    return figures


def measure_one(kind: str, args: argparse.Namespace) -> list[Figure]:
    label = db_name(kind)
    with work_dir(f"webui-experiment-{kind}", args.keep) as work, database(kind) as db:
        master = migrated_master(work, db)
        exp_id, rows, seed_s = seed(master, args)
        print(f"{label}: seeded {rows:,} metric rows in {seed_s:.1f} s", flush=True)
        master.start()
        try:
            digests, digest_s = settle_digests(master, args)
            print(f"{label}: metric digests {digests}" + (f" in {digest_s:.0f} s" if digest_s else ""), flush=True)
            navs, problems, shown = navigations(master, exp_id, args)
            path = series_path(navs) or (
                f"/api/v1/experiments/{exp_id}/metric-series?group=validation&names=validation_loss&maxPoints=1000"
            )
            # a fresh master process, so that the first request computes its answer (one the page
            # asked for may be kept in memory)
            master.stop()
            master.start()
            settle_digests(master, args)
            api = time_api(master, path, args.api_repeat)
        finally:
            master.stop()
        if problems:
            print(f"{label}: the page did not draw every curve in time:\n  " + "\n  ".join(problems))
            print(f"the page showed:\n{shown}")
            print(f"master log tail:\n{master.log_text()[-3000:]}")
    figures = figures_of(label, args, rows, seed_s, navs, api, digests)
    if digest_s is not None:
        figures.insert(
            1,
            Figure(
                NAME,
                f"{label}: digests caught up after the master started",
                digest_s,
                "s",
                f"the master's background digester folding the {rows:,} seeded reports; the page is measured after it",
            ),
        )
    if problems:
        figures.append(
            Figure(NAME, f"{label}: navigations that did not draw every curve", 1, "count", "; ".join(problems)[:400])
        )
    return figures


def measure(args: argparse.Namespace) -> list[Figure]:
    return on_each_database(args.db, lambda kind: measure_one(kind, args))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.webui_experiment_page", description=__doc__)
    p.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite"])
    p.add_argument("--trials", type=int, default=200, help="trials of the experiment (default 200)")
    p.add_argument("--training", type=int, default=20000, help="training reports per trial, steps 1..N (default 20000)")
    p.add_argument(
        "--validation-every",
        type=int,
        default=10,
        help="a validation report every this many steps (default 10: 2,000 per trial)",
    )
    p.add_argument("--navigations", type=int, default=5, help="page loads; the first is reported apart (default 5)")
    p.add_argument("--api-repeat", type=int, default=5, help="metric-series requests timed alone (default 5)")
    p.add_argument("--batch", type=int, default=50_000, help="rows per executemany when seeding (default 50000)")
    p.add_argument("--timeout", type=float, default=300, help="seconds one navigation may take (default 300)")
    p.add_argument(
        "--no-wait-digests",
        dest="wait_digests",
        action="store_false",
        help="measure at once, while the master still digests the seeded reports",
    )
    p.add_argument(
        "--digest-timeout",
        type=float,
        default=900,
        help="seconds to wait for the master's metric digests to catch up (default 900)",
    )
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

"""The WebUI's experiments list over 10,000 experiments (mixed states, users and labels, a few trials
each): the time from page.goto to the first table rows shown (Debian's chromium through Playwright, a
real master), and the list request alone. The goal: under 500 ms."""

from __future__ import annotations

import argparse
import random
import time

from benchmarks.harness import Figure, add_common_args, run_main, work_dir
from benchmarks.webui_common import (
    LIST_ROWS,
    READY_SCRIPT,
    USER,
    ApiTiming,
    ExperimentSpec,
    Navigation,
    add_experiments,
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
)
from pedl.devcluster import Master
from pedl.master.lifecycle.states import ExperimentState

NAME = "webui_experiments_list"
GOAL_MS = 500
USERS = [USER, "alice", "bob", "carol", "dave"]
LABELS = ["nlp", "vision", "baseline", "ablation", "prod", "sweep"]
STATES = (
    [ExperimentState.COMPLETED] * 6 + [ExperimentState.CANCELED] * 2 + [ExperimentState.ERROR, ExperimentState.PAUSED]
)


def specs(n: int, rnd: random.Random) -> list[ExperimentSpec]:
    return [
        ExperimentSpec(
            name=f"{rnd.choice(['resnet', 'bert', 'mnist', 'gpt'])}-{i}",
            state=rnd.choice(STATES),
            owner=rnd.choice(USERS),
            labels=rnd.sample(LABELS, rnd.randint(0, 2)),
        )
        for i in range(n)
    ]


def seed(master: Master, args: argparse.Namespace) -> float:
    """Seconds it took: the experiments and their trials through the ORM models, one transaction."""
    rnd = random.Random(7)
    engine, make_session = sessions(master)
    started = time.perf_counter()
    try:
        with make_session() as s:
            exps = add_experiments(
                s, master_config(master), specs(args.experiments, rnd), start=time.time() - args.experiments * 60
            )
            trials = add_trials(s, [(e, rnd.randint(1, args.max_trials)) for e in exps], rnd, length=1000)
            for t in trials:
                t.best_metric = rnd.uniform(0.05, 2.0)
            s.commit()
        return time.perf_counter() - started
    finally:
        engine.dispose()


def navigations(master: Master, args: argparse.Namespace) -> tuple[list[Navigation], list[str]]:
    problems: list[str] = []
    with chromium() as browser:
        context = logged_in_context(browser, master.url, READY_SCRIPT % LIST_ROWS)
        page = context.new_page()
        console = capture_console(page)
        done: list[Navigation] = []
        for _ in range(args.navigations):
            try:
                done.append(navigate(page, f"{master.url}/experiments", args.timeout))
            except Exception as exc:  # a timeout or a crashed page is a result to report
                problems += [f"{type(exc).__name__}: {str(exc).splitlines()[0]}", f"page: {page_text(page)[:500]}"]
                break
        problems += list(dict.fromkeys(console))[-20:] if problems else []
        context.close()
    return done, problems


def list_path(navs: list[Navigation]) -> str:
    for nav in navs:
        for path in nav.api_ms:
            if path.startswith("api/v1/experiments?"):
                return "/" + path
    return "/api/v1/experiments?offset=0&limit=25&archived=false&sortBy=SORT_BY_ID&orderBy=ORDER_BY_DESC"


def figures_of(
    label: str, args: argparse.Namespace, seed_s: float, navs: list[Navigation], api: ApiTiming
) -> list[Figure]:
    figures = [
        Figure(
            NAME,
            f"{label}: seeding experiments and trials",
            seed_s,
            "s",
            f"{args.experiments:,} experiments, 1 to {args.max_trials} trials each, through the ORM",
        )
    ]
    if navs:
        cold = navs[0]
        figures.append(
            Figure(
                NAME,
                f"{label}: cold navigation to first rows",
                cold.painted_ms,
                "ms",
                f"first load, nothing cached; rows in the DOM at {cold.ready_ms:,.0f} ms, seen by "
                f"the benchmark at {cold.wall_ms:,.0f} ms; {cold.body_bytes / 1e3:,.0f} kB "
                f"transferred; goal < {GOAL_MS} ms",
            )
        )
    warm = navs[1:]
    if warm:
        painted = [n.painted_ms for n in warm]
        rows = (warm[-1].detail or {}).get("rows", 0)
        figures.append(
            Figure(
                NAME,
                f"{label}: warm navigation to first rows, p50",
                p50(painted),
                "ms",
                f"{p50_max(painted)}; {rows} rows shown; wall (goto to seen) "
                f"{p50_max([n.wall_ms for n in warm])}; goal < {GOAL_MS} ms",
            )
        )
        in_browser = [ms for n in warm for path, ms in n.api_ms.items() if path.startswith("api/v1/experiments?")]
        if in_browser:
            figures.append(
                Figure(
                    NAME,
                    f"{label}: list request in the browser, p50",
                    p50(in_browser),
                    "ms",
                    f"request start to response end; {p50_max(in_browser)}",
                )
            )
    figures.append(
        Figure(
            NAME,
            f"{label}: list API alone (httpx), p50 after the first",
            api.repeated_p50_ms,
            "ms",
            api_figure_detail(api, "after the page loads"),
        )
    )
    return figures


def measure_one(kind: str, args: argparse.Namespace) -> list[Figure]:
    label = db_name(kind)
    with work_dir(f"webui-list-{kind}", args.keep) as work, database(kind) as db:
        master = migrated_master(work, db, users=USERS[1:])
        seed_s = seed(master, args)
        print(f"{label}: seeded {args.experiments:,} experiments in {seed_s:.1f} s", flush=True)
        master.start()
        try:
            navs, problems = navigations(master, args)
            api = time_api(master, list_path(navs), args.api_repeat)
        finally:
            master.stop()
        if problems:
            print(f"{label}: the list did not show its rows in time:\n  " + "\n  ".join(problems))
            print(f"master log tail:\n{master.log_text()[-3000:]}")
    figures = figures_of(label, args, seed_s, navs, api)
    if problems:
        figures.append(Figure(NAME, f"{label}: navigations without rows", 1, "count", "; ".join(problems)[:400]))
    return figures


def measure(args: argparse.Namespace) -> list[Figure]:
    return on_each_database(args.db, lambda kind: measure_one(kind, args))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.webui_experiments_list", description=__doc__)
    p.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite"])
    p.add_argument("--experiments", type=int, default=10_000, help="experiments in the database (default 10000)")
    p.add_argument("--max-trials", type=int, default=5, help="each has 1 to this many trials (default 5)")
    p.add_argument("--navigations", type=int, default=6, help="page loads; the first is reported apart (default 6)")
    p.add_argument("--api-repeat", type=int, default=10, help="list requests timed alone (default 10)")
    p.add_argument("--timeout", type=float, default=120, help="seconds one navigation may take (default 120)")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

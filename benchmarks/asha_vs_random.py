"""adaptive_asha against random search on a synthetic objective, with no master: the searchers' pure
state machines drive an event simulation of K workers, each training one trial at one batch per tick.

The objective is a learning-curve model, loss(hp, t) = f(hp) + g(hp) / sqrt(t) + noise, where f is
the loss the trial converges to and g how slowly it gets there. Large learning rates converge fast
to a worse loss, so curves cross and early rungs can mislead, as they do in practice. Both searchers
get the same max_trials, max_length, workers and validation period; figures are medians over seeds.

GPU time is the number of batches trained, summed over trials. "to best" is the GPU time spent,
over all workers, up to the moment the search's best final metric (a trial's validation at
max_length) was reported."""

from __future__ import annotations

import argparse
import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Any

from benchmarks.harness import Figure, add_common_args, median, run_main
from pedl.config.experiment_config import parse_experiment_config
from pedl.scheduling.searcher import Searcher, SearcherActions, make_searcher

NAME = "asha_vs_random"

HYPERPARAMETERS = """\
hyperparameters:
  lr: {type: log, minval: -4, maxval: -1}
  width: {type: int, minval: 1, maxval: 8}
"""


# -- the objective -----------------------------------------------------------------------------------


def floor_loss(hp: dict[str, Any]) -> float:
    """f: where a trial converges; best at lr = 10**-2.5 and width 6."""
    x = math.log10(hp["lr"])
    return 0.2 + 0.3 * (x + 2.5) ** 2 / 2.25 + 0.05 * (hp["width"] - 6) ** 2 / 25


def slowness(hp: dict[str, Any]) -> float:
    """g: small learning rates converge slowly (2.0 at 1e-4, 0.8 at 1e-1)."""
    return 2.0 - 1.2 * (math.log10(hp["lr"]) + 4) / 3


def loss(hp: dict[str, Any], steps: int, noise: float, rng: random.Random) -> float:
    return floor_loss(hp) + slowness(hp) / math.sqrt(steps) + rng.gauss(0.0, noise)


# -- the simulation ----------------------------------------------------------------------------------


@dataclass
class Running:
    hparams: dict[str, Any]
    steps: int = 0
    segment_start: float = 0.0  # when the batches since the last validation began


@dataclass
class Outcome:
    trials_started: int = 0
    gpu_total: float = 0.0
    wall_total: float = 0.0
    best_final: float = math.inf
    best_true: float = math.inf  # f of the trial with the best final metric: what the user gets
    gpu_to_best: float = 0.0
    wall_to_best: float = 0.0
    finals: list[tuple[float, float]] = field(default_factory=list)  # (GPU time when reported, final loss)
    stopped_early: int = 0


def simulate(searcher: Searcher, *, workers: int, max_length: int, period: int, noise: float, seed: int) -> Outcome:
    out = Outcome()
    now = 0.0
    gpu_done = 0.0  # batches of finished validation segments
    running: dict[str, Running] = {}
    queue: list[tuple[str, dict[str, Any]]] = []
    events: list[tuple[float, int, str]] = []
    seq = 0

    def gpu_at(t: float) -> float:
        return gpu_done + sum(t - r.segment_start for r in running.values())

    def schedule(rid: str) -> None:
        nonlocal seq
        r = running[rid]
        delta = min(period, max_length - r.steps)
        seq += 1
        heapq.heappush(events, (now + delta, seq, rid))

    def apply(actions: SearcherActions) -> None:
        queue.extend((req.request_id, req.hparams) for req in actions.create)
        for rid in actions.stop:
            if rid in running:
                finish(rid, stopped=True)

    def start_queued() -> None:
        while queue and len(running) < workers:
            rid, hp = queue.pop(0)
            running[rid] = Running(hp, segment_start=now)
            out.trials_started += 1
            schedule(rid)

    def finish(rid: str, *, stopped: bool) -> None:
        nonlocal gpu_done
        r = running.pop(rid)
        gpu_done += now - r.segment_start
        out.stopped_early += stopped
        apply(searcher.on_trial_closed(rid))

    apply(searcher.initial())
    start_queued()
    while events:
        now, _, rid = heapq.heappop(events)
        r = running.get(rid)
        if r is None:
            continue  # stopped while this validation was pending
        gpu_done += now - r.segment_start
        r.steps += int(round(now - r.segment_start))
        r.segment_start = now
        # both searchers give trial i the same hyperparameters (seed and index), so noise seeded by
        # trial and step makes the comparison paired: r5 follows the same curve under both
        value = loss(r.hparams, r.steps, noise, random.Random(f"noise:{seed}:{rid}:{r.steps}"))
        actions = searcher.on_validation(rid, value, r.steps)
        if r.steps >= max_length:
            gpu = gpu_at(now)
            out.finals.append((gpu, value))
            if value < out.best_final:
                out.best_final, out.best_true = value, floor_loss(r.hparams)
                out.gpu_to_best, out.wall_to_best = gpu, now
        if rid in actions.stop:
            actions.stop.remove(rid)
            apply(actions)
            finish(rid, stopped=True)
        elif r.steps >= max_length:
            apply(actions)
            finish(rid, stopped=False)
        else:
            apply(actions)
            schedule(rid)
        start_queued()
    out.gpu_total, out.wall_total = gpu_done, now
    return out


def searcher_for(name: str, args: argparse.Namespace, seed: int, mode: str) -> Searcher:
    extra = f", mode: {mode}" if name == "adaptive_asha" else ""
    text = (
        f"entrypoint: x\nsearcher: {{name: {name}, metric: loss, max_trials: {args.trials}, "
        f"max_length: {args.max_length}, max_concurrent_trials: {args.workers}{extra}}}\n" + HYPERPARAMETERS
    )
    return make_searcher(parse_experiment_config(text), seed=seed)


def gpu_to_match(outcome: Outcome, target: float) -> float | None:
    """GPU time until a final metric at least as good as `target` was reported; None if never."""
    return next((gpu for gpu, value in sorted(outcome.finals) if value <= target), None)


# -- figures ---------------------------------------------------------------------------------------


def measure(args: argparse.Namespace) -> list[Figure]:
    seeds = list(range(args.seeds))
    setup = (
        f"{args.trials} trials, max_length {args.max_length} batches, {args.workers} workers, "
        f"validation every {args.period} batches, noise {args.noise}, median of {len(seeds)} seeds"
    )
    randoms = [
        simulate(
            searcher_for("random", args, s, ""),
            workers=args.workers,
            max_length=args.max_length,
            period=args.period,
            noise=args.noise,
            seed=s,
        )
        for s in seeds
    ]
    figures = _figures("random", randoms, setup)
    for mode in args.modes:
        ashas = [
            simulate(
                searcher_for("adaptive_asha", args, s, mode),
                workers=args.workers,
                max_length=args.max_length,
                period=args.period,
                noise=args.noise,
                seed=s,
            )
            for s in seeds
        ]
        label = f"adaptive_asha {mode}"
        figures += _figures(label, ashas, setup)
        figures.append(
            Figure(
                NAME,
                f"{label}: GPU time to best, relative to random",
                median([a.gpu_to_best / r.gpu_to_best for a, r in zip(ashas, randoms, strict=True)]),
                "x",
                "per-seed ratio, median",
            )
        )
        figures.append(
            Figure(
                NAME,
                f"{label}: total GPU time, relative to random",
                median([a.gpu_total / r.gpu_total for a, r in zip(ashas, randoms, strict=True)]),
                "x",
                "per-seed ratio, median",
            )
        )
        matched = [
            (m, a) for a, r in zip(ashas, randoms, strict=True) if (m := gpu_to_match(r, a.best_final)) is not None
        ]
        if matched:
            figures.append(
                Figure(
                    NAME,
                    f"random: GPU time to a final loss as good as {label}'s best",
                    median([m for m, _ in matched]),
                    "batches",
                    f"reached in {len(matched)} of {len(seeds)} seeds; median over those",
                )
            )
            figures.append(
                Figure(
                    NAME,
                    f"{label}: GPU saved for the same final loss",
                    median([m / a.gpu_to_best for m, a in matched]),
                    "x",
                    "random's GPU time to match / ASHA's GPU time to its best, per seed",
                )
            )
    return figures


def _figures(label: str, outcomes: list[Outcome], setup: str) -> list[Figure]:
    m = {
        key: median([getattr(o, key) for o in outcomes])
        for key in (
            "trials_started",
            "gpu_to_best",
            "gpu_total",
            "best_final",
            "best_true",
            "wall_to_best",
            "stopped_early",
        )
    }
    return [
        Figure(NAME, f"{label}: trials started", m["trials_started"], "trials", setup),
        Figure(NAME, f"{label}: trials stopped early", m["stopped_early"], "trials"),
        Figure(NAME, f"{label}: GPU time to the best final metric", m["gpu_to_best"], "batches", "summed over workers"),
        Figure(NAME, f"{label}: total GPU time", m["gpu_total"], "batches"),
        Figure(
            NAME,
            f"{label}: wall time to the best final metric",
            m["wall_to_best"],
            "batches",
            "simulated, one batch per tick per worker",
        ),
        Figure(NAME, f"{label}: best final loss", m["best_final"], "loss", "as reported, with noise"),
        Figure(
            NAME,
            f"{label}: converged loss of that trial",
            m["best_true"],
            "loss",
            "f(hp) without noise; the optimum is 0.2",
        ),
    ]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.asha_vs_random", description=__doc__)
    p.add_argument("--trials", type=int, default=128, help="max_trials for both searchers (default 128)")
    p.add_argument("--max-length", type=int, default=256, help="max_length in batches (default 256)")
    p.add_argument("--workers", type=int, default=8, help="parallel workers = max_concurrent_trials (default 8)")
    p.add_argument("--period", type=int, default=4, help="validate every N batches (default 4)")
    p.add_argument("--noise", type=float, default=0.02, help="std dev of the validation noise (default 0.02)")
    p.add_argument("--seeds", type=int, default=7, help="seeds; figures are medians (default 7)")
    p.add_argument(
        "--modes",
        nargs="+",
        default=["standard", "aggressive"],
        choices=["aggressive", "standard", "conservative"],
        help="adaptive_asha modes to run",
    )
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()

"""What every benchmark shares: the Figure it reports, percentiles, a temporary work directory and
the printing (a markdown table, or JSON with --json). Benchmarks print figures; they assert nothing."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

MODELS = Path(__file__).parent / "models"


@dataclass
class Figure:
    benchmark: str
    name: str
    value: float
    unit: str
    detail: str = ""


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def machine() -> str:
    text = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    if hasattr(os, "getloadavg"):
        # the benchmark itself keeps up to ~2 CPUs busy; more means other work shared the machine
        text += f", 1-minute load average at the end {os.getloadavg()[0]:.2f}"
    return text


@contextmanager
def work_dir(prefix: str, keep: bool = False) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"pedl-bench-{prefix}-"))
    try:
        yield path
    finally:
        if keep:
            print(f"(kept {path})")
        else:
            shutil.rmtree(path, ignore_errors=True)


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, database)")


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) >= 1:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def markdown(figures: Sequence[Figure]) -> str:
    lines = ["| benchmark | figure | value | unit | detail |", "|---|---|---:|---|---|"]
    lines += [f"| {f.benchmark} | {f.name} | {_fmt(f.value)} | {f.unit} | {f.detail} |" for f in figures]
    return "\n".join(lines)


def report(figures: Sequence[Figure], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"machine": machine(), "figures": [asdict(f) for f in figures]}, indent=2))
    else:
        print(f"\n{machine()}\n")
        print(markdown(figures))


def run_main(
    parser: argparse.ArgumentParser,
    measure: Callable[[argparse.Namespace], list[Figure]],
    argv: list[str] | None = None,
) -> list[Figure]:
    """Every benchmark's `main`: parse, measure, print the table (or JSON)."""
    args = parser.parse_args(argv)
    figures = measure(args)
    report(figures, args.json)
    return figures

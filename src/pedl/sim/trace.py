"""Trace loading for the simulator: the Alibaba "openb" pod list CSV (../shared/traces) turned into
jobs with an arrival time, a run time and a slot count, plus a count of every row left out and why."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from pedl.errors import InvalidArgument

# The columns the replay reads; the rest of the openb format (cpu_milli, memory_mib, gpu_spec, qos,
# pod_phase) is accepted and ignored. gpu_milli is optional: it only feeds the GPU-sharing count.
REQUIRED_COLUMNS = ("name", "num_gpu", "creation_time", "deletion_time", "scheduled_time")

_WINDOW_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(d|h|m|s)")
_WINDOW_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


class TraceError(InvalidArgument):
    """A trace file or a trace option (--trace, --window) that cannot be used."""


@dataclass(frozen=True)
class TraceJob:
    id: str
    arrival: float  # seconds from the trace start (creation_time)
    run_time: float  # deletion_time - scheduled_time
    slots: int  # GPUs, one slot each; a shared GPU (gpu_milli < 1000) counts as a whole one


@dataclass
class Window:
    start: float = 0.0
    end: float = math.inf

    def __contains__(self, t: float) -> bool:
        return self.start <= t < self.end

    def text(self) -> str:
        def point(t: float) -> str:
            return "" if math.isinf(t) else f"{t:.0f}" if t == int(t) else f"{t:g}"

        return f"{point(self.start)}:{point(self.end)}"


@dataclass
class TraceSummary:
    """What was read and what was left out; every row lands in exactly one count."""

    path: str
    window: Window = field(default_factory=Window)
    include_cpu_jobs: bool = False
    rows: int = 0
    jobs: int = 0
    skipped_missing_times: int = 0  # no scheduled_time or deletion_time (pods that never ran)
    skipped_nonpositive_run_time: int = 0
    outside_window: int = 0
    cpu_jobs_excluded: int = 0  # num_gpu == 0, left out unless include_cpu_jobs
    cpu_jobs_included: int = 0
    gpu_sharing_as_whole: int = 0  # num_gpu >= 1 with gpu_milli < 1000, replayed as whole GPUs

    def notes(self) -> list[str]:
        out = [f"{self.jobs} job(s) replayed from {self.rows} row(s) of {self.path}"]
        if self.window.start > 0 or not math.isinf(self.window.end):
            out.append(f"window {self.window.text()} s (by arrival): {self.outside_window} row(s) outside")
        if self.skipped_missing_times:
            out.append(f"{self.skipped_missing_times} row(s) skipped: no scheduled_time or deletion_time")
        if self.skipped_nonpositive_run_time:
            out.append(f"{self.skipped_nonpositive_run_time} row(s) skipped: run time <= 0")
        if self.include_cpu_jobs:
            out.append(f"{self.cpu_jobs_included} 0-GPU job(s) included (they need an agent, no slot)")
        else:
            out.append(f"{self.cpu_jobs_excluded} 0-GPU job(s) left out (--include-cpu-jobs to replay them)")
        if self.gpu_sharing_as_whole:
            out.append(
                f"{self.gpu_sharing_as_whole} GPU-sharing job(s) (gpu_milli < 1000) take a whole GPU: "
                "pedl has no fractional slots"
            )
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "window": self.window.text(),
            "rows": self.rows,
            "jobs": self.jobs,
            "skipped_missing_times": self.skipped_missing_times,
            "skipped_nonpositive_run_time": self.skipped_nonpositive_run_time,
            "outside_window": self.outside_window,
            "include_cpu_jobs": self.include_cpu_jobs,
            "cpu_jobs_excluded": self.cpu_jobs_excluded,
            "cpu_jobs_included": self.cpu_jobs_included,
            "gpu_sharing_as_whole": self.gpu_sharing_as_whole,
            "notes": self.notes(),
        }


def parse_point(text: str) -> float:
    """Seconds from a plain number ("86400") or a duration with units d, h, m, s ("10d", "1d12h")."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pos, value = 0, 0.0
        for match in _WINDOW_PART.finditer(text):
            if match.start() != pos:
                break
            value += float(match.group(1)) * _WINDOW_UNITS[match.group(2)]
            pos = match.end()
        if pos != len(text) or not text:
            raise ValueError(text) from None
    if value < 0 or math.isnan(value):
        raise ValueError(text)
    return value


def parse_window(text: str | None) -> Window:
    """START:END by arrival, either side optional ("10d:20d", "0:86400", "30d:", ":1h")."""
    if text is None:
        return Window()
    problem = f"--window: malformed {text!r}: use START:END in seconds or durations, e.g. 10d:20d or 0:86400"
    if text.count(":") != 1:
        raise TraceError(problem)
    start_text, end_text = text.split(":")
    try:
        start = parse_point(start_text) if start_text.strip() else 0.0
        end = parse_point(end_text) if end_text.strip() else math.inf
    except ValueError:
        raise TraceError(problem) from None
    if end <= start:
        raise TraceError(f"--window: {text!r} ends before it starts")
    return Window(start, end)


def _number(row: dict[str, str], column: str, line: int, path: Path) -> float | None:
    raw = (row.get(column) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise TraceError(f"{path} line {line}: {column} {raw!r} is not a number") from None
    if math.isnan(value):
        raise TraceError(f"{path} line {line}: {column} is NaN")
    return value


def load_trace(
    path: str | Path, window: Window | None = None, *, include_cpu_jobs: bool = False
) -> tuple[list[TraceJob], TraceSummary]:
    """Jobs sorted by arrival, and the summary of what was read."""
    path = Path(path)
    window = window or Window()
    summary = TraceSummary(path=str(path), window=window, include_cpu_jobs=include_cpu_jobs)
    try:
        handle = path.open(newline="")
    except FileNotFoundError:
        raise TraceError(f"--trace: no such file {str(path)!r}") from None
    except OSError as exc:
        raise TraceError(f"--trace: cannot read {str(path)!r}: {exc.strerror}") from None
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(
                f"--trace: {path} lacks required column(s) {', '.join(missing)} (needs {', '.join(REQUIRED_COLUMNS)})"
            )
        for line, row in enumerate(reader, start=2):
            summary.rows += 1
            gpus = _number(row, "num_gpu", line, path)
            if gpus is None or gpus < 0 or gpus != int(gpus):
                raise TraceError(f"{path} line {line}: num_gpu {row.get('num_gpu')!r} is not a whole number >= 0")
            created = _number(row, "creation_time", line, path)
            deleted = _number(row, "deletion_time", line, path)
            scheduled = _number(row, "scheduled_time", line, path)
            if created is None or deleted is None or scheduled is None:
                summary.skipped_missing_times += 1
                continue
            if created not in window:
                summary.outside_window += 1
                continue
            run_time = deleted - scheduled
            if run_time <= 0:
                summary.skipped_nonpositive_run_time += 1
                continue
            if gpus == 0:
                if not include_cpu_jobs:
                    summary.cpu_jobs_excluded += 1
                    continue
                summary.cpu_jobs_included += 1
            else:
                milli = _number(row, "gpu_milli", line, path) if "gpu_milli" in row else None
                if milli is not None and milli < 1000:
                    summary.gpu_sharing_as_whole += 1
            name = (row.get("name") or "").strip() or f"row-{line}"
            job_id = name if name not in seen else f"{name}@{line}"
            seen.add(job_id)
            jobs.append(TraceJob(job_id, created, run_time, int(gpus)))
    jobs.sort(key=lambda j: (j.arrival, j.id))
    summary.jobs = len(jobs)
    return jobs, summary
